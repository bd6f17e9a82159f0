"""Celery tasks. The worker runs a thread pool (see README): each task spends nearly all
its time waiting on a model provider, so one process holds hundreds of runs in flight."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_ready

from . import engine

log = logging.getLogger("quorum.tasks")


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def advance_run(run_id: int) -> None:
    engine.advance(run_id)


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
