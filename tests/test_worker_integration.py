"""Runs through a real Celery worker (thread pool) and a real Redis server."""

from collections import Counter
from decimal import Decimal

import pytest

from agents_app import engine
from agents_app.models import Event, ModelCall, Run, StepResult
from agents_app.patterns.base import Decision
from agents_app.tasks import advance_run
from tests.conftest import OFFLINE
from tests.stack import start_worker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TASK = "Collect the logs, then find the error, and finally write a report."


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, redis_server, stack_dir):
    proc = start_worker(stack_dir, node="shared", QUORUM_OFFLINE_LATENCY="0.2")
    yield proc
    proc.stop()


def status_of(run_id):
    return Run.objects.values_list("status", flat=True).get(pk=run_id)


def start(owner, **options):
    return engine.create_run(owner, "plan_execute", TASK, options=options, models=OFFLINE,
                             max_cost_usd=Decimal("1"), max_tokens=100_000)


def second_step_in_flight(run_id) -> bool:
    """A worker holds the run in its second step, the first step's result committed."""
    r = Run.objects.get(pk=run_id)
    return r.stage == "step:1:1" and bool(r.lease_owner) and \
        StepResult.objects.filter(run_id=run_id).count() == 1


def assert_no_duplicates(run_id, steps=3, calls=5):
    assert StepResult.objects.filter(run_id=run_id).count() == steps
    keys = list(ModelCall.objects.filter(run_id=run_id).values_list("stage", "key"))
    assert len(keys) == calls and len(set(keys)) == calls
    seqs = list(Event.objects.filter(run_id=run_id).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    kinds = Counter(Event.objects.filter(run_id=run_id).values_list("kind", flat=True))
    assert kinds["plan_proposed"] == 1 and kinds["step_completed"] == steps
    assert kinds["run_finished"] == 1


def test_run_waits_at_the_gate_and_the_decision_resumes_it(worker, alice):
    run = start(alice)
    wait_until(lambda: status_of(run.pk) == "awaiting_plan_approval", 30, what="the plan gate")
    run.refresh_from_db()
    engine.decide(run, alice, run.stage_seq, Decision("approve", author="alice"))
    wait_until(lambda: status_of(run.pk) == "completed", 30, what="completion")
    run.refresh_from_db()
    assert "Offline model" in run.answer
    assert_no_duplicates(run.pk)


def test_duplicate_deliveries_during_a_run_do_nothing_extra(worker, alice):
    def settled(at_least: int) -> bool:
        """Every delivery received since the start has been processed, and enough came."""
        log = worker.log()
        received = log.count(" received") - received_before
        return received >= at_least and log.count("succeeded") - done_before == received

    log = worker.log()
    done_before, received_before = log.count("succeeded"), log.count(" received")
    run = start(alice, auto_approve=True)  # one task carries the run through its stages
    for _ in range(5):
        advance_run.delay(run.pk)
    wait_until(lambda: status_of(run.pk) == "completed", 30, what="completion")
    wait_until(lambda: settled(1 + 5), 30, what="every delivery to be processed")
    events = Event.objects.filter(run_id=run.pk).count()
    for _ in range(3):
        advance_run.delay(run.pk)  # deliveries for a finished run
    wait_until(lambda: settled(1 + 5 + 3), 30, what="the late deliveries to be processed")
    assert Event.objects.filter(run_id=run.pk).count() == events
    assert_no_duplicates(run.pk)


def test_one_delivery_carries_a_run_through_its_stages(worker, alice):
    """No queue hop per stage: the task that starts a run keeps advancing it in place."""
    log = worker.log()
    done_before, received_before = log.count("succeeded"), log.count(" received")
    run = start(alice, auto_approve=True)  # start, plan, 3 steps, synthesize
    wait_until(lambda: status_of(run.pk) == "completed", 30, what="completion")
    wait_until(lambda: worker.log().count("succeeded") > done_before, 30, what="the task's end")
    assert worker.log().count(" received") - received_before == 1
    assert Event.objects.filter(run_id=run.pk, kind="stage_started").count() >= 5
    assert_no_duplicates(run.pk)
