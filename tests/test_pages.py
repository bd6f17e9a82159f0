"""Pages that help: the start form has an address of its own, a wrong method gets a page that
says so, pattern names are words, and a completed run shows its answer once."""

from __future__ import annotations

import html as html_lib
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from agents_app import engine
from agents_app.models import Run
from agents_app.patterns import PATTERNS
from agents_app.rendering import render_markdown

from .test_access_matrix import CASES, app_url_names, runs, url_for  # noqa: F401 - fixture
from .test_change_views import repo  # noqa: F401 - the repository fixture

# ReWOO's tool calls run on helper threads; tests commit like the worker does.
pytestmark = pytest.mark.django_db(transaction=True)

PATTERN_KEYS = ("plan_execute_review", "plan_execute", "team_lead", "rewoo", "react",
                "reflective", "debate", "code_review")


@pytest.fixture
def no_schedule(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)


def start(client, **data) -> Run:
    response = client.post(reverse("start_run"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    return engine.run_inline(Run.objects.latest("pk").pk)


# --- the start form at /runs/new/ -------------------------------------------------------------
def test_get_runs_new_shows_the_start_form(alice_client):
    response = alice_client.get(reverse("start_run"))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="start-form"' in page and 'name="task"' in page and "Start run" in page
    assert f'action="{reverse("start_run")}"' in page


def test_get_reviews_new_leads_to_the_review_form(alice_client):
    response = alice_client.get(reverse("start_review"), follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == reverse("review_list") + "#new-review"
    assert 'id="new-review"' in response.content.decode()


def test_get_runs_new_needs_sign_in(client):
    response = client.get(reverse("start_run"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_a_bad_start_from_runs_new_says_why_and_creates_nothing(alice_client):
    response = alice_client.post(reverse("start_run"), {"pattern": "plan_execute", "task": " "})
    assert response.status_code == 400 and 'role="alert"' in response.content.decode()
    assert not Run.objects.exists()


# --- a wrong method: a page that says so --------------------------------------------------
def test_every_url_answers_a_wrong_method_with_a_page(client, alice, runs):  # noqa: F811
    """GET on every form address and POST on every page, for the owner: never a 500, never
    an empty 405; a 405 explains itself, keeps its Allow header and links to a page."""
    client.force_login(alice)
    assert set(CASES) == app_url_names()
    checked = 0
    for name in sorted(CASES):
        url, method, _ = url_for(name, runs)
        wrong = client.get(url) if method == "POST" else client.post(url, {})
        assert wrong.status_code != 500, (name, wrong.status_code)
        if wrong.status_code == 405:
            checked += 1
            body = wrong.content.decode()
            assert "This address does not work that way" in body, name
            assert wrong["Allow"], name
            back = re.search(r'<a href="([^"]+)">Go to the page it belongs to', body).group(1)
            assert client.get(back).status_code == 200, (name, back)
    assert checked >= 10  # every form address, and every page but the forms that accept both


def test_a_get_on_a_form_address_links_to_its_run(alice_client, alice):
    run = engine.create_run(alice, "plan_execute", "A task", options={}, enqueue=False,
                            models={"planner": "offline/default"})
    response = alice_client.get(reverse("cancel_run", args=[run.pk]))
    assert response.status_code == 405 and response["Allow"] == "POST"
    body = response.content.decode()
    assert "receives a form from another page" in body
    assert f'<a href="{reverse("run_detail", args=[run.pk])}">' in body
    run.refresh_from_db()
    assert run.status == "queued"


def test_a_405_for_someone_signed_out_still_has_a_body(client):
    response = client.get(reverse("logout"))
    assert response.status_code == 405 and b"does not work that way" in response.content


# --- pattern names in words -----------------------------------------------------------------
def plain(html: str) -> str:
    return " ".join(html_lib.unescape(re.sub(r"<[^>]*>", " ", html)).split())


def keys_shown(page: str) -> list[str]:
    """Pattern keys in the text a person reads (tags and attributes left out). "react" and
    "debate" are words too: as keys they would stand alone in an element."""
    text = plain(page)
    return [k for k in PATTERN_KEYS if re.search(rf"(?<![\w-]){k}(?![\w-])", text)
            and ("_" in k or k == "rewoo" or re.search(rf">\s*{k}\s*<", page))]


COMPLETED = {
    "plan_execute": {"task": "Collect the logs, then find the error, and finally write a "
                             "report.", "auto_approve": "on"},
    "reflective": {"task": "Write a short poem about rain."},
    "debate": {"task": "Should we use tabs or spaces?"},
    "team_lead": {"task": "Research and write a note on solar panels."},
    "react": {"task": "What is 6*7?"},
    "rewoo": {"task": "What is (3 + 4) * 6 and what time is it?"},
}


@pytest.mark.parametrize("pattern", sorted(COMPLETED))
def test_a_completed_run_page_shows_the_answer_once_and_the_pattern_in_words(
        alice_client, no_schedule, pattern):
    run = start(alice_client, pattern=pattern, **COMPLETED[pattern])
    assert run.status == "completed", run.error
    page = alice_client.get(run.get_absolute_url()).content.decode()
    label = PATTERNS[pattern].label
    assert f"<small>{html_lib.escape(label)}</small>" in page
    assert keys_shown(page) == []
    # The whole answer, as text, occurs once in the page's text.
    answer = plain(render_markdown(run.answer))
    assert len(answer) > 40, run.answer
    assert plain(page).count(answer) == 1, (pattern, answer, plain(page).count(answer))


def test_history_and_filters_name_patterns_in_words(alice_client, alice):
    for name in ("plan_execute", "team_lead", "rewoo"):
        engine.create_run(alice, name, f"A {name} task", options={}, enqueue=False,
                          models={"planner": "offline/default"})
    page = alice_client.get(reverse("dashboard")).content.decode()
    assert keys_shown(page.replace("A plan_execute task", "").replace("A team_lead task", "")
                      .replace("A rewoo task", "")) == []
    assert "Team lead" in page and "Plan and execute" in page


def test_command_line_names_the_pattern_in_words(alice):
    out = StringIO()
    call_command("run_pattern", "react", "--task", "What is 6*7?", "--user", "alice",
                 "--model", "agent=offline/default", stdout=out)
    first = out.getvalue().splitlines()[0]
    assert first.startswith(f"Run {Run.objects.get().pk} (ReAct (think, act, observe)): "), first


# --- the status after an action, for screen readers --------------------------------------
def test_every_page_has_the_live_status_region(alice_client):
    for url in (reverse("dashboard"), reverse("start_run"), reverse("review_list")):
        page = alice_client.get(url).content.decode()
        assert '<div id="live-status" class="visually-hidden" role="status" aria-live="polite"' \
            in page, url


def test_a_plain_form_cancel_says_so_on_the_page_it_returns_to(alice_client, alice):
    run = engine.create_run(alice, "plan_execute", "A task", options={}, enqueue=False,
                            models={"planner": "offline/default"})
    response = alice_client.post(reverse("cancel_run", args=[run.pk]), follow=True)
    page = response.content.decode()
    assert '<ul class="messages" data-announce><li class="info">Run cancelled.</li>' in page
    assert f'data-live-status="Run {run.pk}: Cancelled."' in page


def test_an_htmx_cancel_marks_its_notice_for_reading_out(alice_client, alice):
    run = engine.create_run(alice, "plan_execute", "A task", options={}, enqueue=False,
                            models={"planner": "offline/default"})
    page = alice_client.post(reverse("cancel_run", args=[run.pk]),
                             HTTP_HX_REQUEST="true").content.decode()
    assert '<p class="notice" data-announce>Run cancelled.</p>' in page
    assert page.lstrip().startswith('<section class="card run-header" id="run-header"')


# --- issue 32: pages that stay true ---------------------------------------------------------
def test_a_run_stopped_by_its_budget_says_budget_exceeded_once(alice_client, no_schedule):
    """The page said "Budget exceeded: Budget exceeded: used 155 of the 100 tokens…"."""
    run = start(alice_client, pattern="plan_execute", task="Collect logs, then find the error.",
                auto_approve="on", max_tokens="100")
    assert run.status == "budget_exceeded" and run.error.startswith("Budget exceeded: ")
    page = alice_client.get(run.get_absolute_url()).content.decode()
    header = plain(page.split('id="run-header"', 1)[1].split("</section>", 1)[0])
    assert header.count("Budget exceeded") == 2, header  # the status badge and the reason
    assert "Budget exceeded: used 155 of the 100 tokens allowed" in header


# --- issue 32: under make dev a missing page is the app's own 404 ---------------------------
@pytest.mark.parametrize("who", ["alice", "anonymous"])
def test_under_debug_an_unknown_address_is_the_apps_404_page(client, alice, settings, who):
    """make dev runs with DEBUG=true, which showed Django's technical 404 (every URL pattern,
    "You're seeing this error because you have DEBUG = True")."""
    settings.DEBUG = True
    if who == "alice":
        client.force_login(alice)
    response = client.get("/no/such/<page>/")
    assert response.status_code == 404
    page = response.content.decode()
    assert 'id="not-found"' in page and "There is no page here" in page
    assert "<code>/no/such/%3Cpage%3E/</code>" in page and "<page>" not in page
    assert "URLconf" not in page and "DEBUG = True" not in page
    assert 'id="live-status"' in page  # the app's own layout


def test_under_debug_a_run_of_someone_else_is_the_apps_404_page(bob_client, settings, alice):
    settings.DEBUG = True
    run = engine.create_run(alice, "plan_execute", "Collect logs.", options={}, models={},
                            enqueue=False)
    response = bob_client.get(run.get_absolute_url())
    assert response.status_code == 404
    page = response.content.decode()
    assert 'id="not-found"' in page and "DEBUG = True" not in page


def test_under_debug_a_missing_slash_is_still_added(alice_client, settings):
    settings.DEBUG = True
    response = alice_client.get("/runs/new")
    assert response.status_code == 301 and response["Location"] == "/runs/new/"


def test_quorum_debug_404_gives_django_s_page_back(alice_client, settings):
    settings.DEBUG = True
    settings.QUORUM_DEBUG_404 = True
    response = alice_client.get("/no/such/page/")
    assert response.status_code == 404 and "URLconf" in response.content.decode()


def test_without_debug_an_unknown_address_is_the_same_page(alice_client, settings):
    settings.DEBUG = False
    response = alice_client.get("/no/such/page/")
    assert response.status_code == 404 and 'id="not-found"' in response.content.decode()


# --- issue 32: the start form says what each pattern is for, and offers only its options ----
def test_the_start_form_says_in_one_line_what_each_pattern_is_for(alice_client):
    page = alice_client.get(reverse("start_run")).content.decode()
    from agents_app.patterns import task_patterns

    for pattern in task_patterns():
        purpose = pattern.purpose
        # One sentence, short enough to read at a glance under the pattern's name.
        assert purpose.startswith("For ") and purpose.endswith(".") and len(purpose) <= 90, \
            (pattern.name, purpose)
        assert purpose.count(". ") == 0, purpose
        assert (f'<p class="hint purpose" id="purpose-{pattern.name}" '
                f'data-for="{pattern.name}">{html_lib.escape(purpose)}</p>') in page


def test_the_start_form_offers_ask_person_to_react_only(alice_client):
    """ReWOO offered "ask person", then refused it ("ReWOO plans all its calls before any
    runs…"): each tool's box now names the patterns that take it."""
    page = alice_client.get(reverse("start_run")).content.decode()
    boxes = {value: patterns for patterns, value in
             re.findall(r'<label data-for="([^"]+)"><input type="checkbox" name="tools" '
                        r'value="(\w+)"', page)}
    assert boxes["ask_person"] == "react"
    assert boxes["calculator"] == boxes["current_time"] == "rewoo react"
    assert set(boxes) == set(PATTERNS["react"].options.model_fields["tools"].annotation
                             .__args__[0].__args__)
