"""``manage.py worker`` (make dev's process model): two Celery workers forked from one warm
parent run runs; both killed with SIGKILL mid-step, they are forked again from the parent, and
the run finishes with no duplicated step, call or event; stopping the parent stops them all."""

import os
import signal

import pytest

from agents_app.models import Event, Run
from tests.stack import child_pids, start_workers, wait_until
from tests.test_worker_integration import (
    assert_no_duplicates,
    second_step_in_flight,
    start,
    status_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_forked_workers_killed_mid_step_are_forked_again_and_finish_the_run(
        django_db_setup, redis_server, stack_dir, alice):
    workers = start_workers(stack_dir, node="forked", processes=2,
                            QUORUM_OFFLINE_LATENCY="1.0")
    try:
        first = child_pids(workers.popen.pid)
        assert len(first) == 2
        run = start(alice, auto_approve=True)
        wait_until(lambda: second_step_in_flight(run.pk), 40, interval=0.05,
                   what="step 2 in flight")
        assert Run.objects.get(pk=run.pk).lease_owner.startswith(("forked1@", "forked2@"))
        for pid in first:
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: len(set(child_pids(workers.popen.pid)) - set(first)) == 2, 30,
                   what="two workers forked again")
        wait_until(lambda: status_of(run.pk) == "completed", 60, what="completion after restart")
        log = workers.log()
        assert "forked1 ended (signal 9); starting it again" in log
        assert "forked2 ended (signal 9); starting it again" in log
        children = child_pids(workers.popen.pid)
    finally:
        workers.popen.send_signal(signal.SIGTERM)  # the parent only: it passes it on
        workers.popen.wait(timeout=60)
        workers.stop()
    assert workers.popen.returncode == 0
    assert not any(_alive(pid) for pid in children)
    assert_no_duplicates(run.pk)
    assert Event.objects.filter(run_id=run.pk, kind="stage_resumed").count() == 1
