"""The journal a stage's gateway writes through: every model call persisted with the run's
totals, replayed when the stage runs again after an interruption, and held to the run's
limits (cost, tokens, time, a cancel request) before it is made. Each check also extends the
stage's lease."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DecimalField, F, IntegerField, QuerySet

from common import dbpool

from .. import prepared
from ..events import next_seqs, write_events
from ..llm.gateway import CallOutcome, GatewayConfig, redact, redact_messages
from ..models import ModelCall, Run
from ..patterns.base import BudgetExceeded, Cancelled, Event, RunStopped, TimeLimitExceeded
from ..prepared import Slot, slot
from ..returning import update_returning
from . import cancels
from .latency import stall_timeout
from .leases import DB_UNAVAILABLE, LeaseLost, StageInterrupted, lease_until

if TYPE_CHECKING:
    from .ahead import Ahead


def gateway_config(routes: dict[str, str]) -> GatewayConfig:
    return GatewayConfig(
        routes=routes,
        timeout=settings.QUORUM_LLM_TIMEOUT,
        max_retries=settings.QUORUM_LLM_MAX_RETRIES,
        retry_base_delay=settings.QUORUM_LLM_RETRY_BASE_DELAY,
        allow_network=settings.QUORUM_ALLOW_MODEL_REQUESTS,
        api_base=settings.QUORUM_API_BASE,
        stall_timeout=stall_timeout,
    )


@dataclass(frozen=True)
class PendingCall:
    """A call made and not journaled yet (``DbJournal.record``)."""

    key: str
    outcome: CallOutcome


@dataclass
class _Limits:
    max_cost: Decimal | None
    max_tokens: int | None
    max_seconds: float
    active_before: float


# The run's fields a model call is checked against: read back by the claim and by every
# call's own update of the run, so a call made right after another (or after the claim) needs
# no read of its own; one made later (a tool ran in between) reads them again.
SNAPSHOT = ("lease_owner", "cancel_requested", "cost_usd", "prompt_tokens", "completion_tokens")
log = logging.getLogger(__name__)

FRESH_SECONDS = 1.0


class DbJournal:
    """A stage's journal. Parallel stages call from helper threads, each with its own Django
    connection: a helper thread keeps it for the whole stage (not one per call), and
    ``finish`` closes them when the stage is over, so no finished thread leaves one behind.
    Its first call reads the run through that connection; later ones use the figures the
    stage's own updates returned, like the stage thread's calls."""

    def __init__(self, run: Run, stage: str, token: str, ahead: Ahead | None = None):
        self.run_id = run.pk
        self.stage = stage
        self.seq = run.stage_seq
        self.token = token
        max_seconds = (run.options or {}).get("max_run_seconds") or settings.QUORUM_MAX_RUN_SECONDS
        self.limits = _Limits(run.max_cost_usd, run.max_tokens, float(max_seconds),
                              run.active_seconds)
        self.started = time.monotonic()
        # Only a stage run again after an interruption can have calls to replay.
        self.existing = {c.key: c for c in ModelCall.objects.filter(
            run_id=run.pk, stage=stage)} if run.stage_attempt > 1 else {}
        # A fork may be served from the journal of the run it came from (issue 33): a replay
        # every call (and stops where a request differs), a continuation after a budget stop
        # the calls of the stage it starts from that asked the same thing.
        self.source, self.strict = reusable(run, stage)
        self.thread = threading.get_ident()
        self.lock = threading.Lock()
        self.extended_at = time.monotonic()  # the claim has just set a fresh lease
        # The run as its claim read it (the caller passes the run it has just claimed).
        self.snapshot = {name: getattr(run, name) for name in SNAPSHOT}
        self.synced_at = time.monotonic()
        self.helpers: dict[int, BaseDatabaseWrapper] = {}  # helper thread → idle connection
        self.checked: set[int] = set()  # helper threads that have read the run themselves
        self.closed = False
        self.unreadable_since: float | None = None  # while_waiting could not read the run
        # The stage thread's last successful call, not written yet: it joins the stage's
        # commit (one transaction, not two) unless something comes first that needs it
        # written (the next call, a replay, a command's wait, a stop); see ``record``.
        self.pending: list[PendingCall] = []
        self.flushing = threading.Lock()  # one writer of the pending calls at a time
        # The commit that claimed this stage, when still in flight (``ahead.py``): ``run`` is
        # as it will leave it, and nothing is written or read back before ``confirm``.
        self.ahead = ahead
        self.confirming = threading.Lock()

    def confirm(self) -> None:
        """Wait for the commit this stage builds on, if it is still in flight: raises
        ``AheadFailed`` when it did not happen, ``Cancelled`` when a cancel came before it."""
        if self.ahead is None:
            return
        with self.confirming:
            ahead = self.ahead
            if ahead is None:
                return
            committed = ahead.settle()
            self._sync({name: getattr(committed, name) for name in SNAPSHOT})
            self.ahead = None
        if committed.cancel_requested:
            raise Cancelled("Cancelled on request.")

    def may_go_on(self) -> bool:
        """Whether the next stage may start before this stage's commit is made (``ahead.py``):
        no cancel was asked for, so that a cancel asked during this stage's last call stops the
        run before the next stage's first call, as the commit's own check does when the commit
        is made first, and the lease is still this stage's. Asked of Redis (``cancels.py``);
        the run is read (its cancel flag and its lease) when Redis cannot say, and when this
        stage last set its lease more than half a lease ago (a call that long may have
        outlived it, and the sweeper given the run to another worker)."""
        said = cancels.asked(self.run_id)
        with self.lock:
            lease_age = time.monotonic() - self.extended_at
        if said or (said is not None and lease_age < settings.QUORUM_STAGE_LEASE_SECONDS / 2):
            return not said
        row = Run.objects.filter(pk=self.run_id).values_list(
            "lease_owner", "cancel_requested").first()
        return row is not None and row[0] == self.token and not row[1]

    def figures(self) -> dict[str, Any]:
        """The run's lease, cancel flag and counters as this stage knows them (its own calls
        included, written or not)."""
        with self.lock:
            return dict(self.snapshot)

    # --- helper threads' connections ----------------------------------------------------------
    def _busy(self) -> None:
        if threading.get_ident() != self.thread:
            with self.lock:
                self.helpers.pop(threading.get_ident(), None)

    def _release(self) -> None:
        """A helper thread is done with its connection for now: kept for its next call,
        closed at once once the stage is over (an abandoned call returning late)."""
        ident = threading.get_ident()
        if ident == self.thread:
            return
        with self.lock:
            if self.closed:
                connection.close()
            else:
                self.helpers[ident] = connections[DEFAULT_DB_ALIAS]

    def finish(self) -> None:
        """The stage is over (called by the stage's own thread): close the connections its
        helper threads kept. A helper still inside a call closes its own when it returns."""
        with self.lock:
            self.closed = True
            idle, self.helpers = self.helpers, {}
            for wrapper in idle.values():
                wrapper.inc_thread_sharing()
                try:
                    wrapper.close()
                finally:
                    wrapper.dec_thread_sharing()

    def _sync(self, row: dict[str, object]) -> None:
        with self.lock:
            for name in SNAPSHOT:
                if name in ("cost_usd", "prompt_tokens", "completion_tokens"):
                    # parallel calls' updates may come back out of order: counters only grow
                    self.snapshot[name] = max(self.snapshot[name], row[name])
                else:
                    self.snapshot[name] = row[name]
            self.synced_at = time.monotonic()

    def replay(self, key: str, role: str = "", model: str = "",
               messages: list[dict[str, str]] | None = None) -> CallOutcome | None:
        c = self.existing.get(key)
        if c is not None:
            return _outcome(c)
        if not self.source and not self.strict:
            return None
        original = self.source.get(key)
        asked = redact_messages(messages or [])
        if original is not None and not original.error and original.model == model \
                and original.messages == asked:
            outcome = _outcome(original)
            self._busy()
            try:
                self.flush()
                self._record(key, outcome, replayed_from=original.pk)
            except DB_UNAVAILABLE as exc:
                raise StageInterrupted(f"the database could not record the replayed {role} "
                                       f"call: {exc}") from exc
            finally:
                self._release()
            return outcome
        if self.strict:
            raise ReplayDiverged(self.stage, key, original, model, asked)
        return None

    def before_call(self, key: str, role: str, model: str) -> None:
        self._busy()
        try:
            self.flush()  # the previous call is written before the next one is made
            self._check_and_extend(role)
        except DB_UNAVAILABLE as exc:
            self._release()
            raise StageInterrupted(f"the database could not be read before the {role} call: "
                                   f"{exc}") from exc
        except BaseException:
            self._release()
            raise
        # On success the helper thread keeps its connection busy until ``record``.

    def _refresh(self) -> None:
        """Read the run's lease, cancel flag and counters again, and extend the lease when a
        tenth of it has passed (parallel calls share one extension: a write on the critical
        path for each would queue them on the write lock)."""
        now = time.monotonic()
        with self.lock:
            due = now - self.extended_at > settings.QUORUM_STAGE_LEASE_SECONDS / 10
            if due:
                self.extended_at = now
            stale = now - self.synced_at > FRESH_SECONDS
            # A helper thread's first call reads the run through its own connection (opened
            # for the stage): what it will write through must see the run as the claim left it.
            ident = threading.get_ident()
            if ident != self.thread and ident not in self.checked:
                stale = True
        if due or stale:
            self.confirm()
        if due:
            row = update_returning(Run.objects.filter(pk=self.run_id, lease_owner=self.token),
                                   {"lease_expires_at": lease_until()}, SNAPSHOT)
            if row is None:
                raise LeaseLost()
            self._sync(row)
        elif stale:
            self._sync(Run.objects.filter(pk=self.run_id).values(*SNAPSHOT).get())
        if ident != self.thread:
            with self.lock:
                self.checked.add(ident)

    def before_waiting(self) -> None:
        """The stage's own thread starts waiting on a child process (a test command, an
        analyzer): the call made before it is written now, not after the command. A database
        that cannot take it leaves it pending (``while_waiting`` and the commit try again)."""
        try:
            self.flush()
        except StageInterrupted as exc:
            log.warning("run %s: a call could not be journaled before a command: %s",
                        self.run_id, exc)
        finally:
            dbpool.release()  # the command runs on: the connection goes back to the pool

    def while_waiting(self) -> None:
        """Called about once a second while the stage's own thread waits on a child process
        (a test command, an analyzer; ``common.proc.watched``): extends the lease when due,
        so a long command does not lose it, and ends the wait when the lease is lost or the
        run is to be cancelled. A database that cannot be read leaves the command running:
        the next model call checks again."""
        try:
            if threading.get_ident() == self.thread:
                self.flush()  # a command's wait writes the call made before it
            self._refresh()
        except (*DB_UNAVAILABLE, StageInterrupted) as exc:
            dbpool.release()
            if self.unreadable_since is None:  # said once, not every second of an outage
                self.unreadable_since = time.monotonic()
                log.warning("run %s: cannot check the run while a command runs (trying again "
                            "each second): %s", self.run_id, exc)
            return
        dbpool.release()  # the command runs on: the connection goes back to the pool
        if self.unreadable_since is not None:
            log.warning("run %s: the run can be checked again, after %.0f s", self.run_id,
                        time.monotonic() - self.unreadable_since)
            self.unreadable_since = None
        with self.lock:
            owner, cancel = self.snapshot["lease_owner"], self.snapshot["cancel_requested"]
        if owner != self.token:
            raise LeaseLost()
        if cancel:
            raise Cancelled("Cancelled on request, while a command was running.")

    def _check_and_extend(self, role: str) -> None:
        self._refresh()
        with self.lock:
            row = dict(self.snapshot)
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

    def record(self, key: str, o: CallOutcome) -> None:
        """Journal a call that was made. The stage thread's successful call is kept for the
        stage's commit, which writes it in its own transaction (``unwritten``): the call is then
        written as soon as it would have been (the stage's work after its last call is
        short; a command it runs meanwhile writes it first, ``before_waiting``), without a
        transaction of its own. Anything else is written at once: a helper
        thread's call (parallel calls return at different times), a failed call (the run's
        failure names it)."""
        if threading.get_ident() == self.thread and not o.error:
            cost, prompt, completion = counted(o)
            with self.lock:
                self.pending.append(PendingCall(key, o))
                # Checks made before it is written (a helper thread's call) count it.
                self.snapshot["cost_usd"] += cost
                self.snapshot["prompt_tokens"] += prompt
                self.snapshot["completion_tokens"] += completion
            return
        try:
            self._record(key, o)
        except DB_UNAVAILABLE as exc:
            raise StageInterrupted(f"the database could not record the {o.role} call: "
                                   f"{exc}") from exc
        finally:
            self._release()

    def unwritten(self) -> list[PendingCall]:
        """The calls not written yet, for the stage's commit to write."""
        with self.lock:
            return list(self.pending)

    def written(self, calls: list[PendingCall]) -> None:
        """``calls`` were written (by the stage's commit): no longer pending."""
        done = {id(c) for c in calls}
        with self.lock:
            self.pending = [c for c in self.pending if id(c) not in done]

    def flush(self) -> None:
        """Write the calls not written yet, each in its own transaction (before the next call
        is made, while a command runs, when the stage stops without a commit). A call stays
        pending until its write commits."""
        with self.flushing:
            while True:
                with self.lock:
                    if not self.pending:
                        return
                    call = self.pending[0]
                try:
                    self._record(call.key, call.outcome)
                except DB_UNAVAILABLE as exc:
                    raise StageInterrupted(f"the database could not record the "
                                           f"{call.outcome.role} call: {exc}") from exc
                with self.lock:
                    self.pending.pop(0)

    def flush_quietly(self) -> None:
        """``flush`` for a stage that stops anyway (lease lost, database gone, run stopped):
        the call is written for a later attempt's replay when it still can be."""
        try:
            self.flush()
        except (LeaseLost, StageInterrupted) as exc:
            log.warning("run %s: a call of stage %s could not be journaled: %s", self.run_id,
                        self.stage, exc)

    def _record(self, key: str, o: CallOutcome, replayed_from: int | None = None) -> None:
        self.confirm()
        cost, prompt, completion = counted(o, replayed_from)
        with transaction.atomic():
            if settings.QUORUM_DB_ASYNC_CALL_RECORDS and connection.vendor == "postgresql":
                # Not worth a WAL flush of its own (config/settings.py): the stage's commit,
                # which waits for one, makes this record durable with it.
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL synchronous_commit TO OFF")
            # One UPDATE adds the call to the run's counters, numbers its event and checks the
            # lease: a call that returns after its attempt was abandoned and the run claimed
            # again matches no row (not this attempt's to record: the new attempt makes and
            # records it). A lease released since (nobody's) still records it, for the replay;
            # a stage committed since (its commit wrote the call) does not.
            row = prepared.update("journal.record", _record_statement, {
                "run": self.run_id, "token": self.token, "seq": self.seq, "cost": cost,
                "prompt": prompt, "completion": completion},
                (*SNAPSHOT, "last_event_seq"))
            if row is None:
                raise LeaseLost()
            prepared.insert(ModelCall, [call_row(self.run_id, self.stage, key, o,
                                                 replayed_from)])
            write_events(self.run_id, row["last_event_seq"], [call_event(o, replayed_from)])
        self._sync(row)


def counted(o: CallOutcome, replayed_from: int | None = None) -> tuple[Decimal, int, int]:
    """What a call adds to its run's counters (cost, prompt and completion tokens). A call
    served from another run's journal costs this run nothing: it is kept (its tokens with it,
    for the trace) but not counted against the run's limits."""
    if replayed_from:
        return Decimal(0), 0, 0
    return Decimal(str(o.cost_usd)), o.prompt_tokens, o.completion_tokens


def call_row(run_id: int, stage: str, key: str, o: CallOutcome,
             replayed_from: int | None = None) -> dict[str, Any]:
    """A call's journal row, as ``prepared.insert`` takes it."""
    return {"run_id": run_id, "stage": stage, "key": key, "role": o.role, "model": o.model,
            "messages": o.messages, "response": o.response, "prompt_tokens": o.prompt_tokens,
            "completion_tokens": o.completion_tokens,
            "cost_usd": counted(o, replayed_from)[0], "latency_ms": o.latency_ms,
            "attempts": o.attempts, "error": redact(o.error), "retryable": o.retryable,
            "replayed_from_id": replayed_from}


def call_event(o: CallOutcome, replayed_from: int | None = None) -> Event:
    """A call's line in the run's timeline."""
    tokens = o.prompt_tokens + o.completion_tokens
    if replayed_from:
        msg = (f"{o.role} · {o.model}: replayed from the journal (call {replayed_from}): "
               "no provider call, no cost")
    elif o.error:
        msg = f"{o.role} call to {o.model} failed after {o.attempts} attempt(s): {o.error}"
    else:
        msg = f"{o.role} · {o.model}: {tokens:,} tokens, ${o.cost_usd:.4f}, {o.latency_ms} ms"
    return Event("model_call", msg, {"role": o.role, "model": o.model, "tokens": tokens,
                                     "error": bool(o.error), "replayed": bool(replayed_from)})


def _record_statement() -> tuple[QuerySet[Run], dict[str, Any]]:
    """A call's UPDATE of its run (prepared once): the counters, one event number, the lease
    held by the stage's claim (or by nobody), the run still at the stage."""
    return (Run.objects.filter(pk=slot(Run, "run", "id"),
                               lease_owner__in=(slot(Run, "token", "lease_owner"), ""),
                               stage_seq=slot(Run, "seq", "stage_seq")),
            {"cost_usd": F("cost_usd") + Slot("cost", DecimalField()),
             "prompt_tokens": F("prompt_tokens") + Slot("prompt", IntegerField()),
             "completion_tokens": F("completion_tokens") + Slot("completion", IntegerField()),
             "calls": F("calls") + 1, "last_event_seq": next_seqs(1)})


def _outcome(c: ModelCall) -> CallOutcome:
    return CallOutcome(role=c.role, model=c.model, messages=c.messages, response=c.response,
                       prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
                       cost_usd=float(c.cost_usd), latency_ms=c.latency_ms,
                       attempts=c.attempts, error=c.error, retryable=c.retryable)


# --- forks: calls served from the journal of the run a fork came from ----------------------
REUSING = ("continue", "replay")


class ReplayDiverged(RunStopped):
    """A replay met a request its source never made (a prompt or code changed since)."""

    status = "failed"

    def __init__(self, stage: str, key: str, original: ModelCall | None, model: str,
                 asked: list[dict[str, str]]):
        from ..forking.diff import text_diff

        self.stage, self.key = stage, key
        if original is None:
            why = (f"the original run made no call {key!r} at stage {stage}, so it cannot be "
                   "served from the journal")
            self.first = {"stage": stage, "key": key, "lines": []}
        else:
            why = (f"call {key!r} of stage {stage} asks something else than the original did "
                   f"(model {model} for {original.model})" if original.model != model else
                   f"call {key!r} of stage {stage} asks something else than the original did")
            self.first = {"stage": stage, "key": key, "lines": first_difference(
                original.messages or [], asked, text_diff)}
        # What ``stop_run`` keeps on the run as ``fork["diverged"]`` (with the stage's seq).
        self.diverged = {"stage": stage, "key": key, "why": why,
                         "missing": original is None, "first": self.first["lines"]}
        super().__init__(f"The replay stopped: {why}.")


def first_difference(before: list[dict[str, Any]], after: list[dict[str, Any]],
                     text_diff: Any) -> list[str]:
    """The first message that differs between two requests, as diff lines."""
    for i in range(max(len(before), len(after))):
        a = before[i] if i < len(before) else {}
        b = after[i] if i < len(after) else {}
        if a != b:
            d = text_diff(f"{a.get('role', '')}:\n{a.get('content', '')}",
                          f"{b.get('role', '')}:\n{b.get('content', '')}",
                          f"original message {i + 1}", f"now, message {i + 1}")
            return list(d.lines[:120])
    return []


def reusable(run: Run, stage: str) -> tuple[dict[str, ModelCall], bool]:
    """The calls a fork's stage may be served from (by key), and whether it must be (a
    replay)."""
    fork = run.fork or {}
    kind = fork.get("kind")
    if kind not in REUSING or not run.forked_from_id or not fork.get("reuse_calls"):
        return {}, False
    if kind != "replay" and run.stage_seq != run.fork_seq:
        return {}, False
    from ..forking.lineage import owner_of

    source = Run.objects.filter(pk=run.forked_from_id).first()
    owner = owner_of(source, run.stage_seq) if source is not None else None
    calls = {c.key: c for c in ModelCall.objects.filter(run_id=owner, stage=stage)} \
        if owner else {}
    return calls, kind == "replay"
