"""The run engine: advances durable runs one stage at a time.

Every transition is claimed. A worker takes a *lease* on a runnable run with a conditional
update, runs the pattern's stage, and commits the result only if it still holds the lease
and the run's ``stage_seq`` is unchanged; the commit bumps ``stage_seq``. A task delivered
twice finds the lease taken or the stage gone and does nothing. A worker killed mid-stage
leaves a lease that is recovered when a worker restarts (or expires for the sweeper); the
stage then runs again, replaying the model calls it had already journaled, so no call is
paid or recorded twice and no step is recorded twice (steps are written with the commit).

A gate commits the run as ``awaiting_<gate>`` and ends the task; a decision is recorded
by ``decide`` (under a row lock, checked against the ``stage_seq`` the person saw) and
enqueues the continuation.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from . import records
from .events import append_events
from .llm.gateway import CallOutcome, Gateway, GatewayConfig, is_offline, redact
from .models import RUNNABLE, TERMINAL, ModelCall, Run, Status, gate_status
from .patterns import get_pattern
from .patterns.base import (
    BudgetExceeded,
    Cancelled,
    Decision,
    Event,
    ModelError,
    RunStopped,
    StageAbandoned,
    StageResult,
    TimeLimitExceeded,
)

log = logging.getLogger("quorum.engine")

_identity = {"node": f"{socket.gethostname()}-{os.getpid()}", "boot": uuid.uuid4().hex[:12]}


def set_worker_identity(node: str) -> None:
    """Called when a Celery worker starts: leases carry its node name and this boot's id."""
    _identity["node"] = node


def _lease_token() -> str:
    """Unique per claim: helper threads left over from an abandoned attempt of a stage find
    the lease not theirs, even when the same worker thread claims the run again."""
    return f"{_identity['node']}|{_identity['boot']}|{threading.get_ident()}|" \
           f"{uuid.uuid4().hex[:8]}"


def _lease_until():
    return timezone.now() + timedelta(seconds=settings.QUORUM_STAGE_LEASE_SECONDS)


class LeaseLost(StageAbandoned):
    """Another worker owns this run now; drop the stage's result."""


# The database could not be used for a while (SQLite locked past its busy timeout, a Postgres
# connection lost): a transient condition, so the stage is run again, never failed or half
# written (tests/faults/db_locked.py).
DB_UNAVAILABLE = (OperationalError, InterfaceError)


class StageInterrupted(StageAbandoned):
    """The stage could not read or write the database; it runs again later. A pattern that
    catches exceptions broadly re-raises it, like every ``StageAbandoned``, so a locked
    database is never mistaken for a failed reviewer or model."""


class StaleDecision(Exception):
    """The run is no longer at the gate the person saw."""


# --- scheduling ------------------------------------------------------------------------------
def schedule(run_id: int, countdown: float | None = None) -> None:
    from .tasks import advance_run

    try:
        advance_run.apply_async((run_id,), countdown=countdown)
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
    from .tasks import advance_run

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
                advance_run.delay(run_id)
            except Exception:  # still away: back off, up to half a minute
                delay = min(delay * 2, 30.0)
                break
            with _unsent_lock:
                _unsent.discard(run_id)
            log.info("enqueued run %s after the broker came back", run_id)
        else:
            delay = 1.0


def _schedule_on_commit(run_id: int, enqueue: bool) -> None:
    if enqueue:
        transaction.on_commit(lambda: schedule(run_id))


# Patterns whose runs hold resources outside the database (a git worktree) register what to
# do once a run has ended, however it ended: completed, failed, cancelled or over budget.
TERMINAL_HOOKS: dict[str, Callable[[int], None]] = {}


def register_terminal_hook(pattern: str, hook: Callable[[int], None]) -> None:
    TERMINAL_HOOKS[pattern] = hook


def _after_terminal(run_id: int, pattern: str) -> None:
    hook = TERMINAL_HOOKS.get(pattern)
    if hook is None:
        return

    def call():
        try:
            hook(run_id)
        except Exception:  # a failed clean-up must not undo or hide the run's end
            log.exception("run %s: clean-up after the end failed", run_id)

    transaction.on_commit(call)


# --- creating a run --------------------------------------------------------------------------
def gateway_config(routes: dict[str, str]) -> GatewayConfig:
    return GatewayConfig(
        routes=routes,
        timeout=settings.QUORUM_LLM_TIMEOUT,
        max_retries=settings.QUORUM_LLM_MAX_RETRIES,
        retry_base_delay=settings.QUORUM_LLM_RETRY_BASE_DELAY,
        allow_network=settings.QUORUM_ALLOW_MODEL_REQUESTS,
        api_base=settings.QUORUM_API_BASE,
    )


def create_run(owner, pattern_name: str, task: str, *, options: dict, models: dict[str, str],
               max_cost_usd: Decimal | None = None, max_tokens: int | None = None,
               enqueue: bool = True) -> Run:
    pattern = get_pattern(pattern_name)
    state = pattern.initial_state(task, options)
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner, pattern=pattern.name, task=task, status=Status.QUEUED,
            stage=pattern.first_stage(state), state=state, options=state.get("options", options),
            models_used=models, offline=any(is_offline(m) for m in models.values()),
            max_cost_usd=max_cost_usd, max_tokens=max_tokens)
        bound = pattern.bind_run(state, run.pk)
        if bound is not state:
            run.state, run.options = bound, bound.get("options", options)
            run.save(update_fields=["state", "options"])
        who = "offline model" if run.offline else ", ".join(sorted(set(models.values())))
        append_events(run.pk, [Event("run_created", f"{owner} started a {pattern.label} run "
                                     f"({who}).", {"models": models})])
        _schedule_on_commit(run.pk, enqueue)
    return run


# --- the journal: model calls persisted, replayed, and gated by limits ------------------------
@dataclass
class _Limits:
    max_cost: Decimal | None
    max_tokens: int | None
    max_seconds: float
    active_before: float


class DbJournal:
    def __init__(self, run: Run, stage: str, token: str):
        self.run_id = run.pk
        self.stage = stage
        self.token = token
        max_seconds = (run.options or {}).get("max_run_seconds") or settings.QUORUM_MAX_RUN_SECONDS
        self.limits = _Limits(run.max_cost_usd, run.max_tokens, float(max_seconds),
                              run.active_seconds)
        self.started = time.monotonic()
        # Only a stage run again after an interruption can have calls to replay.
        self.existing = {c.key: c for c in ModelCall.objects.filter(
            run_id=run.pk, stage=stage)} if run.stage_attempt > 1 else {}
        self.thread = threading.get_ident()
        self.lock = threading.Lock()
        self.extended_at = time.monotonic()  # the claim has just set a fresh lease

    def _release(self) -> None:
        """Parallel stages call from helper threads, each with its own Django connection:
        close it after each use so a finished helper thread leaves no connection behind."""
        if threading.get_ident() != self.thread:
            connection.close()

    def replay(self, key: str) -> CallOutcome | None:
        c = self.existing.get(key)
        if c is None:
            return None
        return CallOutcome(role=c.role, model=c.model, messages=c.messages, response=c.response,
                           prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
                           cost_usd=float(c.cost_usd), latency_ms=c.latency_ms,
                           attempts=c.attempts, error=c.error, retryable=c.retryable)

    def before_call(self, key: str, role: str, model: str) -> None:
        try:
            self._check_and_extend(role)
        except DB_UNAVAILABLE as exc:
            self._release()
            raise StageInterrupted(f"the database could not be read before the {role} call: "
                                   f"{exc}") from exc
        except BaseException:
            self._release()
            raise
        # On success the helper thread keeps its connection for ``record``, which releases it.

    def _check_and_extend(self, role: str) -> None:
        row = Run.objects.filter(pk=self.run_id).values(
            "lease_owner", "cancel_requested", "cost_usd", "prompt_tokens",
            "completion_tokens").get()
        if row["lease_owner"] != self.token:
            raise LeaseLost()
        if row["cancel_requested"]:
            raise Cancelled("Cancelled on request, before the next model call.")
        lim = self.limits
        spent = row["cost_usd"]
        tokens = row["prompt_tokens"] + row["completion_tokens"]
        if lim.max_cost is not None and spent >= lim.max_cost:
            raise BudgetExceeded(f"Budget exceeded: spent ${spent:.4f} of the ${lim.max_cost:.4f} "
                                 f"allowed ({tokens:,} tokens). Stopped before the {role} call.")
        if lim.max_tokens is not None and tokens >= lim.max_tokens:
            raise BudgetExceeded(f"Budget exceeded: used {tokens:,} of the {lim.max_tokens:,} tokens "
                                 f"allowed (${spent:.4f}). Stopped before the {role} call.")
        elapsed = lim.active_before + time.monotonic() - self.started
        if elapsed > lim.max_seconds:
            raise TimeLimitExceeded(f"Time limit reached: {elapsed:.0f} s of work, the limit is "
                                    f"{lim.max_seconds:.0f} s. Stopped before the {role} call.")
        # Extending the lease is a write; parallel calls share one extension per tenth of
        # the lease instead of each taking the write lock on the critical path.
        now = time.monotonic()
        with self.lock:
            due = now - self.extended_at > settings.QUORUM_STAGE_LEASE_SECONDS / 10
            if due:
                self.extended_at = now
        if due:
            Run.objects.filter(pk=self.run_id, lease_owner=self.token).update(
                lease_expires_at=_lease_until())

    def record(self, key: str, o: CallOutcome) -> None:
        try:
            self._record(key, o)
        except DB_UNAVAILABLE as exc:
            raise StageInterrupted(f"the database could not record the {o.role} call: "
                                   f"{exc}") from exc
        finally:
            self._release()

    def _record(self, key: str, o: CallOutcome) -> None:
        with transaction.atomic():
            # A call that returns after its attempt was abandoned and the run claimed again
            # is not this attempt's to record: the new attempt makes (and records) it.
            if Run.objects.filter(pk=self.run_id).exclude(lease_owner="").exclude(
                    lease_owner=self.token).exists():
                raise LeaseLost()
            ModelCall.objects.create(
                run_id=self.run_id, stage=self.stage, key=key, role=o.role, model=o.model,
                messages=o.messages, response=o.response, prompt_tokens=o.prompt_tokens,
                completion_tokens=o.completion_tokens, cost_usd=Decimal(str(o.cost_usd)),
                latency_ms=o.latency_ms, attempts=o.attempts, error=redact(o.error),
                retryable=o.retryable)
            tokens = o.prompt_tokens + o.completion_tokens
            if o.error:
                msg = f"{o.role} call to {o.model} failed after {o.attempts} attempt(s): {o.error}"
            else:
                msg = (f"{o.role} · {o.model}: {tokens:,} tokens, ${o.cost_usd:.4f}, "
                       f"{o.latency_ms} ms")
            append_events(self.run_id, [Event("model_call", msg, {
                "role": o.role, "model": o.model, "tokens": tokens, "error": bool(o.error)})],
                cost_usd=F("cost_usd") + Decimal(str(o.cost_usd)),
                prompt_tokens=F("prompt_tokens") + o.prompt_tokens,
                completion_tokens=F("completion_tokens") + o.completion_tokens,
                calls=F("calls") + 1)


# --- advancing a run ---------------------------------------------------------------------------
def _claim(run_id: int, token: str) -> bool:
    now = timezone.now()
    return Run.objects.filter(pk=run_id, status__in=RUNNABLE).filter(
        Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    ).update(lease_owner=token, lease_expires_at=_lease_until(),
             stage_attempt=F("stage_attempt") + 1) == 1


def advance(run_id: int, *, enqueue: bool = True) -> bool:
    """Run the run's current stage if it can be claimed. True if another stage is ready."""
    token = _lease_token()
    # One write transaction claims the run, marks the stage running and logs its start.
    try:
        with transaction.atomic():
            if not _claim(run_id, token):
                return False
            run = Run.objects.get(pk=run_id)
            pattern = get_pattern(run.pattern)
            stage, seq = run.stage, run.stage_seq
            if not run.cancel_requested:
                if run.stage_attempt > 1:
                    event = Event("stage_resumed", f"Resuming stage {stage} (attempt "
                                  f"{run.stage_attempt}) after an interruption.", {"stage": stage})
                else:
                    event = Event("stage_started", pattern.describe_stage(stage)
                                  or describe_stage(stage), {"stage": stage})
                # The status goes into the same UPDATE that numbers the event.
                append_events(run_id, [event], status=pattern.status_for(stage))
    except DB_UNAVAILABLE as exc:  # the claim (most likely) did not happen
        return _interrupted(run_id, token, "", exc, enqueue)
    try:
        return _run_stage(run, pattern, stage, seq, token, enqueue)
    except DB_UNAVAILABLE as exc:  # the stage's commit (or its end) could not be written
        return _interrupted(run_id, token, stage, exc, enqueue)


RETRY_AFTER_DB_ERROR = 5.0


def _run_stage(run: Run, pattern, stage: str, seq: int, token: str, enqueue: bool) -> bool:
    run_id = run.pk
    if run.cancel_requested:
        return _stop(run_id, token, seq, Cancelled("Cancelled on request."))
    started = time.monotonic()
    try:
        result = pattern.run_stage(stage, run.state, Gateway(
            gateway_config(run.models_used), DbJournal(run, stage, token)))
    except LeaseLost:
        log.warning("run %s: lease lost during stage %s; result dropped", run_id, stage)
        return False
    except StageInterrupted as exc:
        return _interrupted(run_id, token, stage, exc, enqueue)
    except RunStopped as stop:
        return _stop(run_id, token, seq, stop, elapsed=time.monotonic() - started)
    except ModelError as exc:
        result = StageResult(state=run.state, outcome="failed",
                             error=model_failure(run_id, stage, exc))
    except Exception as exc:  # a bug must fail the run with a reason, not kill the worker
        log.exception("run %s: stage %s crashed", run_id, stage)
        result = StageResult(state=run.state, outcome="failed",
                             error=f"Internal error in stage {stage}: {type(exc).__name__}: {exc}")
    return _commit(run_id, token, seq, result, time.monotonic() - started, enqueue)


def _interrupted(run_id: int, token: str, stage: str, exc: Exception, enqueue: bool,
                 patience: float = 60.0) -> bool:
    """The database failed the claim or the stage (``stage`` empty: the claim): drop the
    stage's result (its model calls stay journaled), give the run back as soon as the database
    takes a write, and go on: queued again, or at once by a caller advancing in place (True).
    A write whose answer was lost may still have reached the database (a server that crashed
    after committing it), so a run found waiting for a worker goes on too. After ``patience``
    seconds without the database: queued again for later, or the error raised to a caller
    advancing in place (``advance_run`` queues the run again)."""
    what = f"stage {stage}" if stage else "the claim"
    log.warning("run %s: %s interrupted, the database is unavailable (%s); it runs again",
                run_id, what, exc)
    deadline, pause = time.monotonic() + patience, 1.0
    while True:
        try:
            connection.close_if_unusable_or_obsolete()  # a server restarted: connect again
            released = Run.objects.filter(pk=run_id, lease_owner=token).update(
                lease_owner="", lease_expires_at=None)
            ready = bool(released) or Run.objects.filter(
                pk=run_id, status__in=RUNNABLE, lease_owner="").exists()
        except DB_UNAVAILABLE:  # a locked SQLite waits out its busy timeout on each try
            if time.monotonic() + pause > deadline:
                break
            time.sleep(pause)
            pause = min(pause * 2, 10.0)
            continue
        if ready and enqueue:
            schedule(run_id, countdown=1.0)
            return False
        return ready
    log.warning("run %s: the database is still unavailable after %.0f s", run_id, patience)
    if not enqueue:
        raise exc
    schedule(run_id, countdown=RETRY_AFTER_DB_ERROR)
    return False


def model_failure(run_id: int, stage: str, exc: ModelError) -> str:
    """Why a run failed on a model call, for a person: the stage, and when the journal has the
    failed call, which role's model it was and after how many attempts."""
    call = (ModelCall.objects.filter(run_id=run_id, stage=stage).exclude(error="")
            .order_by("-id").first())
    if call is None or call.error != redact(str(exc)):
        return f"Stage {stage}: {exc}"
    return (f"Stage {stage}: the {call.role} model ({call.model}) failed after "
            f"{call.attempts} attempt(s): {exc}")


def describe_stage(stage: str) -> str:
    kind, *args = stage.split(":")
    if kind == "start":
        return "The run has started."
    if kind == "plan":
        return f"The planner is writing plan v{args[0]}."
    if kind == "step":
        return f"The executor is working on step {int(args[1]) + 1} (plan v{args[0]})."
    if kind == "synthesize":
        return "The synthesizer is writing the answer."
    if kind == "direct":
        return "Answering directly."
    return f"Stage {stage} started."


def _locked_run(run_id: int, token: str, seq: int) -> Run | None:
    return Run.objects.select_for_update().filter(pk=run_id, lease_owner=token,
                                                  stage_seq=seq).first()


def _commit(run_id, token, seq, result: StageResult, elapsed: float, enqueue: bool) -> bool:
    with transaction.atomic():
        run = _locked_run(run_id, token, seq)
        if run is None:
            log.warning("run %s: stage result dropped, the run moved on", run_id)
            return False
        pattern = get_pattern(run.pattern)
        records.persist(run, result.records)
        run.state = result.state
        run.stage_seq += 1
        run.stage_attempt = 0
        run.lease_owner, run.lease_expires_at = "", None
        run.active_seconds += elapsed
        events = list(result.events)
        if result.outcome:
            run.status = {"completed": Status.COMPLETED, "cancelled": Status.CANCELLED}.get(
                result.outcome, Status.FAILED)
            run.stage, run.gate = "", ""
            run.answer = result.answer or ""
            run.error = result.error
            run.finished_at = timezone.now()
            _after_terminal(run_id, run.pattern)
            events.append(Event("run_finished", {
                Status.COMPLETED: "Run completed.", Status.CANCELLED: "Run stopped."}.get(
                    run.status, f"Run failed: {result.error}"), {"status": run.status}))
        elif result.gate:
            run.status = gate_status(result.gate.kind)
            run.gate = result.gate.kind
            run.stage = result.next_stage or ""
            events.append(Event("gate_opened", pattern.gate_message(result.gate.kind)
                                or gate_message(result.gate.kind),
                                {"gate": result.gate.kind, **result.gate.payload}))
        else:
            run.status = pattern.status_for(result.next_stage)
            run.stage = result.next_stage
        run.save(update_fields=["state", "stage_seq", "stage_attempt", "lease_owner",
                                "lease_expires_at", "active_seconds", "status", "stage", "gate",
                                "answer", "error", "finished_at", "updated_at"])
        append_events(run_id, events)
        runnable = run.status in RUNNABLE
        _schedule_on_commit(run_id, enqueue and runnable)
    return runnable


def gate_message(gate: str) -> str:
    if gate == "plan_approval":
        return "Waiting for you: approve, edit or reject the plan."
    return f"Waiting for a decision ({gate})."


def _stop(run_id, token, seq, stop: RunStopped, elapsed: float = 0.0) -> bool:
    with transaction.atomic():
        run = _locked_run(run_id, token, seq)
        if run is None:
            return False
        _finish(run, stop.status, str(stop), elapsed)
    return False


def _finish(run: Run, status: str, reason: str, elapsed: float = 0.0) -> None:
    run.status = status
    run.error = "" if status == Status.CANCELLED else reason
    run.stage, run.gate = "", ""
    run.stage_seq += 1
    run.lease_owner, run.lease_expires_at = "", None
    run.active_seconds += elapsed
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "stage", "gate", "stage_seq", "lease_owner",
                            "lease_expires_at", "active_seconds", "finished_at", "updated_at"])
    _after_terminal(run.pk, run.pattern)
    kind = {Status.CANCELLED: "run_cancelled", Status.BUDGET_EXCEEDED: "budget_exceeded"}.get(
        status, "run_finished")
    append_events(run.pk, [Event(kind, reason, {"status": status})])


# --- people's actions ------------------------------------------------------------------------
def decide(run: Run, user, expected_seq: int, decision: Decision, *, enqueue: bool = True) -> Run:
    """Apply a decision at the run's gate. Raises StaleDecision or InvalidDecision."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if not locked.is_waiting or locked.stage_seq != expected_seq:
            raise StaleDecision("This run is no longer waiting for that decision: it was "
                                "decided already, cancelled, or the page is out of date.")
        pattern = get_pattern(locked.pattern)
        result = pattern.decide(locked.gate, locked.state, decision)
        records.persist(locked, result.records, user=user)
        locked.state = result.state
        locked.stage = result.next_stage
        locked.status = pattern.status_for(result.next_stage)
        locked.gate = ""
        locked.stage_seq += 1
        locked.save(update_fields=["state", "stage", "status", "gate", "stage_seq", "updated_at"])
        append_events(locked.pk, result.events)
        _schedule_on_commit(locked.pk, enqueue)
    return locked


def cancel(run: Run, user) -> str:
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status in TERMINAL:
            return "This run has already finished."
        lease_active = locked.lease_owner and locked.lease_expires_at and \
            locked.lease_expires_at > timezone.now()
        if locked.is_waiting or not lease_active:
            _finish(locked, Status.CANCELLED, f"Cancelled by {user}.")
            return "Run cancelled."
        Run.objects.filter(pk=locked.pk).update(cancel_requested=True)
        append_events(locked.pk, [Event("cancel_requested", f"{user} asked to cancel: the run "
                                        "stops before its next model call.")])
        return "Cancelling: the run stops before its next model call."


# --- recovery ----------------------------------------------------------------------------------
def recover_after_restart(node: str, *, enqueue: bool = True) -> list[int]:
    """Free the leases an earlier incarnation of this worker node held, and requeue them."""
    prefix = f"{node}|"
    current = f"{node}|{_identity['boot']}|"
    ids = list(Run.objects.filter(status__in=RUNNABLE, lease_owner__startswith=prefix)
               .exclude(lease_owner__startswith=current).values_list("pk", flat=True))
    for run_id in ids:
        Run.objects.filter(pk=run_id, lease_owner__startswith=prefix).exclude(
            lease_owner__startswith=current).update(lease_owner="", lease_expires_at=None)
        if enqueue:
            schedule(run_id)
    if ids:
        log.info("recovered %d run(s) interrupted on %s: %s", len(ids), node, ids)
    return ids


def sweep(*, idle_seconds: float = 120.0, enqueue: bool = True) -> list[int]:
    """Requeue runnable runs whose lease expired, or that sat unclaimed (a lost message)."""
    now = timezone.now()
    stuck = Run.objects.filter(status__in=RUNNABLE).filter(
        Q(lease_expires_at__lt=now)
        | Q(lease_expires_at__isnull=True, updated_at__lt=now - timedelta(seconds=idle_seconds)))
    ids = list(stuck.values_list("pk", flat=True)[:1000])
    for run_id in ids:
        Run.objects.filter(pk=run_id, lease_expires_at__lt=now).update(lease_owner="",
                                                                       lease_expires_at=None)
        Run.objects.filter(pk=run_id).update(updated_at=now)
        if enqueue:
            schedule(run_id)
    if ids:
        log.info("sweeper requeued %d run(s): %s", len(ids), ids)
    return ids


def run_inline(run_id: int, max_stages: int = 1000) -> Run:
    """Advance a run in this process until it waits, ends, or is claimed elsewhere."""
    for _ in range(max_stages):
        if not advance(run_id, enqueue=False):
            break
    return Run.objects.get(pk=run_id)
