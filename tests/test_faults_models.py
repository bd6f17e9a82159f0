"""Model faults (tests/faults/model_faults.py runs more): every pattern through the fake HTTP
provider failing 30% of requests with every fault kind, no retries, so the failures reach
the patterns. Every run ends completed, degraded and saying so, failed with a reason that
names the role and model, or waiting at its gate; never running. And a run that nothing
will advance (its message lost, or its worker gone with the lease) is brought to its end by
the beat's sweeper task."""

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from agents_app import engine
from agents_app.models import Event, ModelCall, Run
from agents_app.tasks import sweep_stuck_runs
from tests.fakeprovider import FAULTS, FakeProvider
from tests.faults import common
from tests.faults.model_faults import FAULT_VARIANTS, classify, fake_routes
from tests.stack import start_worker, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-provider-key")
    settings.QUORUM_LLM_MAX_RETRIES = 0
    settings.QUORUM_LLM_TIMEOUT = 1.0
    settings.QUORUM_LLM_RETRY_BASE_DELAY = 0.0
    (tmp_path / "repos").mkdir()
    settings.QUORUM_REPO_ROOTS = [str(tmp_path / "repos")]
    settings.QUORUM_WORKTREE_ROOT = str(tmp_path / "worktrees")
    with FakeProvider(hang=2.0) as provider:
        settings.QUORUM_API_BASE = provider.url
        yield provider


@pytest.mark.parametrize("pattern", common.PATTERN_NAMES)
def test_every_run_ends_readably_when_a_third_of_the_calls_fail(fake, alice, pattern):
    fake.configure(faults={k: 0.3 / len(FAULTS) for k in FAULTS}, seed=11)
    # At least one fault for sure, a different kind for each pattern; then the rates.
    fake.upcoming = [FAULTS[common.PATTERN_NAMES.index(pattern) % len(FAULTS)]]
    variants = FAULT_VARIANTS[pattern]
    outcomes = []
    for i in range(3):
        run_id = common.run_clean(variants[i % len(variants)], i, models=fake_routes(pattern),
                                  repo_name=f"r{i}", skip=("escalation",))
        outcome, problem = classify(run_id)
        assert not problem, (run_id, outcome, problem)
        outcomes.append(outcome)
    assert "stuck" not in outcomes
    assert any(s.fault for s in fake.seen)  # the faults were there


def test_a_run_failed_by_its_model_names_the_role_and_the_model(fake, alice):
    fake.upcoming = ["500"]
    run = engine.create_run(alice, "reflective", "Explain attention.", options={},
                            models=fake_routes("reflective"), enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "failed"
    assert run.error.startswith("Stage draft:1: the actor model (openai/fake-actor) failed "
                                "after 1 attempt(s): InternalServerError"), run.error
    assert "server had an error" in run.error


def test_a_failed_subtask_is_said_not_swallowed(fake, alice):
    fake.upcoming = ["", "500"]  # the lead delegates; the first member's call fails
    variant = common.Variant("team_lead", "sequential", {"strategy": "sequential"})
    run_id = common.run_clean(variant, 0, models=fake_routes("team_lead"))
    run = Run.objects.get(pk=run_id)
    assert run.status == "completed", run.error
    said = list(Event.objects.filter(run=run, kind="subtask_failed").values_list("message",
                                                                                flat=True))
    assert len(said) == 1 and said[0].startswith("T1 (researcher) failed: InternalServerError")
    assert classify(run_id) == ("degraded", "")


def test_a_debate_nobody_answers_says_why(fake, alice):
    fake.upcoming = ["500", "reset"]
    run = engine.create_run(alice, "debate", "Rewrite it?", options={"max_rounds": 1},
                            models=fake_routes("debate"), enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "failed"
    assert run.error.startswith("Round 1: no position answered (For: ")
    assert "Against: " in run.error and "InternalServerError" in run.error


@pytest.mark.integration
def test_the_beat_sweeper_brings_runs_nothing_would_advance_to_their_end(
        django_db_setup, redis_server, stack_dir, alice):
    """One run's message was lost (no task, no lease); another's worker died on another
    machine holding its lease (no restart of that node will free it). Nothing advances
    them until the sweeper task, which the beat process sends every minute, requeues both."""
    assert django_settings.CELERY_BEAT_SCHEDULE["sweep-stuck-runs"]["task"] == \
        sweep_stuck_runs.name
    worker = start_worker(stack_dir, node="sweeper", QUORUM_OFFLINE_LATENCY="0.05")
    try:
        models = {r: common.OFFLINE for r in ("planner", "executor", "synthesizer")}
        task = "Collect the logs, then find the error, and finally write a report."
        lost, dead = (engine.create_run(alice, "plan_execute", task, options={
            "auto_approve": True}, models=models, enqueue=False) for _ in range(2))
        long_ago = timezone.now() - timedelta(minutes=10)
        Run.objects.filter(pk=lost.pk).update(updated_at=long_ago)
        Run.objects.filter(pk=dead.pk).update(
            status="planning", lease_owner="gone@elsewhere|0123456789ab|1",
            lease_expires_at=timezone.now() - timedelta(seconds=1), stage_attempt=1)
        assert set(Run.objects.filter(pk__in=[lost.pk, dead.pk])
                   .values_list("status", flat=True)) <= {"queued", "planning"}
        sweep_stuck_runs.delay()  # what the beat sends
        for run in (lost, dead):
            wait_until(lambda r=run: Run.objects.get(pk=r.pk).status == "completed", 60,
                       what=f"run {run.pk} to complete after the sweep")
    finally:
        worker.stop()
    for run in (lost, dead):
        keys = list(ModelCall.objects.filter(run=run).values_list("stage", "key"))
        assert len(keys) == 5 == len(set(keys))
    assert Event.objects.filter(run=dead, kind="stage_resumed").count() == 1


def test_a_step_failed_by_its_model_names_the_executor(fake, alice):
    fake.upcoming = ["", "500"]  # the planner answers; the executor's first call fails
    run = engine.create_run(alice, "plan_execute", "Collect the logs, then find the error.",
                            options={"auto_approve": True, "max_replans": 0},
                            models=fake_routes("plan_execute"), enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "failed"
    assert "failed: the executor's model failed: InternalServerError" in run.error, run.error
    assert ".." not in run.error
