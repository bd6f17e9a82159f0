"""Quorum vote through the web: started from the dashboard form, the engine with the offline
model behind LiteLLM stops at the vote gate, and a person picks, edits or asks for another
round on the run page; bad input at the gate; the command line; and the check that the
pattern lives in its package alone (plus its registry line)."""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from agents_app import engine
from agents_app.forms import HistoryFilterForm, StartRunForm
from agents_app.models import Run, RunItem

# Voters answer side by side on helper threads, each with its own database connection:
# they must see the committed run, so these tests commit (like the worker does).
pytestmark = pytest.mark.django_db(transaction=True)

TASK = "Compare three vector databases, then recommend one"


@pytest.fixture
def no_schedule(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk, countdown=None: None)


def start(client, **data) -> Run:
    r = client.post(reverse("start_run"), {"pattern": "vote", "task": TASK, **data})
    assert r.status_code == 302, r.content.decode()[:2000]
    return engine.run_inline(Run.objects.latest("pk").pk)


@pytest.fixture
def waiting(alice_client, no_schedule) -> Run:
    run = start(alice_client)
    assert run.status == "awaiting_vote_pick", run.error
    return run


def test_the_run_page_names_only_the_voters_the_run_has(alice_client, waiting):
    """Issue 32: a three-voter run's header listed voter_1 to voter_7."""
    page = alice_client.get(waiting.get_absolute_url()).content.decode()
    header = page.split('id="run-header"', 1)[1].split("</section>", 1)[0]
    assert re.findall(r"<span>(voter_\d|aggregator): ", header) == [
        "voter_1", "voter_2", "voter_3", "aggregator"]
    five = start(alice_client, voters="5")
    assert [r for r in five.models_used if r.startswith("voter_")] == [
        f"voter_{i}" for i in range(1, 6)]


def decide(client, run, htmx=False, **data):
    data.setdefault("seq", run.stage_seq)
    extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.post(reverse("vote_decision", args=[run.pk]), data, **extra)


def test_from_the_form_to_the_gate(alice_client, waiting):
    run = waiting
    # Only the roles a three-voter run uses (issue 32: the header listed seven voters).
    assert list(run.models_used) == ["voter_1", "voter_2", "voter_3", "aggregator"]
    assert run.options["voters"] == 3 and run.options["threshold"] == 75
    kinds = list(RunItem.objects.filter(run=run).values_list("kind", "key"))
    assert kinds == [("answer", "1:1"), ("answer", "1:2"), ("answer", "1:3"), ("grouping", "1")]
    assert run.events.filter(kind="gate_opened", message__contains="did not agree").exists()
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "<small>Quorum vote</small>" in page
    assert "2 of 3 voters agree (67%; 75% needed)" in page
    assert page.count('name="group" value="1"') == 1 and page.count('name="group" value="2"') == 1
    assert "Group 1: Start from “compare”." in page and "Group 2: Start from “three”." in page
    assert "Ask for round 2 of 2" in page and f'action="/runs/{run.pk}/vote/"' in page
    assert "voter_2: offline/default" in page  # each voter's model, in the header


def test_pick_completes_with_the_groups_answer(alice_client, waiting):
    r = decide(alice_client, waiting, action="pick", group="2", htmx=True)
    assert r.status_code == 200
    body = r.content.decode()
    assert "alice picked the answer of group 2" in body and 'id="gate-status"' in body
    assert "The run is finishing with the answer chosen." in body
    run = engine.run_inline(waiting.pk)
    assert run.status == "completed"
    assert run.answer.startswith("**Start from “three”.**")
    decision = RunItem.objects.get(run=run, kind="decision").data
    assert (decision["action"], decision["group"], decision["by"]) == ("pick", 2, "alice")
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "alice picked the answer of group 2" in page and 'name="action"' not in page



def test_the_chosen_groups_card_says_so_in_one_line(alice_client, waiting):
    """The card of the group whose answer ended the run points at the answer in the same hint
    line (hints are inline: two hint paragraphs in a row ran together) and does not repeat it."""
    decide(alice_client, waiting, action="pick", group="2")
    run = engine.run_inline(waiting.pk)
    page = alice_client.get(run.get_absolute_url()).content.decode()
    card = page.split('id="vote-group-1-2"', 1)[1].split("</article>", 1)[0]
    assert "shown: voter 2's answer, the run's answer (in full under “Answer”)." in card
    assert card.count('class="hint"') == 1 and 'class="md"' not in card
    other = page.split('id="vote-group-1-1"', 1)[1].split("</article>", 1)[0]
    assert "the run's answer" not in other and 'class="md"' in other

def test_edit_completes_with_the_edited_answer(alice_client, waiting):
    r = decide(alice_client, waiting, action="edit", group="1",
               answer="Use **pgvector**: it is already in Postgres.")
    assert r.status_code == 200
    run = engine.run_inline(waiting.pk)
    assert run.status == "completed"
    assert run.answer == "Use **pgvector**: it is already in Postgres."
    assert RunItem.objects.get(run=run, kind="decision").data["edited"] is True


def test_another_round_reaches_the_voters_and_settles(alice_client, waiting):
    r = decide(alice_client, waiting, action="again", feedback="Name one database.")
    assert r.status_code == 200 and "voters are answering again" in r.content.decode()
    run = engine.run_inline(waiting.pk)
    assert run.status == "completed", run.error
    assert "Name one database." in run.answer
    assert RunItem.objects.filter(run=run, kind="answer", key__startswith="2:").count() == 3
    grouping = RunItem.objects.get(run=run, kind="grouping", key="2").data
    assert grouping["agreement"] == 100 and grouping["settled"]
    voter_call = run.model_calls.filter(stage="vote:2").first()
    assert "Name one database." in json.dumps(voter_call.messages)
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "Round 2" in page and "The voters read your feedback" in page


def test_after_the_last_round_only_pick_and_edit_are_offered(alice_client, no_schedule):
    run = start(alice_client, max_rounds="1")
    assert run.status == "awaiting_vote_pick"
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'value="again"' not in page and "Round 1 was the last of 1" in page
    r = decide(alice_client, run, action="again", htmx=True)
    assert r.status_code == 400 and "the last of 1" in r.content.decode()
    assert Run.objects.get(pk=run.pk).status == "awaiting_vote_pick"


def test_a_high_enough_agreement_completes_without_asking(alice_client, no_schedule):
    run = start(alice_client, threshold="60")
    assert run.status == "completed" and run.answer.startswith("**Start from “compare”.**")
    assert not run.events.filter(kind="gate_opened").exists()


# --- bad input at the gate ------------------------------------------------------------------------
@pytest.mark.parametrize("data, status, message", [
    ({"action": "edit", "group": "1", "answer": "   "}, 400, "The edited answer is empty"),
    ({"action": "edit", "group": "1", "answer": "fine\x00text"}, 400, "control characters"),
    ({"action": "edit", "group": "1", "answer": "bidi\u202etext"}, 400, "control characters"),
    ({"action": "again", "feedback": "esc\x1b[2J"}, 400, "control characters"),
    ({"action": "pick", "group": "5"}, 400, "There is no group 5 in round 1"),
    ({"action": "pick", "group": "99"}, 400, "There is no such group."),
    ({"action": "pick", "group": "one"}, 400, "There is no such group."),
    ({"action": "pick"}, 400, "Choose the group"),
    ({"action": "approve", "group": "1"}, 400, "reload the page"),
    ({"group": "1"}, 400, "reload the page"),
])
def test_bad_decisions_are_refused_and_change_nothing(alice_client, waiting, data, status,
                                                      message):
    r = decide(alice_client, waiting, htmx=True, **data)
    body = r.content.decode()
    assert r.status_code == status and message in body, body[:3000]
    assert 'role="alert"' in body
    run = Run.objects.get(pk=waiting.pk)
    assert (run.status, run.stage_seq) == ("awaiting_vote_pick", waiting.stage_seq)
    assert not RunItem.objects.filter(run=run, kind="decision").exists()


def test_a_refused_edit_shows_the_text_again_without_control_characters(alice_client, waiting):
    r = decide(alice_client, waiting, htmx=True, action="edit", group="2",
               answer="My answer\x00 here")
    body = r.content.decode()
    assert r.status_code == 400 and "My answer here</textarea>" in body
    assert re.search(r'<details class="edit" open>', body)


def test_an_edit_sent_after_the_pick_names_who_picked_and_comes_back(alice_client, waiting):
    """Issue 32: a second tab's edit was dropped with a generic message."""
    seq = waiting.stage_seq
    assert decide(alice_client, waiting, action="pick", group="2").status_code == 200
    r = decide(alice_client, waiting, seq=seq, action="edit", group="1", htmx=True,
               answer="Insertion sort, <em>always</em>.")
    body = r.content.decode()
    assert r.status_code == 409
    assert re.search(r"no longer waiting for that decision.*At [\d:]+, alice picked the answer "
                     r"of group 2", body)
    unsent = body.split('id="unsent"', 1)[1]
    assert "Your edit of group 1&#x27;s answer" in unsent
    assert "Insertion sort, &lt;em&gt;always&lt;/em&gt;.</textarea>" in unsent
    decision = RunItem.objects.get(run=waiting, kind="decision").data
    assert (decision["action"], decision["group"]) == ("pick", 2)


def test_a_stale_page_gets_409(alice_client, waiting):
    r = decide(alice_client, waiting, seq=waiting.stage_seq - 1, action="pick", group="1",
               htmx=True)
    assert r.status_code == 409 and "no longer waiting" in r.content.decode()
    # the run has moved on: the header comes along, so the page shows its current status
    assert 'id="run-header" hx-swap-oob="true"' in r.content.decode()
    fine = decide(alice_client, waiting, action="pick", group="1", htmx=True)
    assert fine.status_code == 200 and 'id="run-header"' not in fine.content.decode()
    again = decide(alice_client, waiting, action="pick", group="2")  # the same page, twice
    assert again.status_code == 409


def test_another_users_run_is_404_and_unchanged(client, bob, waiting):
    client.force_login(bob)
    r = decide(client, waiting, action="pick", group="1")
    assert r.status_code == 404
    assert Run.objects.get(pk=waiting.pk).stage_seq == waiting.stage_seq


def test_anonymous_is_sent_to_sign_in(client, waiting):
    client.logout()
    r = decide(client, waiting, action="pick", group="1")
    assert r.status_code == 302 and r.url.startswith(reverse("login"))
    assert Run.objects.get(pk=waiting.pk).stage_seq == waiting.stage_seq


def test_a_run_of_another_pattern_has_no_vote(alice_client, gated_run):
    r = decide(alice_client, gated_run, action="pick", group="1")
    assert r.status_code == 404
    assert Run.objects.get(pk=gated_run.pk).status == "awaiting_plan_approval"


# --- the command line ------------------------------------------------------------------------------
def test_command_line_stops_at_the_gate_below_the_threshold(alice):
    out = StringIO()
    call_command("run_pattern", "vote", "--task", TASK, "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["status"] == "awaiting_vote_pick" and result["answer"] == ""
    grouping = next(i for i in result["items"] if i["kind"] == "grouping")
    assert grouping["agreement"] == 67
    out = StringIO()
    call_command("run_pattern", "vote", "--task", TASK, stdout=out)
    text = out.getvalue()
    assert "(Quorum vote): Awaiting your pick" in text
    assert "the voters did not agree enough" in text and f"/runs/{result['run'] + 1}/" in text


def test_command_line_options(alice):
    out = StringIO()
    call_command("run_pattern", "vote", "--task", TASK, "--voters", "5", "--threshold", "60",
                 "--max-rounds", "1", "--model", "voter_5=offline/default", "--json",
                 stdout=out)
    result = json.loads(out.getvalue())
    assert result["status"] == "completed"  # 3 of 5 is 60%
    assert sum(i["kind"] == "answer" for i in result["items"]) == 5
    with pytest.raises(CommandError, match="--voters"):
        call_command("run_pattern", "vote", "--task", "x", "--voters", "8", stdout=StringIO())
    with pytest.raises(CommandError, match="--threshold"):
        call_command("run_pattern", "vote", "--task", "x", "--threshold", "40",
                     stdout=StringIO())


# --- offered everywhere, named nowhere else --------------------------------------------------------
def test_the_form_the_command_and_the_run_page_offer_it(alice_client, waiting):
    form = StartRunForm()
    assert ("vote", "Quorum vote") in form.fields["pattern"].choices
    assert ("vote", "Quorum vote") in HistoryFilterForm().fields["pattern"].choices
    for name in ("voters", "threshold", "max_rounds", "model_voter_1", "model_voter_7",
                 "model_aggregator"):
        assert "vote" in form.fields[name].widget.attrs["data-patterns"].split(), name
    dashboard = alice_client.get(reverse("dashboard")).content.decode()
    assert '<option value="vote">Quorum vote</option>' in dashboard
    parser = __import__("agents_app.management.commands.run_pattern", fromlist=["Command"]) \
        .Command().create_parser("manage.py", "run_pattern")
    (positional,) = [a for a in parser._actions if a.dest == "pattern"]
    assert "vote" in positional.choices
    usage = parser.format_help()
    assert "--voters" in usage and "--threshold" in usage and "--max-rounds" in usage
    page = alice_client.get(waiting.get_absolute_url()).content.decode()
    assert f"Run {waiting.pk} <small>Quorum vote</small>" in page


# The key written as a pattern key: quoted, or in the package's module path or directory.
KEY_AS_PATTERN = re.compile(r"""["']vote["']|patterns\.vote\b|patterns/vote\b""")
SCANNED = ("agents_app", "reviews_app", "config", "templates", "static", "common")


def test_no_file_outside_the_package_and_the_registry_names_the_pattern():
    root = Path(settings.BASE_DIR)
    package = root / "agents_app" / "patterns" / "vote"
    registry = root / "agents_app" / "patterns" / "registry.py"
    files = [p for top in SCANNED for p in (root / top).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts
             and p.suffix not in (".pyc", ".png", ".ico", ".woff2")]
    assert len(files) > 50  # the check reads the real tree
    found = []
    for path in files:
        if path == registry or package in path.parents:
            continue
        text = path.read_text(errors="replace")
        found += [f"{path.relative_to(root)}: {m.group(0)}"
                  for m in KEY_AS_PATTERN.finditer(text)]
    assert found == []
    # The registry names the key and its package once, and the check would see a stray
    # mention.
    assert KEY_AS_PATTERN.findall(registry.read_text()) == ['"vote"', "patterns.vote"]
    assert KEY_AS_PATTERN.search('if run.pattern == "vote":')
    assert not KEY_AS_PATTERN.search("vote_pick, voters, devote, 'voter_1', reviews.voted")
