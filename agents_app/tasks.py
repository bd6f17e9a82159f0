"""Celery tasks. The worker runs a thread pool (see README): each task spends nearly all
its time waiting on a model provider, so one process holds hundreds of runs in flight."""

from __future__ import annotations

import logging
import time

from celery import shared_task
from celery.signals import worker_ready

from . import engine

log = logging.getLogger("quorum.tasks")


# A task keeps advancing its run in place, stage after stage, for up to this long, then
# hands the run back to the queue: no queue hop per stage (tens of milliseconds each), while a
# long run still leaves the queue regularly. Every stage is still claimed and committed on its
# own, so a redelivered or duplicate task can never repeat one.
CONTINUE_IN_PLACE_SECONDS = 120.0


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def advance_run(run_id: int) -> None:
    deadline = time.monotonic() + CONTINUE_IN_PLACE_SECONDS
    while engine.advance(run_id, enqueue=False):
        if time.monotonic() > deadline:
            engine.schedule(run_id)
            return


@shared_task(ignore_result=True)
def sweep_stuck_runs() -> None:
    engine.sweep()


@worker_ready.connect
def _recover(sender=None, **kwargs) -> None:
    node = getattr(sender, "hostname", None)
    if node:
        engine.set_worker_identity(node)
        engine.recover_after_restart(node)
    engine.sweep()
