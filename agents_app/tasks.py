"""Celery tasks. The worker runs a thread pool (see README): each task spends nearly all
its time waiting on a model provider, so one process holds hundreds of runs in flight."""

from __future__ import annotations

import gc
import logging
import time

import kombu
from celery import shared_task
from celery.signals import worker_init, worker_ready
from django.conf import settings

import config.celery  # noqa: F401  (Quorum's app is the current one for these tasks)
from common import turns

from . import engine
from .engine import scheduling
from .engine.stages import offline_only
from .llm.runtime import litellm as litellm_runtime
from .notify import tasks as notify_tasks  # noqa: F401  (registers the notification tasks)
from .patterns.registry import load_all

log = logging.getLogger("quorum.tasks")


# The kombu versions on which a Redis channel was shown to lose its connection info when its
# connection is collected (tests/test_kombu_patch.py checks the installed one still does). The
# same defect, reported upstream as celery/kombu#582 and celery/kombu#970: ``_connparams``
# reads ``self.connection.client``, which ``Connection.collect()`` has set to None.
KOMBU_LOSES_CONNINFO = frozenset({"5.7.0"})


def _survive_broker_loss() -> None:
    """Keep the worker alive when Redis goes away (seen with celery 5.7.0 and kombu 5.7.0;
    tests/faults/redis_restart.py, tests/test_faults_redis.py).

    On losing the broker, Celery's consumer first *collects* its connection, which detaches
    the transport from its connection info, and then closes it. Closing the default channel
    puts the unacknowledged messages (the stages running now, ``acks_late``) back through
    that transport and fails with ``AttributeError: 'NoneType' object has no attribute
    'hostname'``, which Celery treats as unrecoverable: the worker shuts down once its
    running stages end, and no run advances until someone restarts it. The same happens to
    those stages' acknowledgements. A Redis channel therefore remembers the connection info
    it was made with and gives it back to its transport when it needs a client again: the
    restore then fails as a connection error (ignored, Redis is down; the messages stay in
    Redis's unacked set) and later acknowledgements reach the restarted Redis."""
    from kombu.transport import redis as kombu_redis

    original = kombu_redis.Channel._connparams
    if getattr(original, "quorum_patched", False):
        return

    def _connparams(self, asynchronous=False):
        transport = self.connection
        if transport.client is None and "_quorum_conninfo" in self.__dict__:
            transport.client = self.__dict__["_quorum_conninfo"]
        elif transport.client is not None:
            self.__dict__["_quorum_conninfo"] = transport.client
        return original(self, asynchronous=asynchronous)

    _connparams.quorum_patched = True
    _connparams.__wrapped__ = original
    kombu_redis.Channel._connparams = _connparams


if kombu.__version__ in KOMBU_LOSES_CONNINFO:
    _survive_broker_loss()


# A task keeps advancing its run in place, stage after stage, for up to this long, then
# hands the run back to the queue: no queue hop per stage (tens of milliseconds each), while a
# long run still leaves the queue regularly. Every stage is still claimed and committed on its
# own (a stage's commit claims the next one), so a redelivered or duplicate task can never
# repeat one.
CONTINUE_IN_PLACE_SECONDS = 120.0


@shared_task(name=scheduling.ADVANCE_RUN, acks_late=True, reject_on_worker_lost=True,
             ignore_result=True)
def advance_run(run_id: int) -> None:
    deadline = time.monotonic() + CONTINUE_IN_PLACE_SECONDS
    turns.take()  # queued behind the stages running in this process (common/turns.py)
    try:
        if engine.advance_in_place(run_id, deadline=deadline):  # time is up: queue it again
            scheduling.schedule(run_id)
    except (*engine.DB_UNAVAILABLE, engine.StageInterrupted) as exc:  # down for a minute
        log.warning("run %s: the database is unavailable (%s); trying again in %s s", run_id,
                    exc, engine.RETRY_AFTER_DB_ERROR)
        scheduling.schedule(run_id, countdown=engine.RETRY_AFTER_DB_ERROR)
    finally:
        turns.give_back()


@shared_task(ignore_result=True)
def sweep_stuck_runs() -> None:
    engine.sweep()
    from .experiments.service import sweep_experiments

    sweep_experiments()


@shared_task(name="agents_app.tasks.gate_timers", ignore_result=True)
def gate_timers() -> None:
    """The gates' reminders, escalations and deadlines that are due (issue 35). The times
    are rows, so a restart of every process loses none; each fires once (a conditional
    UPDATE claims it), however many beats or workers run."""
    from .gates.core import sweep_timers

    fired = sweep_timers()
    if any(fired.values()):
        log.info("gate timers: %s", fired)


@shared_task(name="agents_app.tasks.experiment_run_ended", acks_late=True, ignore_result=True)
def experiment_run_ended(run_id: int) -> None:
    """A run of an experiment ended: score it and start its grid's next runs (issue 34).
    Redelivered, it scores nothing twice and starts nothing twice."""
    from .experiments.service import run_ended

    run_ended(run_id)


@worker_init.connect
def _take_turns(sender=None, **kwargs) -> None:
    turns.enable(settings.QUORUM_WORKER_TURNS)


@worker_ready.connect
def _recover(sender=None, **kwargs) -> None:
    node = getattr(sender, "hostname", None)
    if node:
        engine.set_worker_identity(node)
        engine.recover_after_restart(node)
    engine.sweep()


@worker_ready.connect
def _settle(sender=None, **kwargs) -> None:
    """A worker whose settings name a provider's model loads LiteLLM now rather than at its
    first stage (a server with only the offline model never needs it: ~130 MB and seconds of
    start-up saved); then everything loaded so far (Django, Celery, LiteLLM: ~475,000
    objects) moves out of the garbage collector's sight (``gc.freeze``): they live as long as
    the process, and every full collection would otherwise walk them all while holding the
    GIL, stalling every run in the process (measured: 2.7 → 1.4 ms of collection per
    four-call run in process, and no full collections over the start-up objects). Every
    pattern's package is loaded first, so the first run of each waits for no import."""
    if not offline_only():
        litellm_runtime()
    load_all()  # every pattern's package: a worker runs any of them, and they stay shared
    gc.collect()
    gc.freeze()
