"""A worker killed with SIGKILL in the middle of a step: the restarted worker recovers the
run, which finishes with no duplicated step, call or event. No other worker runs here."""

import pytest

from agents_app.models import Event, Run, StepResult
from tests.stack import start_worker, wait_until
from tests.test_worker_integration import assert_no_duplicates, start, status_of

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_worker_killed_mid_step_restarts_and_finishes_without_duplicates(
        django_db_setup, redis_server, stack_dir, alice):
    first = start_worker(stack_dir, node="killme", QUORUM_OFFLINE_LATENCY="1.0")
    try:
        run = start(alice, auto_approve=True)

        def second_step_in_flight():
            r = Run.objects.get(pk=run.pk)
            return r.stage == "step:1:1" and r.lease_owner and \
                StepResult.objects.filter(run_id=run.pk).count() == 1

        wait_until(second_step_in_flight, 40, interval=0.05, what="step 2 in flight")
        first.kill()
        stuck = Run.objects.get(pk=run.pk)
        assert stuck.status == "executing" and stuck.lease_owner.startswith("killme@")
    finally:
        first.stop()
    second = start_worker(stack_dir, node="killme", QUORUM_OFFLINE_LATENCY="0.1")
    try:
        wait_until(lambda: status_of(run.pk) == "completed", 40, what="completion after restart")
    finally:
        second.stop()
    assert_no_duplicates(run.pk)
    assert Event.objects.filter(run_id=run.pk, kind="stage_resumed").count() == 1
