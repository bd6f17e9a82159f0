"""Running a stage: claim the run, announce the stage, run the pattern's stage through a
gateway that journals its model calls, and commit what it returned. A stage the database
interrupted gives the run back and runs again later, replaying its journaled calls."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from common import proc, turns

from ..events import append_events
from ..llm.gateway import Gateway, is_offline, redact
from ..llm.runtime import litellm as litellm_runtime
from ..models import RUNNABLE, ModelCall, Run
from ..patterns import get_pattern
from ..patterns.base import (
    Cancelled,
    ModelClient,
    ModelError,
    Pattern,
    RunStopped,
    StageResult,
)
from ..patterns.role_models import RoleModels
from . import scheduling
from .ahead import Ahead, AheadFailed, Journal
from .ahead import advancing as ahead_counted
from .commit import Next, commit_result, stage_event, stop_run
from .journal import DbJournal, gateway_config
from .leases import DB_UNAVAILABLE, LeaseLost, StageInterrupted, claim_run, lease_token

log = logging.getLogger("quorum.engine")


def offline_only() -> bool:
    """Every role's model is the built-in offline one (no provider configured). Read from
    the models a role could get, without loading every pattern to list the roles."""
    roles = settings.QUORUM_ROLE_MODELS
    models = roles.possible() if isinstance(roles, RoleModels) else set(roles.values())
    return all(is_offline(m) for m in (settings.QUORUM_DEFAULT_MODEL, *models))


def advance(run_id: int, *, enqueue: bool = True) -> bool:
    """Run the run's current stage if it can be claimed. True if another stage is ready."""
    return bool(step(run_id, enqueue=enqueue))


def step(run_id: int, *, enqueue: bool, claimed: Next | None = None,
         fuse: bool = False) -> Next:
    """Run one stage: the one ``claimed`` holds (claimed by the previous stage's commit),
    else the run's current stage if it can be claimed. With ``fuse`` the commit also claims
    the next stage for the caller, who then runs it at once (never drops it)."""
    if claimed is not None and claimed.run is not None and claimed.claimed_by:
        run, token = claimed.run, claimed.claimed_by
        pattern = get_pattern(run.pattern)
    else:
        # LiteLLM loads when first needed (seconds): before a lease is taken, never while one
        # runs out (a worker's first stages would otherwise wait for the sweeper). The
        # built-in offline model is called without it: a server with no other model
        # configured does not load it (a run given another model loads it at its first call).
        if not offline_only():
            litellm_runtime()
        token = lease_token()
        # One write transaction claims the run (and reads it back), marks the stage running
        # and logs its start.
        try:
            with transaction.atomic():
                taken = claim_run(run_id, token)
                if taken is None:
                    return Next(False)
                run = taken
                pattern = get_pattern(run.pattern)
                if not run.cancel_requested:
                    # The status goes into the same UPDATE that numbers the event.
                    run.status = pattern.status_for(run.stage)
                    append_events(run_id, [stage_event(pattern, run.stage, run.stage_attempt)],
                                  status=run.status)
        except DB_UNAVAILABLE as exc:  # the claim (most likely) did not happen
            return _interrupted(run_id, (token,), "", exc, enqueue)
    next_token = lease_token() if fuse and not enqueue else ""
    ahead = claimed.ahead if claimed is not None else None
    try:
        return _run_stage(run, pattern, token, enqueue, next_token, ahead)
    except DB_UNAVAILABLE as exc:  # the stage's commit (or its end) could not be written
        if ahead is not None:  # failed before it knew whether the run reached it
            try:
                ahead.settle()
            except AheadFailed as failed:
                return _dropped(run_id, failed, enqueue)
        return _interrupted(run_id, (token, next_token), run.stage, exc, enqueue)


def advance_in_place(run_id: int, *, deadline: float | None = None,
                     max_stages: int = 1000) -> bool:
    """Advance a run stage after stage in this thread, each stage's commit claiming the next
    one, until it waits, ends, is claimed elsewhere, or ``deadline`` (``time.monotonic()``)
    passes. True when a stage is still ready: the caller queues the run."""
    return bool(_in_place(run_id, deadline, max_stages))


def _in_place(run_id: int, deadline: float | None, max_stages: int) -> Next:
    last = Next(False)
    with ahead_counted():
        for n in range(max_stages):
            fuse = n + 1 < max_stages and (deadline is None or time.monotonic() < deadline)
            last = step(run_id, enqueue=False, claimed=last, fuse=fuse)
            if not last or not fuse:
                break
    return last


RETRY_AFTER_DB_ERROR = 5.0


def _run_stage(run: Run, pattern: Pattern, token: str, enqueue: bool, next_token: str,
               ahead: Ahead | None = None) -> Next:
    """Run the stage and commit its result. With ``ahead`` (the commit that claimed this stage
    is still in flight, ``ahead.py``) ``run`` is as that commit will leave it: the stage goes
    on to its first model call meanwhile and confirms the commit before it writes anything."""
    run_id, stage, seq = run.pk, run.stage, run.stage_seq
    if run.cancel_requested:
        return Next(stop_run(run_id, token, seq, Cancelled("Cancelled on request.")))
    started = time.monotonic()
    journal = DbJournal(run, stage, token, ahead=ahead)
    result: StageResult | None = None
    caught: Exception | None = None
    try:
        # A cancel stops a running command; a call made before the command is written first.
        with proc.watched(journal.while_waiting, begin=journal.before_waiting):
            result = run_checked(pattern, stage, run.state, Gateway(
                gateway_config(run.models_used), journal))
    except Exception as exc:  # handled below, once the commit this stage builds on is known
        caught = exc
    finally:
        journal.finish()
    try:
        journal.confirm()
    except AheadFailed as failed:
        return _dropped(run_id, failed, enqueue)
    except RunStopped as stop:  # a cancel that came before that commit
        caught = stop
    if isinstance(caught, LeaseLost):
        journal.flush_quietly()  # a lease released since still takes the call, for a replay
        log.warning("run %s: lease lost during stage %s; result dropped", run_id, stage)
        return Next(False)
    if isinstance(caught, StageInterrupted):  # the call not written yet is, once the db is back
        return _interrupted(run_id, (token,), stage, caught, enqueue, journal=journal)
    if isinstance(caught, RunStopped):
        journal.flush_quietly()
        return Next(stop_run(run_id, token, seq, caught, elapsed=time.monotonic() - started))
    if isinstance(caught, ModelError):
        result = StageResult(state=run.state, outcome="failed",
                             error=model_failure(run_id, stage, caught))
    elif caught is not None:  # a bug must fail the run with a reason, not kill the worker
        log.error("run %s: stage %s crashed", run_id, stage, exc_info=caught)
        result = StageResult(state=run.state, outcome="failed", error=(
            f"Internal error in stage {stage}: {type(caught).__name__}: {caught}"))
    assert result is not None
    # The stage's last call, not journaled yet, is written by its commit (``journal.unwritten``).
    try:
        return commit_result(run, token, seq, result, time.monotonic() - started, enqueue,
                             next_token, journal)
    except DB_UNAVAILABLE as exc:  # the commit (most likely) did not happen
        return _interrupted(run_id, (token, next_token), stage, exc, enqueue, journal=journal)


def _dropped(run_id: int, failed: AheadFailed, enqueue: bool) -> Next:
    """A stage started on a commit that did not happen is dropped (its calls with it), and
    the stage that commit was for is recovered as when its commit fails in its own thread: a
    refusal leaves the run to whoever moved it on, a database error runs it again."""
    if failed.error is None:
        return Next(False)
    if not isinstance(failed.error, DB_UNAVAILABLE):
        raise failed.error from failed
    return _interrupted(run_id, failed.tokens, failed.stage, failed.error, enqueue,
                        journal=failed.journal)


def run_checked(pattern: Pattern, stage: str, state: dict[str, Any],
                client: ModelClient) -> StageResult:
    """The pattern's stage, whose result says what comes next: an end, a gate or a stage."""
    result = pattern.run_stage(stage, state, client)
    if not (result.outcome or result.gate or result.next_stage):
        raise ValueError(f"stage {stage} returned no outcome, gate or next stage")
    return result


def _interrupted(run_id: int, tokens: tuple[str, ...], stage: str, exc: Exception,
                 enqueue: bool, patience: float = 60.0,
                 journal: Journal | None = None) -> Next:
    """The database failed the claim or the stage (``stage`` empty: the claim): drop the
    stage's result (its model calls stay journaled), give the run back as soon as the database
    takes a write, and go on: queued again, or at once by a caller advancing in place (True).
    A write whose answer was lost may still have reached the database (a server that crashed
    after committing it), so a run found waiting for a worker goes on too, and a commit found
    to have claimed the next stage for this caller (``tokens[1]``) is carried on. The stage's
    ``journal`` writes the call its commit did not, for the next attempt's replay. After
    ``patience`` seconds without the database: queued again for later, or the error raised to
    a caller advancing in place (``advance_run`` queues the run again)."""
    what = f"stage {stage}" if stage else "the claim"
    log.warning("run %s: %s interrupted, the database is unavailable (%s); it runs again",
                run_id, what, exc)
    token, next_token = tokens[0], (tokens[1] if len(tokens) > 1 else "")
    deadline, pause = time.monotonic() + patience, 1.0
    while True:
        try:
            connection.close_if_unusable_or_obsolete()  # a server restarted: connect again
            if next_token:
                carried = Run.objects.filter(pk=run_id, lease_owner=next_token).first()
                if carried is not None:  # the commit happened, and claimed the next stage
                    return Next(True, carried, next_token)
            if journal is not None:  # refused when the commit did happen (the run moved on)
                journal.flush_quietly()
            released = Run.objects.filter(pk=run_id, lease_owner=token).update(
                lease_owner="", lease_expires_at=None)
            ready = bool(released) or Run.objects.filter(
                pk=run_id, status__in=RUNNABLE, lease_owner="").exists()
        except DB_UNAVAILABLE:  # a locked SQLite waits out its busy timeout on each try
            if time.monotonic() + pause > deadline:
                break
            with turns.waiting():
                time.sleep(pause)
            pause = min(pause * 2, 10.0)
            continue
        if ready and enqueue:
            scheduling.schedule(run_id, countdown=1.0)
            return Next(False)
        return Next(ready)
    log.warning("run %s: the database is still unavailable after %.0f s", run_id, patience)
    if not enqueue:
        raise exc
    scheduling.schedule(run_id, countdown=RETRY_AFTER_DB_ERROR)
    return Next(False)


def model_failure(run_id: int, stage: str, exc: ModelError) -> str:
    """Why a run failed on a model call, for a person: the stage, and when the journal has the
    failed call, which role's model it was and after how many attempts."""
    call = (ModelCall.objects.filter(run_id=run_id, stage=stage).exclude(error="")
            .order_by("-id").first())
    if call is None or call.error != redact(str(exc)):
        return f"Stage {stage}: {exc}"
    return (f"Stage {stage}: the {call.role} model ({call.model}) failed after "
            f"{call.attempts} attempt(s): {exc}")


def run_inline(run_id: int, max_stages: int = 1000) -> Run:
    """Advance a run in this process until it waits, ends, or is claimed elsewhere."""
    last = _in_place(run_id, None, max_stages)
    if last.run is not None and not last:  # the run as its last commit left it
        return last.run
    return Run.objects.get(pk=run_id)
