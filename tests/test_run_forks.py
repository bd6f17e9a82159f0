"""Forks, replays and continuations of runs (issue 33), through the real engine: checkpoints
written with each commit, a fork from a stage with an edit and another model that pays only
for what follows, gate policies, a replay served wholly from the journal, a continuation
with a higher budget. The models are scripted behind LiteLLM's real call path, so the
provider's log shows every call that was really made."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents_app import engine
from agents_app.forking import checkpoints, lineage
from agents_app.forking.create import ForkRefused, create_fork
from agents_app.models import RUNNABLE, Checkpoint, ModelCall, PlanVersion, Run
from agents_app.patterns.base import Decision
from tests.conftest import scripted_models

pytestmark = pytest.mark.django_db(transaction=True)
TASK = "Collect the logs, then find the error, then write a report."


def start(alice, *, auto_approve=False, models=None, **kw) -> Run:
    run = engine.create_run(alice, "plan_execute", TASK, options={"auto_approve": auto_approve},
                            models=models or scripted_models(), enqueue=False, **kw)
    return engine.run_inline(run.pk)


def drive(run_id: int) -> Run:
    """Run it here until it waits for a person or ends (a gate policy may decide a gate)."""
    engine.run_inline(run_id)
    # The last commit's run is as it committed it; a gate policy may have decided since.
    while Run.objects.get(pk=run_id).status in RUNNABLE:
        engine.run_inline(run_id)
    return Run.objects.get(pk=run_id)


def approve(run: Run, user, edits=None) -> Run:
    engine.decide(run, user, run.stage_seq, Decision(action="approve", edits=edits,
                                                     author=user.get_username()), enqueue=False)
    return drive(run.pk)


def provider_roles(scripted) -> list[str]:
    return scripted.roles()


def test_every_stage_leaves_a_checkpoint_of_the_state_it_started_from(alice, scripted):
    run = start(alice)
    assert run.status == "awaiting_plan_approval" and run.stage_seq == 2
    cps = list(Checkpoint.objects.filter(run=run))
    assert [(c.seq, c.stage, c.gate) for c in cps] == [(0, "start", ""), (1, "plan:1", ""),
                                                        (2, "step:1:0", "plan_approval")]
    assert checkpoints.state_at(cps[2])["plan"]["steps"] == run.state["plan"]["steps"]
    run = approve(run, alice)
    assert run.status == "completed"
    after = Checkpoint.objects.get(run=run, seq=3)
    assert after.decision["action"] == "approve" and after.decision["how"] == "person"
    assert after.decision["on"] == checkpoints.digest(checkpoints.state_at(cps[2]))
    assert Checkpoint.objects.filter(run=run).count() == run.stage_seq + 1


def test_a_fork_at_the_plan_with_an_edit_and_another_executor_pays_only_for_what_follows(
        alice, scripted):
    parent = approve(start(alice), alice)
    made = len(scripted.calls)
    gate_seq = Checkpoint.objects.get(run=parent, gate="plan_approval").seq
    steps = list(parent.state["plan"]["steps"])
    edited = [*steps[:1], "Check the disk usage first", *steps[1:]]
    fork = create_fork(parent, alice, seq=gate_seq, edits={"steps": edited},
                       models={"executor": "scripted/other"}, enqueue=False)
    assert fork.status == "awaiting_plan_approval" and fork.stage_seq == gate_seq
    assert len(scripted.calls) == made  # making the fork called no model
    assert fork.state["plan"]["version"] == 2 and fork.state["plan"]["steps"] == edited
    [v2] = PlanVersion.objects.filter(run=fork, version=2)
    assert v2.author == "alice" and v2.reason == "Edited when forking"
    assert PlanVersion.objects.filter(run=fork, version=1).exists()  # what the page lists
    fork = approve(fork, alice)
    assert fork.status == "completed", fork.error
    new = scripted.calls[made:]
    assert {c.role for c in new} == {"executor", "synthesizer"}  # no planner: it was not run
    assert [c.role for c in new].count("executor") == len(edited)
    assert set(fork.models_used.values()) >= {"scripted/other"}
    assert fork.fork["models"] == {"executor": "scripted/other"}
    # The fork's own calls and totals; the planner's call is its parent's, read through it.
    own = ModelCall.objects.filter(run=fork)
    assert not own.filter(role="planner").exists() and fork.calls == own.count()
    inherited = lineage.inherited_calls(fork)
    assert [c.role for c in inherited] == ["planner"] and inherited[0].run_id == parent.pk
    assert fork.root_id == parent.pk and fork.forked_from_id == parent.pk
    events = lineage.inherited_events(fork)
    assert events and all(e.run_id == parent.pk for e in events)
    assert events[-1].kind == "gate_opened"


def test_a_fork_of_a_fork_reads_through_both(alice, scripted):
    parent = approve(start(alice), alice)
    child = approve(create_fork(parent, alice, seq=2, enqueue=False), alice)
    grandchild = create_fork(child, alice, seq=4, enqueue=False)  # a later step of the child
    assert checkpoints.at(grandchild, 0).run_id == parent.pk
    assert checkpoints.at(grandchild, 3).run_id == child.pk
    assert checkpoints.at(grandchild, 4).run_id == grandchild.pk
    assert grandchild.root_id == parent.pk
    tree = lineage.tree(grandchild)
    assert tree.run.pk == parent.pk
    assert [n.run.pk for n in lineage.flat(tree, alice.pk)] == [parent.pk, child.pk,
                                                                 grandchild.pk]


def test_gate_policies_reuse_only_a_byte_identical_decision_and_record_how(alice, scripted):
    parent = approve(start(alice), alice)
    same = drive(create_fork(parent, alice, seq=2, gates={"plan_approval": "reuse"},
                             enqueue=False).pk)
    assert same.status != "awaiting_plan_approval"
    decided = Checkpoint.objects.get(run=same, seq=3).decision
    assert decided["how"] == "reused" and decided["action"] == "approve"
    edited = create_fork(parent, alice, seq=2, gates={"plan_approval": "reuse"}, enqueue=False,
                         edits={"steps": ["Only one step now"]})
    edited.refresh_from_db()
    assert edited.status == "awaiting_plan_approval"  # what is decided changed: asked again
    assert edited.events.filter(kind="gate_policy").exists()
    auto = create_fork(parent, alice, seq=2, gates={"plan_approval": "approve"}, enqueue=False,
                       edits={"steps": ["Only one step now"]})
    auto.refresh_from_db()
    assert Checkpoint.objects.get(run=auto, seq=3).decision["how"] == "approved"


def test_a_replay_makes_no_provider_call_and_ends_in_the_same_state(alice, scripted):
    parent = approve(start(alice), alice)
    made = len(scripted.calls)
    replay = create_fork(parent, alice, kind="replay", enqueue=False)
    replay = drive(replay.pk)
    assert replay.status == "completed", replay.error
    assert len(scripted.calls) == made  # not one call reached the provider
    calls = ModelCall.objects.filter(run=replay)
    assert calls.count() == ModelCall.objects.filter(run=parent).count()
    assert all(c.replayed_from_id for c in calls) and replay.cost_usd == 0
    assert replay.answer == parent.answer
    last = replay.stage_seq
    assert checkpoints.state_at(Checkpoint.objects.get(run=replay, seq=last)) == \
        checkpoints.state_at(Checkpoint.objects.get(run=parent, seq=last))


def test_a_replay_stops_at_the_first_request_that_changed(alice, scripted, monkeypatch):
    from agents_app.patterns.plan_execute import pattern as pe

    parent = approve(start(alice), alice)
    made = len(scripted.calls)
    monkeypatch.setattr(pe, "EXECUTOR_SYSTEM", pe.EXECUTOR_SYSTEM + " Be terse.")
    replay = drive(create_fork(parent, alice, kind="replay", enqueue=False).pk)
    assert replay.status == "failed" and "The replay stopped" in replay.error
    assert "executor" in replay.error or "step" in replay.error
    assert len(scripted.calls) == made
    # Where, and the first message that differs, are kept on the run.
    diverged = replay.fork["diverged"]
    assert diverged["seq"] == 3 and diverged["stage"] == "step:1:0" and diverged["key"]
    assert any("Be terse." in line for line in diverged["first"])


def test_a_run_stopped_by_its_budget_continues_with_a_higher_one(alice, scripted):
    scripted.usage = (4000, 1000)
    run = start(alice, auto_approve=True, max_cost_usd=Decimal("0.0000001"))
    assert run.status == "budget_exceeded"
    more = create_fork(run, alice, kind="continue", max_cost_usd=Decimal("5"), enqueue=False)
    assert more.max_cost_usd == Decimal("5") and more.fork["kind"] == "continue"
    more = drive(more.pk)
    assert more.status == "completed", more.error


def test_a_run_failed_at_a_stage_continues_from_that_stage_not_from_its_end(alice, scripted):
    def broken(messages, info):
        if info.role == "executor":
            return ValueError("the provider is down")
        return scripted.offline_like(messages, info)

    scripted.fn = broken
    run = start(alice, auto_approve=True)
    assert run.status == "failed" and Checkpoint.objects.filter(run=run, stage="").exists()
    failed_at = Checkpoint.objects.filter(run=run).exclude(stage="").order_by("-seq").first()
    scripted.fn = scripted.offline_like
    more = create_fork(run, alice, kind="continue", enqueue=False)
    assert more.fork_seq == failed_at.seq and more.stage == failed_at.stage
    more = drive(more.pk)
    assert more.status == "completed", more.error
    with pytest.raises(ForkRefused, match=f"Stage {run.stage_seq} is where run #{run.pk} "
                                          "ended: no stage runs from there"):
        create_fork(run, alice, seq=run.stage_seq, enqueue=False)


def test_a_continuation_after_a_bad_reply_asks_again_not_the_journal(alice, scripted):
    """The reply that made a stage fail is not served to its continuation: the stage asks the
    provider again (a budget stop's calls are reused; a failure's are not)."""
    def garbled(messages, info):
        if info.role == "planner":
            return "<<not the answer format at all>>"
        return scripted.offline_like(messages, info)

    scripted.fn = garbled
    run = start(alice, auto_approve=True)
    scripted.fn = scripted.offline_like
    more = create_fork(run, alice, kind="continue", enqueue=False)
    assert more.fork["reuse_calls"] is False
    more = drive(more.pk)
    assert more.status == "completed", more.error
    own = ModelCall.objects.filter(run=more)
    assert own.exists() and not own.filter(replayed_from__isnull=False).exists()
    assert "<<not the answer" not in (more.answer or "")


def test_a_fork_made_after_a_gate_shows_the_decision_its_parent_took_there(alice, scripted):
    from agents_app.forking.diff import compare
    from agents_app.forking.stages import stages

    parent = approve(start(alice), alice)
    fork = drive(create_fork(parent, alice, seq=3, enqueue=False).pk)
    gate = [s for s in stages(fork) if s.stage == "gate:plan_approval"]
    assert gate and gate[0].decision == {"action": "approve", "how": "person"}
    assert compare(stages(parent), stages(fork)).divergence is None


@pytest.mark.parametrize("kwargs, message", [
    ({"seq": 99}, "no recorded stage 99"),
    ({"seq": 2, "models": {"judge": "scripted/x"}}, "has no role"),
    ({"seq": 2, "models": {"executor": "nonsense-model-xyz"}}, "executor"),
    ({"seq": 2, "gates": {"plan_approval": "maybe"}}, "not 'maybe'"),
    ({"seq": 2, "gates": {"merge": "ask"}}, "has no gate"),
    ({"seq": 2, "edits": {"steps": []}}, "no steps left to carry out"),
    ({"seq": 2, "edits": {"steps": "not a list"}}, "The edit is not valid"),
    ({"seq": 2, "edits": {"steps": ["  "]}}, "no steps left to carry out"),
    ({"seq": 1, "edits": {"steps": ["x"]}}, "Nothing can be edited"),
    ({"kind": "continue"}, "Only a run stopped"),
    ({"seq": 2, "max_cost_usd": Decimal("-1")}, "above 0"),
])
def test_a_refused_fork_says_why_and_saves_nothing(alice, scripted, kwargs, message):
    parent = approve(start(alice), alice)
    before = Run.objects.count()
    with pytest.raises(ForkRefused) as refused:
        create_fork(parent, alice, enqueue=False, **kwargs)
    assert message in str(refused.value), str(refused.value)
    assert Run.objects.count() == before


def test_the_stage_diff_of_a_fork_marks_where_it_parts_from_its_parent(alice, scripted):
    from agents_app.forking.diff import compare
    from agents_app.forking.stages import stages

    parent = approve(start(alice), alice)
    steps = list(parent.state["plan"]["steps"])
    fork = approve(create_fork(parent, alice, seq=2, edits={"steps": steps[:1]},
                               enqueue=False), alice)
    a, b = stages(parent), stages(fork)
    assert [s.stage for s in a[:3]] == ["start", "plan:1", "gate:plan_approval"]
    assert [s.stage for s in b[:4]] == ["start", "plan:1", "fork:edit", "gate:plan_approval"]
    # The planner's call is the parent's in both: in the fork, marked as not made again.
    assert [c.replayed for c in b[1].calls] == [True] and b[1].calls[0].cost == a[1].calls[0].cost
    diff = compare(a, b, (f"run {parent.pk}", f"run {fork.pk}"))
    # They part where the fork's edit stands: a stage the parent has not, before the gate.
    assert diff.divergence == 2 and diff.rows[1].same
    edit = diff.rows[2]
    assert edit.left is None and edit.right.stage == "fork:edit"
    assert "plan" in edit.right.output
    assert diff.rows[3].decisions.same  # both approved at the gate; what followed differs
    assert len([s for s in b if s.stage.startswith("step:")]) == 1
    assert any(r.left is not None and r.right is None for r in diff.rows)  # a step it lacks


def test_a_decision_reused_by_policy_compares_the_same_as_the_persons(alice, scripted):
    from agents_app.forking.diff import compare
    from agents_app.forking.stages import stages

    parent = approve(start(alice), alice)
    seq = Checkpoint.objects.get(run=parent, gate="plan_approval").seq
    fork = drive(create_fork(parent, alice, seq=seq, gates={"plan_approval": "reuse"},
                             enqueue=False).pk)
    gate = [s for s in stages(fork) if s.stage == "gate:plan_approval"]
    assert gate[0].decision["how"] == "reused"
    row = [r for r in compare(stages(parent), stages(fork)).rows
           if r.name.startswith("Gate")][0]
    assert row.decisions.same and row.left.decision["how"] == "person"


def test_a_fork_with_the_executor_on_the_brief_offline_model_differs_from_its_step(alice):
    """Offline, a second model exists to compare with: the fork's steps are the brief
    model's (first paragraph and its label), the plan before the fork the same."""
    from agents_app.forking.diff import compare
    from agents_app.forking.stages import stages
    from agents_app.llm.offline import BRIEF_LABEL
    from tests.conftest import OFFLINE

    run = engine.run_inline(engine.create_run(alice, "plan_execute", "Read the logs, then fix "
                                              "the bug", options={}, models=OFFLINE,
                                              enqueue=False).pk)
    run = approve(run, alice)
    seq = Checkpoint.objects.get(run=run, gate="plan_approval").seq
    fork = drive(create_fork(run, alice, seq=seq, models={"executor": "offline/brief"},
                             gates={"plan_approval": "reuse"}, enqueue=False).pk)
    assert fork.status == "completed", fork.error
    steps = ModelCall.objects.filter(run=fork, role="executor")
    assert steps and all(c.model == "offline/brief" and BRIEF_LABEL in c.response
                         for c in steps)
    diff = compare(stages(run), stages(fork))
    first = diff.rows[diff.divergence]
    assert first.name.startswith("Step 1") and not first.responses.same


def test_a_worker_carries_a_replay_past_a_gate_its_policy_decides(alice, monkeypatch):
    """The worker's own loop (``advance_in_place``, one task for stage after stage) goes on
    after a gate the fork's policy decided: a replay reuses the plan decision and completes in
    the same task, with nothing queued. (Found in the browser: the run stayed "executing".)"""
    queued = []
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: queued.append(a))
    offline = {"planner": "offline/default", "executor": "offline/default",
               "synthesizer": "offline/default"}
    parent = start(alice, models=offline)
    parent = approve(parent, alice)
    assert parent.status == "completed"
    replay = create_fork(parent, alice, kind="replay", enqueue=False)
    assert engine.advance_in_place(replay.pk) is False
    replay.refresh_from_db()
    assert replay.status == "completed", replay.error
    assert replay.answer == parent.answer and queued == []
    gate = Checkpoint.objects.get(run=replay, seq=parent.checkpoints.get(
        gate="plan_approval").seq + 1)
    assert gate.decision["how"] == "reused"
