"""Enqueueing a run's continuation, and sending it again while the broker is away.

The engine knows the task only by its name: ``agents_app.tasks`` imports the engine, never
the other way round. Everything that enqueues goes through ``schedule`` (looked up on this
module), so a test replaces that one function to keep runs off the broker.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import transaction

from config import send_task

log = logging.getLogger("quorum.engine")

# The name ``agents_app.tasks.advance_run`` is registered under (``@shared_task(name=...)``).
ADVANCE_RUN = "agents_app.tasks.advance_run"


def send(run_id: int, countdown: float | None = None) -> None:
    """Put one ``advance_run`` message on the broker; raises if the broker does not take it."""
    send_task(ADVANCE_RUN, (run_id,), countdown=countdown, ignore_result=True)


def schedule(run_id: int, countdown: float | None = None) -> None:
    try:
        send(run_id, countdown)
    except Exception as exc:  # broker away: sent again from here once it is back
        log.warning("could not enqueue run %s (sent again when the broker is back): %s",
                    run_id, exc)
        _send_later(run_id)


# A continuation that could not be enqueued (Redis restarting while a stage committed, or
# while a person decided at a gate) is sent again from this process as soon as the broker
# takes it, instead of waiting for the beat's sweep (minutes) or forever where no beat runs.
# If this process dies first, the sweeper still finds the run (tests/faults/redis_restart.py).
_unsent: set[int] = set()
_unsent_lock = threading.Lock()
_resender: threading.Thread | None = None


def _send_later(run_id: int) -> None:
    global _resender
    with _unsent_lock:
        _unsent.add(run_id)
        if _resender is None or not _resender.is_alive():
            _resender = threading.Thread(target=_resend, name="quorum-resend", daemon=True)
            _resender.start()


def _resend() -> None:
    global _resender
    delay = 1.0
    while True:
        time.sleep(delay)
        with _unsent_lock:
            pending = sorted(_unsent)
            if not pending:
                _resender = None
                return
        for run_id in pending:
            try:
                send(run_id)
            except Exception:  # still away: back off, up to half a minute
                delay = min(delay * 2, 30.0)
                break
            with _unsent_lock:
                _unsent.discard(run_id)
            log.info("enqueued run %s after the broker came back", run_id)
        else:
            delay = 1.0


def schedule_on_commit(run_id: int, enqueue: bool) -> None:
    if enqueue:
        transaction.on_commit(lambda: schedule(run_id))
