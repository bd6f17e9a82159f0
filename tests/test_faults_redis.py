"""Redis restarted in the middle of runs (tests/faults/redis_restart.py does more): the worker
survives losing its broker while a stage runs, a decision given while Redis is down is not
lost, runs finish once Redis is back without any sweeper, and a page watching a run that
ended during the outage ends up showing every event, each once, without a reload.

Everything real: Redis (the session's, restarted empty on its port), a Celery worker,
Daphne, Chromium.
"""

import time

import pytest

from agents_app import engine
from agents_app.models import Approval, Run
from agents_app.patterns.base import Decision
from tests.conftest import OFFLINE, sign_in
from tests.stack import free_port, start_redis, start_web, start_worker, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

TASK = "Collect the logs, then find the error, and finally write a report."
SEQS = "() => Array.from(document.querySelectorAll('#timeline li[data-seq]'))" \
       ".map(e => parseInt(e.dataset.seq, 10))"


def restart(redis_server, stack_dir, *, while_down) -> None:
    """Stop the session's Redis, call ``while_down``, start it again empty on the same port;
    the fixture then owns (and finally stops) the new process."""
    redis_server.stop()
    while_down()
    new = start_redis(stack_dir)
    redis_server.popen, redis_server._log, redis_server.log_path = \
        new.popen, new._log, new.log_path


def status(run_id) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run_id)


def test_runs_and_pages_recover_from_a_redis_restart(django_db_setup, redis_server, stack_dir,
                                                     browser_alice, page):
    alice = browser_alice
    port = free_port()
    worker = start_worker(stack_dir, node="redisfault", QUORUM_OFFLINE_LATENCY="0.8")
    web = start_web(stack_dir, port)
    try:
        base = f"http://127.0.0.1:{port}"
        sign_in(page, base)
        watched = engine.create_run(alice, "plan_execute", TASK, options={"auto_approve": True},
                                    models=OFFLINE)
        gated = engine.create_run(alice, "plan_execute", TASK, options={}, models=OFFLINE)
        page.goto(base + watched.get_absolute_url())
        page.evaluate("() => { window.__noReload = true; }")
        wait_until(lambda: status(gated.pk) == "awaiting_plan_approval", 60, what="the gate")
        # The watched run's last stage holds its (unacknowledged) message when Redis goes.
        wait_until(lambda: Run.objects.filter(pk=watched.pk, stage="synthesize")
                   .exclude(lease_owner="").exists(), 60, interval=0.02,
                   what="the last stage to run")

        def while_down():
            gated.refresh_from_db()
            # Its continuation cannot be enqueued now; it must not be lost.
            engine.decide(gated, alice, gated.stage_seq, Decision("approve", author="alice"))
            # The watched run ends while Redis is down: its last events cannot be announced.
            wait_until(lambda: status(watched.pk) == "completed", 30, what="the watched run")
            time.sleep(1)

        restart(redis_server, stack_dir, while_down=while_down)

        def finished():
            assert worker.popen.poll() is None, f"the worker exited:\n{worker.log()[-3000:]}"
            return status(gated.pk) == "completed"

        wait_until(finished, 60,
                   what="the run decided during the outage to finish (no sweeper runs here)")
        last = Run.objects.values_list("last_event_seq", flat=True).get(pk=watched.pk)
        wait_until(lambda: page.evaluate(SEQS) == list(range(1, last + 1)), 60, interval=0.25,
                   what=f"the page to show events 1..{last}")
        assert page.evaluate("() => window.__noReload") is True
        assert "Run completed" in page.locator("#timeline").inner_text()
        assert worker.popen.poll() is None, worker.log()[-3000:]
        assert "Unrecoverable error" not in worker.log()
    finally:
        web.stop()
        worker.stop()
    assert Approval.objects.filter(run=gated, user=alice, action="approve").count() == 1
    assert page.errors == []
