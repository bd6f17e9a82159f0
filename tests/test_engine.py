"""The run engine against the real database, with scripted models behind LiteLLM."""

from decimal import Decimal

import pytest
from django.db import IntegrityError

from agents_app import engine
from agents_app.models import Approval, Event, ModelCall, PlanVersion, Run, StepResult
from agents_app.patterns.base import Decision, InvalidDecision
from tests.conftest import OFFLINE, scripted_models

pytestmark = pytest.mark.django_db


def new_run(owner, task="Collect logs, then find the error, and finally write a report.",
            models=None, **options):
    return engine.create_run(owner, "plan_execute", task, options=options,
                             models=models or OFFLINE, max_cost_usd=Decimal("1"),
                             max_tokens=100_000, enqueue=False)


def test_run_waits_at_gate_then_completes_after_approval(alice):
    run = engine.run_inline(new_run(alice).pk)
    assert run.status == "awaiting_plan_approval" and run.gate == "plan_approval"
    assert run.offline is True
    assert PlanVersion.objects.get(run=run).steps == [
        "Collect logs", "Find the error", "Write a report"]
    engine.decide(run, alice, run.stage_seq, Decision("approve", author="alice"), enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "completed" and "Offline model" in run.answer
    assert StepResult.objects.filter(run=run, status="done").count() == 3
    assert ModelCall.objects.filter(run=run).count() == 5
    assert run.calls == 5 and run.total_tokens > 0
    approval = Approval.objects.get(run=run)
    assert approval.action == "approve" and approval.user == alice
    seqs = list(Event.objects.filter(run=run).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    kinds = set(Event.objects.filter(run=run).values_list("kind", flat=True))
    assert {"run_created", "plan_proposed", "gate_opened", "plan_decided", "step_completed",
            "model_call", "run_finished"} <= kinds


def test_auto_approve_runs_straight_through_and_records_it(alice):
    run = engine.run_inline(new_run(alice, auto_approve=True).pk)
    assert run.status == "completed"
    assert Approval.objects.get(run=run).action == "auto_approve"


def test_edit_then_approve_executes_the_edited_plan(alice):
    run = engine.run_inline(new_run(alice).pk)
    edits = ["Find the error", "Collect logs again", "Write a short report", "Email it"]
    engine.decide(run, alice, run.stage_seq, Decision("approve", edits=edits, author="alice"),
                  enqueue=False)
    run = engine.run_inline(run.pk)
    v2 = PlanVersion.objects.get(run=run, version=2)
    assert v2.author == "alice" and v2.reason == "Edited by hand" and v2.steps == edits
    assert list(StepResult.objects.filter(run=run).values_list("description", flat=True)) == edits
    assert Approval.objects.get(run=run).edited is True


def test_reject_with_feedback_produces_a_new_version_that_uses_it(alice):
    run = engine.run_inline(new_run(alice).pk)
    engine.decide(run, alice, run.stage_seq,
                  Decision("reject", feedback="Also check the disk space", author="alice"),
                  enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "awaiting_plan_approval"
    v2 = PlanVersion.objects.get(run=run, version=2)
    assert v2.author == "model" and v2.reason == "Revised after feedback"
    assert any("disk space" in s for s in v2.steps)
    assert Approval.objects.get(run=run).feedback == "Also check the disk space"


def test_stale_decision_is_refused_without_changing_anything(alice):
    run = engine.run_inline(new_run(alice).pk)
    seen = run.stage_seq
    engine.decide(run, alice, seen, Decision("approve", author="alice"), enqueue=False)
    before = Run.objects.get(pk=run.pk)
    with pytest.raises(engine.StaleDecision):
        engine.decide(run, alice, seen, Decision("reject", feedback="x", author="alice"),
                      enqueue=False)
    after = Run.objects.get(pk=run.pk)
    assert (after.status, after.stage_seq, after.stage) == (before.status, before.stage_seq, before.stage)
    assert Approval.objects.filter(run=run).count() == 1


def test_invalid_edit_changes_nothing(alice):
    run = engine.run_inline(new_run(alice).pk)
    with pytest.raises(InvalidDecision):
        engine.decide(run, alice, run.stage_seq, Decision("approve", edits=["ok", ""]),
                      enqueue=False)
    run.refresh_from_db()
    assert run.status == "awaiting_plan_approval"
    assert PlanVersion.objects.filter(run=run).count() == 1
    assert not Approval.objects.filter(run=run).exists()


def test_a_second_delivery_of_the_same_task_does_nothing(alice):
    run = new_run(alice, auto_approve=True)
    assert engine.advance(run.pk, enqueue=False)  # start
    assert engine.advance(run.pk, enqueue=False)  # plan
    run = engine.run_inline(run.pk)
    events = Event.objects.filter(run=run).count()
    assert engine.advance(run.pk, enqueue=False) is False
    assert Event.objects.filter(run=run).count() == events


def test_a_held_lease_blocks_a_concurrent_claim(alice):
    run = new_run(alice)
    Run.objects.filter(pk=run.pk).update(lease_owner="other|boot|1",
                                         lease_expires_at=engine.leases.lease_until())
    assert engine.advance(run.pk, enqueue=False) is False
    assert Run.objects.get(pk=run.pk).stage == "start"


def crash_the_next_commit(monkeypatch):
    def crash(*args, **kwargs):
        raise SystemExit("worker killed")

    monkeypatch.setattr(engine.stages, "commit_result", crash)


def restart_the_worker(monkeypatch, run):
    """The restarted worker recovers the lease this (dead) incarnation held."""
    monkeypatch.setitem(engine.leases._identity, "boot", "new-boot")
    node = engine.leases._identity["node"]
    assert engine.recover_after_restart(node, enqueue=False) == [run.pk]


def test_crash_after_a_call_replays_it_without_calling_or_recording_twice(alice, scripted,
                                                                          monkeypatch):
    # Step 1's executor replies with no JSON, so the stage calls it twice: the first call is
    # journaled when the second is made; the second (the stage's last) joins the commit,
    # which the worker never reaches.
    run = new_run(alice, models=scripted_models(), auto_approve=True)
    engine.advance(run.pk, enqueue=False)  # start
    engine.advance(run.pk, enqueue=False)  # plan:1 (auto-approved)
    first = {"left": 1}

    def executor_unreadable_once(messages, info):
        if info.role == "executor" and first["left"]:
            first["left"] -= 1
            return "Done, see above."
        return scripted.offline_like(messages, info)

    scripted.fn = executor_unreadable_once
    real_commit = engine.stages.commit_result
    crash_the_next_commit(monkeypatch)
    calls_before = len(scripted.calls)
    with pytest.raises(SystemExit):
        engine.advance(run.pk, enqueue=False)
    assert len(scripted.calls) == calls_before + 2
    assert list(ModelCall.objects.filter(run=run, stage="step:1:0").values_list(
        "key", flat=True)) == ["executor"]
    assert not StepResult.objects.filter(run=run).exists()
    monkeypatch.setattr(engine.stages, "commit_result", real_commit)
    restart_the_worker(monkeypatch, run)
    run = engine.run_inline(run.pk)
    assert run.status == "completed"
    # The first call was replayed, the unwritten one made again; each journaled once.
    assert sorted(ModelCall.objects.filter(run=run, stage="step:1:0").values_list(
        "key", flat=True)) == ["executor", "executor/retry"]
    assert len([c for c in scripted.calls[calls_before:] if c.role == "executor"]) == 2 + 1 + 2
    assert StepResult.objects.filter(run=run).count() == 3
    assert run.calls == ModelCall.objects.filter(run=run).count()
    assert Event.objects.filter(run=run, kind="stage_resumed").count() == 1


def test_a_crash_before_a_one_call_stage_commits_makes_that_call_again_once(alice, scripted,
                                                                             monkeypatch):
    # The stage's only call is written by its commit, in the same transaction: a worker
    # killed between the call and the commit loses it, and the stage makes it again.
    run = new_run(alice, models=scripted_models(), auto_approve=True)
    engine.advance(run.pk, enqueue=False)  # start
    engine.advance(run.pk, enqueue=False)  # plan:1 (auto-approved)
    real_commit = engine.stages.commit_result
    crash_the_next_commit(monkeypatch)
    calls_before = len(scripted.calls)
    with pytest.raises(SystemExit):
        engine.advance(run.pk, enqueue=False)
    assert len(scripted.calls) == calls_before + 1
    assert not ModelCall.objects.filter(run=run, stage="step:1:0").exists()
    monkeypatch.setattr(engine.stages, "commit_result", real_commit)
    restart_the_worker(monkeypatch, run)
    run = engine.run_inline(run.pk)
    assert run.status == "completed"
    assert ModelCall.objects.filter(run=run, stage="step:1:0").count() == 1
    assert len([c for c in scripted.calls[calls_before:] if c.role == "executor"]) == 1 + 3
    assert run.calls == ModelCall.objects.filter(run=run).count() == 5
    assert StepResult.objects.filter(run=run).count() == 3


def test_the_database_refuses_a_duplicate_step(alice):
    run = new_run(alice)
    StepResult.objects.create(run=run, plan_version=1, index=0, description="d", status="done")
    with pytest.raises(IntegrityError):
        StepResult.objects.create(run=run, plan_version=1, index=0, description="d", status="done")


def test_cancel_at_the_gate_stops_the_run(alice):
    run = engine.run_inline(new_run(alice).pk)
    assert engine.cancel(run, alice) == "Run cancelled."
    run.refresh_from_db()
    assert run.status == "cancelled" and run.finished_at
    with pytest.raises(engine.StaleDecision):
        engine.decide(run, alice, run.stage_seq, Decision("approve"), enqueue=False)


def test_cancel_while_working_stops_before_the_next_model_call(alice, scripted):
    run = new_run(alice, models=scripted_models(), auto_approve=True)
    engine.advance(run.pk, enqueue=False)
    engine.advance(run.pk, enqueue=False)
    # A worker is in the middle of a stage: simulate its live lease, then ask to cancel.
    Run.objects.filter(pk=run.pk).update(lease_owner="w|b|1", lease_expires_at=engine.leases.lease_until())
    assert "stops before its next model call" in engine.cancel(run, alice)
    Run.objects.filter(pk=run.pk).update(lease_owner="", lease_expires_at=None)
    calls = len(scripted.calls)
    run = engine.run_inline(run.pk)
    assert run.status == "cancelled"
    assert len(scripted.calls) == calls
    assert Event.objects.filter(run=run, kind="run_cancelled").exists()


def test_budget_exceeded_stops_with_the_figures(alice, scripted):
    scripted.usage = (3000, 1000)
    run = engine.create_run(alice, "plan_execute", "a, then b, then c", options={"auto_approve": True},
                            models=scripted_models(), max_tokens=6000, enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "budget_exceeded"
    assert "8,000 of the 6,000 tokens" in run.error
    assert ModelCall.objects.filter(run=run).count() == 2
    assert Event.objects.filter(run=run, kind="budget_exceeded").exists()


def test_cost_budget(alice, scripted, monkeypatch):
    from agents_app.llm import gateway
    monkeypatch.setattr(gateway, "_cost", lambda response, model: 0.3)
    run = engine.create_run(alice, "plan_execute", "a, then b", options={"auto_approve": True},
                            models=scripted_models(), max_cost_usd=Decimal("0.5"), enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "budget_exceeded"
    assert "spent $0.6000 of the $0.5000" in run.error
    assert run.cost_usd == Decimal("0.6")


def test_time_limit_fails_the_run(alice, settings):
    settings.QUORUM_MAX_RUN_SECONDS = 0
    run = engine.run_inline(new_run(alice, auto_approve=True).pk)
    assert run.status == "failed" and "Time limit" in run.error


def test_failing_provider_fails_the_step_replans_then_fails_the_run(alice, scripted):
    def fn(messages, info):
        if info.role == "planner":
            return {"steps": ["only step"]}
        return litellm_error()

    scripted.fn = fn
    run = new_run(alice, models=scripted_models(), auto_approve=True, max_replans=1)
    run = engine.run_inline(run.pk)
    assert run.status == "failed"
    assert "Step 1 (only step) failed" in run.error and "RateLimitError" in run.error
    assert StepResult.objects.filter(run=run, status="failed").count() == 2
    assert PlanVersion.objects.filter(run=run).count() == 2


def litellm_error():
    import litellm
    return litellm.RateLimitError("busy", llm_provider="scripted", model="x")


def test_a_bug_in_a_stage_fails_the_run_with_a_reason(alice, monkeypatch):
    from agents_app.patterns.plan_execute import PlanExecute
    monkeypatch.setattr(PlanExecute, "_synthesize", lambda *a: 1 / 0)
    run = engine.run_inline(new_run(alice, auto_approve=True).pk)
    assert run.status == "failed" and "ZeroDivisionError" in run.error


def test_sweeper_requeues_runs_with_expired_leases(alice):
    from datetime import timedelta

    from django.utils import timezone
    run = new_run(alice)
    Run.objects.filter(pk=run.pk).update(lease_owner="dead|x|1",
                                         lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert engine.sweep(enqueue=False) == [run.pk]
    run.refresh_from_db()
    assert run.lease_owner == "" and run.lease_expires_at is None
    assert engine.run_inline(run.pk).status == "awaiting_plan_approval"


def test_the_timeline_says_the_patterns_own_lines(alice):
    run = engine.run_inline(new_run(alice).pk)
    messages = list(Event.objects.filter(run=run).values_list("message", flat=True))
    assert "The run has started." in messages
    assert "The planner is writing plan v1." in messages
    assert "Waiting for you: approve, edit or reject the plan." in messages


def test_a_pattern_without_lines_of_its_own_gets_the_engines_neutral_ones(alice, monkeypatch):
    from agents_app.patterns import PATTERNS
    from agents_app.patterns.base import Gate, Pattern, StageResult

    class Bare(Pattern):
        name = "bare"
        label = "Bare"

        def first_stage(self, state):
            return "plan:1"

        def run_stage(self, stage, state, client):
            return StageResult(state=state, next_stage="step:1:0", gate=Gate("plan_approval"))

    monkeypatch.setitem(PATTERNS, "bare", Bare())
    run = engine.run_inline(engine.create_run(alice, "bare", "Anything.", options={},
                                              models=OFFLINE, enqueue=False).pk)
    messages = list(Event.objects.filter(run=run).values_list("message", flat=True))
    assert "Stage plan:1 started." in messages
    assert "Waiting for a decision (plan_approval)." in messages
    assert not any("planner" in m or "approve, edit" in m for m in messages)


def test_a_stage_that_says_nothing_of_what_comes_next_fails_its_run(alice, monkeypatch):
    from agents_app.patterns import PATTERNS
    from agents_app.patterns.base import Pattern, StageResult

    class Silent(Pattern):
        name = "silent"

        def first_stage(self, state):
            return "only"

        def run_stage(self, stage, state, client):
            return StageResult(state=state)

    monkeypatch.setitem(PATTERNS, "silent", Silent())
    run = engine.run_inline(engine.create_run(alice, "silent", "Anything.", options={},
                                              models=OFFLINE, enqueue=False).pk)
    assert run.status == "failed" and not run.lease_owner
    assert run.error == ("Internal error in stage only: ValueError: stage only returned no "
                         "outcome, gate or next stage")
