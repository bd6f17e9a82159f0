"""Fork, replay and compare in Chromium, offline (issue 33's "done when"): a person forks a
Plan-and-Execute run at its plan with one step edited and the executor on another model, a
debate from its second round and a change run from its plan; sees each fork's lineage and its
stage diff against the original; replays a run with no provider call; and compares three runs
side by side from the history — at 1280 px and on a 390 px phone. Everything real: Daphne,
the Celery worker, Redis, git and the offline model through LiteLLM (0.4 s a call)."""

from __future__ import annotations

import re

import pytest

from agents_app import engine
from agents_app.models import Checkpoint, ModelCall, Run
from agents_app.patterns import get_pattern
from agents_app.patterns.base import Decision
from tests.conftest import OFFLINE, sign_in
from tests.test_change_browser import git, make_repo, start_to_merge_gate
from tests.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

TASK = "Collect the logs, then find the error, then write a report."
PHONE = {"width": 390, "height": 844}


def finished_plan_execute(user) -> Run:
    """A completed Plan-and-Execute run, its plan approved by its person (made here, at
    once: the browser's part is the forking)."""
    run = engine.run_inline(engine.create_run(user, "plan_execute", TASK, options={},
                                              models=OFFLINE, enqueue=False).pk)
    engine.decide(run, user, run.stage_seq, Decision(action="approve", author="alice"),
                  enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    return run


def new_run_id(page, parent: Run) -> int:
    page.wait_for_url(re.compile(rf".*/(runs|changes|reviews)/(?!{parent.pk}/)\d+/$"))
    return int(page.url.rstrip("/").rsplit("/", 1)[-1])


def settled(run_id: int, *statuses: str) -> Run:
    try:
        wait_until(lambda: Run.objects.get(pk=run_id).status in statuses, timeout=60,
                   what=f"run {run_id} to be {' or '.join(statuses)}")
    except TimeoutError:
        run = Run.objects.get(pk=run_id)
        events = [e.message for e in run.events.order_by("seq")][-4:]
        raise AssertionError(f"run {run_id} is {run.status}: {run.error} {events}") from None
    return Run.objects.get(pk=run_id)


def fits(page) -> bool:
    """Nothing on the page is wider than the window (tables scroll in their own box)."""
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def open_stage(page, base: str, run: Run, seq: int) -> None:
    """From the run's page: open "Stages", then "Fork from here" on stage ``seq``."""
    page.goto(f"{base}{run.get_absolute_url()}")
    page.click("#run-stages summary")
    row = page.locator(f"#run-stages tr#stage-{seq}")
    row.wait_for(timeout=10_000)
    row.get_by_role("link", name="Fork from here").click()
    page.wait_for_url(f"{base}/runs/{run.pk}/fork/{seq}/")


def test_fork_plan_execute_at_its_plan_replay_it_and_compare_three(live_stack, page,
                                                                   browser_alice):
    alice = browser_alice
    parent = finished_plan_execute(alice)
    gate = Checkpoint.objects.get(run=parent, gate="plan_approval").seq
    sign_in(page, live_stack)

    # Fork at the plan: the second step edited, the executor on the brief offline model, the
    # plan gate approving by itself.
    open_stage(page, live_stack, parent, gate)
    steps = page.locator("textarea[name=edit_steps]")
    original = steps.input_value().splitlines()
    assert original == parent.state["plan"]["steps"] and len(original) >= 2
    edited = [*original[:1], "Check the disk is not full", *original[2:]]
    steps.fill("\n".join(edited))
    page.fill("input[name=model_executor]", "offline/brief")
    page.check("input[name=gate_plan_approval][value=approve]")
    page.click("button[value=fork]")
    fork = settled(new_run_id(page, parent), "completed")
    assert fork.forked_from_id == parent.pk and fork.fork_seq == gate
    assert fork.state["plan"]["steps"] == edited
    executor = {c.model for c in ModelCall.objects.filter(run=fork, role="executor")}
    assert executor == {"offline/brief"}
    # Nothing before the fork point ran again: the planner's call is the parent's.
    assert not ModelCall.objects.filter(run=fork, role="planner").exists()

    # The fork's page says where it came from, shows the lineage, and diffs with its parent.
    page.goto(f"{live_stack}{fork.get_absolute_url()}")
    line = page.locator("#lineage-line .forked-from").inner_text()
    assert f"Fork of run {parent.pk} from stage {gate}" in line
    assert "offline/brief as executor" in line
    page.click("#lineage-line summary")
    tree = page.locator("#lineage-tree").inner_text()
    assert f"run {parent.pk}" in tree and f"run {fork.pk} (this one)" in tree
    assert "Completed" in tree
    page.click("#lineage-line .forked-from >> text=Compare with it")
    page.wait_for_url(re.compile(r".*/runs/compare/\?runs=.*"))
    assert "Edited when forked" in page.locator("#divergence-note").inner_text()
    first = page.locator("#stage-diff li.first-divergence")
    assert first.count() == 1 and "Check the disk is not full" in first.inner_text()
    executor_rows = page.locator("#stage-diff li.different", has_text="offline/brief")
    assert executor_rows.count() >= 1
    page.set_viewport_size(PHONE)
    assert fits(page)
    page.set_viewport_size({"width": 1280, "height": 900})

    # Replay the original from its journal: no provider call, the same end.
    page.goto(f"{live_stack}/runs/{parent.pk}/fork/")
    page.click("#replay")
    replay = settled(new_run_id(page, parent), "completed")
    calls = ModelCall.objects.filter(run=replay)
    assert calls.exists() and not calls.filter(replayed_from__isnull=True).exists()
    assert replay.answer == parent.answer
    page.goto(f"{live_stack}{replay.get_absolute_url()}")
    assert "Replay of run" in page.locator("#lineage-line .forked-from").inner_text()
    badges = page.locator("#calls-panel table.calls .badge", has_text="replayed")
    assert badges.count() == calls.count()

    # Three runs side by side, ticked in the history.
    page.goto(f"{live_stack}/")
    for run in (parent, fork, replay):
        page.check(f"#compare-form input[name=runs][value='{run.pk}']")
    page.click("#compare-selected")
    page.wait_for_url(re.compile(r".*/runs/compare/\?.*"))
    heads = page.locator("#side-by-side thead th").all_inner_texts()
    for run in (parent, fork, replay):
        assert any(f"run {run.pk}" in h.lower() for h in heads), heads
    assert page.locator("#side-by-side tr.first-divergence").count() == 1
    page.set_viewport_size(PHONE)
    assert fits(page)
    assert page.locator("#side-by-side").is_visible()
    assert page.errors == []


def test_fork_a_debate_from_its_second_round(live_stack, page, browser_alice):
    alice = browser_alice
    run = engine.create_run(alice, "debate", "Should we adopt microservices?",
                            options={"max_rounds": 3},
                            models=dict.fromkeys(get_pattern("debate").roles, "offline/default"),
                            enqueue=False)
    while Run.objects.get(pk=run.pk).status not in ("completed", "failed"):
        engine.run_inline(run.pk)
    parent = Run.objects.get(pk=run.pk)
    assert parent.status == "completed", parent.error
    seq = Checkpoint.objects.get(run=parent, stage="round:2").seq
    sign_in(page, live_stack)
    page.set_viewport_size(PHONE)
    open_stage(page, live_stack, parent, seq)
    assert "Nothing can be edited at this stage" in page.locator("#fork-form").inner_text()
    assert fits(page)
    page.click("button[value=fork]")
    fork = settled(new_run_id(page, parent), "completed")
    rounds = sorted({c.stage for c in ModelCall.objects.filter(run=fork)})
    assert rounds == ["judge", "round:2", "round:3"]  # round 1 is its parent's
    page.goto(f"{live_stack}{fork.get_absolute_url()}")
    assert f"Fork of run {parent.pk} from stage {seq}" in page.locator(
        "#lineage-line .forked-from").inner_text()
    page.click("#lineage-line .forked-from >> text=Compare with it")
    page.wait_for_url(re.compile(r".*/runs/compare/\?runs=.*"))
    rows = page.locator("#stage-diff li.stage-row")
    assert rows.count() >= 4
    assert fits(page)
    assert page.errors == []


def test_fork_a_change_run_from_its_plan_on_its_own_branch(live_stack, page, browser_alice,
                                                           stack_repo_root):
    repo = make_repo(stack_repo_root / "proj")
    start_to_merge_gate(page, live_stack, repo)
    parent = Run.objects.get()
    assert parent.status == "awaiting_merge_request"

    gate = Checkpoint.objects.get(run=parent, gate="plan_approval").seq
    open_stage(page, live_stack, parent, gate)
    assert page.locator("textarea[name=edit_files]").input_value() == "README.md"
    approach = "Fix the greeting only; leave the rest of the README as it is."
    page.fill("textarea[name=edit_approach]", approach)
    page.click("button[value=fork]")
    fork_id = new_run_id(page, parent)
    fork = settled(fork_id, "awaiting_plan_approval")
    assert fork.plan_versions.last().reasoning == approach
    # Its plan gate asks again (the default): approve it on the fork's page.
    page.locator("#gate-panel button[value=approve]", has_text="Approve and execute").click()
    page.locator("#gate-panel button[value=approve]", has_text="Merge into main").wait_for(
        timeout=30_000)
    fork = Run.objects.get(pk=fork_id)
    branches = git(repo, "branch", "--format=%(refname:short)").split()
    assert f"quorum/run-{parent.pk}" in branches and f"quorum/run-{fork.pk}" in branches
    assert "Helo world" in git(repo, "show", "main:README.md")  # nothing merged

    assert f"Fork of run {parent.pk}" in page.locator("#lineage-line .forked-from").inner_text()
    page.click("#lineage-line .forked-from >> text=Compare with it")
    page.wait_for_url(re.compile(r".*/runs/compare/\?runs=.*"))
    assert page.locator("#compare-code").is_visible()
    page.set_viewport_size(PHONE)
    assert fits(page)
    assert page.errors == []
