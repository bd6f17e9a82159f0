"""A run's trace as a tree (run → stage → model call / tool call) with a timing waterfall, from
the database: times from the stored events and calls, tool calls where each pattern keeps them,
everything escaped, for the run's owner only; and cost and tokens per role in the header of
every pattern's page."""

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.models import AgentReport, Event, ModelCall, Run
from agents_app.patterns import PATTERNS

from .test_change_views import OFFLINE as CHANGE_OFFLINE
from .test_change_views import repo  # noqa: F401 - the repository fixture

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)


def build_trace(run):
    from agents_app.trace_tree import build_trace

    return build_trace(run)


def rows(root):
    from agents_app.trace_tree import rows

    return rows(root)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def event(run, seq, kind, when, **data):
    e = Event.objects.create(run=run, seq=seq, kind=kind, message=kind, data=data)
    Event.objects.filter(pk=e.pk).update(created_at=at(when))


def call(run, stage, role, key, ended, latency_ms, **extra):
    c = ModelCall.objects.create(run=run, stage=stage, role=role, key=key, model=extra.pop(
        "model", "gpt-4o"), latency_ms=latency_ms, **extra)
    ModelCall.objects.filter(pk=c.pk).update(created_at=at(ended))
    return c


@pytest.fixture
def timed_run(alice):
    """A plan-and-execute run with known times: planning 0–3 s (one 2 s call), a wait at the
    plan gate 3–10 s, a step 10–12 s (two calls of 1 s and 0.5 s), finished at 12 s."""
    run = Run.objects.create(owner=alice, pattern="plan_execute", task="Timed", status="completed",
                             models_used={"planner": "gpt-4o", "executor": "gpt-4o-mini"})
    Run.objects.filter(pk=run.pk).update(created_at=T0, finished_at=at(12))
    run.refresh_from_db()
    event(run, 1, "stage_started", 0.0, stage="plan:1")
    call(run, "plan:1", "planner", "plan", 2.5, 2000, prompt_tokens=100, completion_tokens=50,
         cost_usd=Decimal("0.003"))
    event(run, 2, "gate_opened", 3.0, gate="plan_approval")
    event(run, 3, "stage_started", 10.0, stage="step:1:0")
    call(run, "step:1:0", "executor", "step", 11.0, 1000, prompt_tokens=10, completion_tokens=5,
         cost_usd=Decimal("0.001"), model="gpt-4o-mini")
    call(run, "step:1:0", "executor", "step:retry", 11.8, 500, error="timed out",
         model="gpt-4o-mini")
    event(run, 4, "run_finished", 12.0, status="completed")
    return run


def test_the_tree_nests_calls_in_their_stages_with_times_from_the_database(timed_run):
    root = build_trace(timed_run)
    assert root.kind == "run" and root.seconds == pytest.approx(12)
    assert [(s.kind, s.detail) for s in root.children] == [
        ("stage", "plan:1"), ("wait", "plan_approval"), ("stage", "step:1:0")]
    plan, wait, step = root.children
    assert (plan.start, plan.seconds) == (pytest.approx(0), pytest.approx(3))
    assert (wait.start, wait.seconds) == (pytest.approx(3), pytest.approx(7))
    assert (step.start, step.seconds) == (pytest.approx(10), pytest.approx(2))
    assert [(c.role, c.start, c.seconds) for c in plan.children] == [
        ("planner", pytest.approx(0.5), pytest.approx(2))]
    assert [(c.start, c.seconds, c.error) for c in step.children] == [
        (pytest.approx(10), pytest.approx(1), ""), (pytest.approx(11.3), pytest.approx(0.5), "timed out")]
    # The waterfall: each bar starts and lasts in proportion to the whole run.
    planner = plan.children[0]
    assert planner.x == pytest.approx(0.5 / 12 * 100) and planner.width == pytest.approx(2 / 12 * 100)
    assert wait.x == pytest.approx(25) and wait.width == pytest.approx(7 / 12 * 100)
    assert [s.depth for s in rows(root)] == [0, 1, 2, 1, 1, 2, 2]


def test_the_trace_page_draws_each_bar_from_those_times(alice_client, timed_run):
    response = alice_client.get(reverse("run_trace", args=[timed_run.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    bars = re.findall(r'<rect class="wf-bar" x="([\d.]+)" y="0" width="([\d.]+)"', html)
    assert len(bars) == 7
    assert (float(bars[2][0]), float(bars[2][1])) == (pytest.approx(4.1667, abs=1e-3),
                                                      pytest.approx(16.6667, abs=1e-3))
    assert "Waiting for you" in html and "Planning (plan v1)" in html
    assert reverse("model_call", args=[timed_run.pk, timed_run.model_calls.first().pk]) in html
    assert "timed out" in html


def test_the_header_shows_cost_and_tokens_per_role(alice_client, timed_run):
    header = run_header(alice_client.get(timed_run.get_absolute_url()))
    assert role_rows(header) == {"planner": ("1", "100 / 50", "$0.0030"),
                                 "executor": ("2", "10 / 5", "$0.0010")}
    assert reverse("run_trace", args=[timed_run.pk]) in header


def test_everything_from_the_model_and_the_person_is_escaped(alice_client, alice):
    run = Run.objects.create(owner=alice, pattern="react", task="<b>task</b>", status="completed",
                             models_used={"agent": "<img src=x onerror=alert(1)>"})
    event(run, 1, "stage_started", 0, stage="step:<i>1</i>")
    call(run, "step:<i>1</i>", "<script>alert(2)</script>", "k", 1.0, 100,
         model="<img src=x onerror=alert(3)>", error="<svg onload=alert(4)>")
    run.items.create(kind="step", key="1", data={"iteration": "<u>1</u>", "tool": "<script>t()</script>",
                                                 "seconds": 0.1, "ok": False,
                                                 "observation": "<iframe src=x>"})
    for url in (reverse("run_trace", args=[run.pk]), run.get_absolute_url()):
        html = alice_client.get(url).content.decode()
        for raw in ("<script>alert", "<img src=x", "<svg onload", "<iframe", "<script>t()",
                    "<i>1</i>"):
            assert raw not in html, (url, raw)
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def test_the_trace_is_for_its_owner_only(client, alice_client, bob, timed_run):
    url = reverse("run_trace", args=[timed_run.pk])
    assert alice_client.get(url).status_code == 200
    client.force_login(bob)
    assert client.get(url).status_code == 404
    client.logout()
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")


def test_a_run_with_nothing_yet_says_so(alice_client, alice):
    run = Run.objects.create(owner=alice, pattern="debate", task="Not started", status="queued")
    html = alice_client.get(reverse("run_trace", args=[run.pk])).content.decode()
    assert "Nothing has run yet" in html


# --- real runs of every pattern: tool calls where each keeps them, and the per-role header ------
def offline_run(alice, pattern, task, **options):
    models = dict.fromkeys(PATTERNS[pattern].roles, "offline/default")
    options = PATTERNS[pattern].check_options(options)
    run = engine.create_run(alice, pattern, task, options=options, models=models, enqueue=False,
                            max_cost_usd=Decimal("1"), max_tokens=200_000)
    return engine.run_inline(run.pk)


def test_react_and_rewoo_tool_calls_sit_in_their_stages(alice):
    react = offline_run(alice, "react", "What is 6*7?", tools=["calculator"])
    rewoo = offline_run(alice, "rewoo", "What is (3 + 4) * 6?", tools=["calculator"])
    for run, stage in ((react, "step:"), (rewoo, "work")):
        assert run.status == "completed", run.error
        tools = [(parent.detail, s) for parent in build_trace(run).children
                 for s in parent.children if s.kind == "tool"]
        assert tools and all(p.startswith(stage) and s.label == "calculator" for p, s in tools)
        root = build_trace(run)
        for p in root.children:
            for s in p.children:  # a child lies within its stage, and the stage within the run
                assert p.start - 1e-3 <= s.start and s.end <= p.end + 0.05, (p, s)
            assert p.end <= root.end + 1e-3


def test_an_agent_loops_tool_calls_sit_between_its_model_calls(alice, repo):  # noqa: F811
    from agents_app.patterns.plan_execute_review.service import start_change

    run = engine.run_inline(start_change(
        alice, repo=str(repo), base="main", models=CHANGE_OFFLINE, auto_approve_plan=True,
        task='replace "Helo world" with "Hello world" in README.md', enqueue=False).pk)
    traced = [r for r in AgentReport.objects.filter(run=run) if r.trace]
    assert traced, "the offline agents used no tool"
    root = build_trace(run)
    stages = {s.detail: s for s in root.children}
    for report in traced:
        tools = [s for s in stages[report.stage].children if s.kind == "tool"]
        assert [t.label for t in tools] == [e["tool"] for e in report.trace]


def run_header(response) -> str:
    html = response.content.decode()
    start = html.index('id="run-header"')
    return html[start:html.index("</section>", start)]


def role_rows(header: str) -> dict:
    rows_ = re.findall(r'<tr data-role="([^"]+)"><th scope="row">.*?</th><td class="num">(\d+)</td>'
                       r'<td class="num">([^<]+)</td><td class="num">([^<]+)</td></tr>', header)
    return {role: (calls, tokens, cost) for role, calls, tokens, cost in rows_}


def expected_roles(run) -> dict:
    out: dict = {}
    for c in ModelCall.objects.filter(run=run):
        n, p, o, cost = out.get(c.role, (0, 0, 0, Decimal(0)))
        out[c.role] = (n + 1, p + c.prompt_tokens, o + c.completion_tokens, cost + c.cost_usd)
    return {role: (str(n), f"{p:,} / {o:,}", f"${float(cost):.4f}")
            for role, (n, p, o, cost) in out.items()}


# Parallel stages (debaters, voters, reviewers) call from threads of their own, each with its own
# connection: the runs must be committed for them to see.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("pattern, task, options", [
    ("plan_execute", "Collect logs, then find the error.", {"auto_approve": True}),
    ("reflective", "Explain attention briefly.", {}),
    ("debate", "Rewrite the monolith?", {}),
    ("team_lead", "Research two frameworks, then compare them.", {}),
    ("rewoo", "What is (3 + 4) * 6?", {"tools": ["calculator"]}),
    ("react", "What is 6*7?", {"tools": ["calculator"]}),
    ("vote", "Which sort suits nearly sorted data?", {}),
])
def test_every_task_patterns_header_shows_cost_and_tokens_per_role(alice_client, alice, pattern,
                                                                  task, options):
    run = offline_run(alice, pattern, task, **options)
    assert run.calls > 0
    ModelCall.objects.filter(run=run).update(prompt_tokens=1234, cost_usd=Decimal("0.0101"))
    header = run_header(alice_client.get(run.get_absolute_url()))
    assert role_rows(header) == expected_roles(run) != {}


@pytest.mark.django_db(transaction=True)
def test_the_code_review_and_change_pages_show_cost_and_tokens_per_role(alice_client, alice,
                                                                      repo):  # noqa: F811
    from agents_app.patterns.plan_execute_review.service import start_change
    from reviews_app import services
    from tests.review_corpus import GOOD

    inp = services.from_text(GOOD)
    review = engine.run_inline(services.start_review(alice, inp, services.prepare(inp),
                                                     enqueue=False).pk)
    change = engine.run_inline(start_change(
        alice, repo=str(repo), base="main", models=CHANGE_OFFLINE, auto_approve_plan=True,
        task='replace "Helo world" with "Hello world" in README.md', enqueue=False).pk)
    for run in (review, change):
        assert run.calls > 0
        header = run_header(alice_client.get(run.get_absolute_url()))
        assert role_rows(header) == expected_roles(run) != {}
        assert reverse("run_trace", args=[run.pk]) in header
