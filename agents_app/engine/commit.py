"""Committing: a stage's result written under the run's row lock, only while the worker still
holds the lease and the run is at the stage it ran; a run's end, however it ended, with the
clean-up its pattern registered."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import (
    Case,
    DecimalField,
    F,
    FloatField,
    IntegerField,
    QuerySet,
    Value,
    When,
)
from django.utils import timezone

from .. import prepared, records
from ..events import append_events, write_events
from ..forking import checkpoints
from ..models import RUNNABLE, ModelCall, Run, Status, gate_status
from ..patterns import PATTERNS, get_pattern
from ..patterns.base import Event, Pattern, RunStopped, StageResult
from ..prepared import Slot, slot
from ..returning import instance_from
from . import ahead as commit_ahead
from .journal import DbJournal, PendingCall, call_event, call_row, counted
from .leases import lease_until
from .scheduling import schedule_on_commit

log = logging.getLogger("quorum.engine")

# Patterns whose runs hold resources outside the database (a git worktree) register what to
# do once a run has ended, however it ended: completed, failed, cancelled or over budget.
TERMINAL_HOOKS: dict[str, Callable[[int], None]] = {}


def register_terminal_hook(pattern: str, hook: Callable[[int], None]) -> None:
    TERMINAL_HOOKS[pattern] = hook


# What runs when a fork or a run of an experiment commits at a gate: its gate policy
# (``fork_gates.apply_gate_policy``, ``experiment_hooks.apply_experiment_gate``; added by the
# package's ``__init__``, since they decide through ``actions``, which needs this module).
FORK_GATE_HOOKS: list[Callable[..., Any]] = []
DECIDED_BY_POLICY = ("approved", "reused", "rejected")  # what a hook returns when it decided the gate


# Shared gates (issue 35; ``agents_app/gates``, which installs these when Django is ready, so
# that the engine never imports it): what runs after a run stops at a gate and no policy
# decided it (``opened(run_id)``: the stop, its team's rules, assignee and deadline), and
# when a run leaves its gate (``closed(run_id, outcome=, actor=, channel=, how=, detail=)``,
# in the transaction that moved it on).
GATE_OPEN_HOOKS: list[Callable[[int], Any]] = []
GATE_CLOSE_HOOKS: list[Callable[..., Any]] = []


# What runs after any run of an experiment ends (``experiments.tasks``: its scoring and the
# next runs of its grid), after the commit; registered by the package's ``__init__``.
EXPERIMENT_END_HOOKS: list[Callable[[int], None]] = []


def after_terminal(run_id: int, pattern: str, experiment_id: int | None = None) -> None:
    if experiment_id is not None:
        for end_hook in EXPERIMENT_END_HOOKS:
            transaction.on_commit(partial(end_hook, run_id))
    PATTERNS.get(pattern)  # loaded in this process (a page may stop a run of any pattern)
    hook = TERMINAL_HOOKS.get(pattern)
    if hook is None:
        return

    def call() -> None:
        try:
            hook(run_id)
        except Exception:  # a failed clean-up must not undo or hide the run's end
            log.exception("run %s: clean-up after the end failed", run_id)

    transaction.on_commit(call)


def locked_run(run_id: int, token: str, seq: int) -> Run | None:
    return Run.objects.select_for_update().filter(pk=run_id, lease_owner=token,
                                                  stage_seq=seq).first()


@dataclass
class Next:
    """What a stage's end left: whether the run has a stage ready, and, when the commit also
    claimed that stage for this worker (``claimed_by``), the run as committed, carried on."""

    runnable: bool
    run: Run | None = None
    claimed_by: str = ""
    # The commit that claimed it, still in flight (``ahead.py``): ``run`` is as it will leave it.
    ahead: commit_ahead.Ahead | None = None

    def __bool__(self) -> bool:
        return self.runnable


def stage_event(pattern: Pattern, stage: str, attempt: int) -> Event:
    """The timeline's line for a stage a worker has just claimed."""
    if attempt > 1:
        return Event("stage_resumed", f"Resuming stage {stage} (attempt {attempt}) after an "
                     "interruption.", {"stage": stage})
    return Event("stage_started", pattern.describe_stage(stage) or describe_stage(stage),
                 {"stage": stage})


def describe_stage(stage: str) -> str:
    """The timeline's line for a stage whose pattern has none of its own."""
    return f"Stage {stage} started."


def commit_result(run: Run, token: str, seq: int, result: StageResult, elapsed: float,
                  enqueue: bool, next_token: str = "", journal: DbJournal | None = None) -> Next:
    """Write the stage's result in one conditional UPDATE of the run (it matches only while
    ``token`` holds the lease and the run is at stage ``seq``), its records and its events,
    and the stage's model calls its ``journal`` has not written yet (the UPDATE counts them;
    they stay the journal's to write if the commit fails or is refused).
    With ``next_token`` (the caller goes on in place) a next stage is claimed for it in the
    same UPDATE, and started, unless a cancel was asked for (then the claim only stops it)."""
    run_id = run.pk
    pattern = get_pattern(run.pattern)
    now = timezone.now()
    # Still the journal's until the commit has written them (a commit that fails or is refused
    # leaves them to be written on their own).
    calls = journal.unwritten() if journal is not None else []
    spent = [counted(c.outcome) for c in calls]
    binds: dict[str, Any] = {"run": run_id, "token": token, "seq": seq, "state": result.state,
                             "elapsed": elapsed, "now": now, "calls": len(calls),
                             "cost": sum((c for c, _, _ in spent), Decimal(0)),
                             "prompt": sum(p for _, p, _ in spent),
                             "completion": sum(c for _, _, c in spent)}
    events = [call_event(c.outcome) for c in calls]
    events += result.events
    status = ""
    if result.outcome:
        kind = "end"
        status = {"completed": Status.COMPLETED, "cancelled": Status.CANCELLED}.get(
            result.outcome, Status.FAILED)
        binds.update(answer=result.answer or "", error=result.error)
        events.append(Event("run_finished", {
            Status.COMPLETED: "Run completed.", Status.CANCELLED: "Run stopped."}.get(
                status, f"Run failed: {result.error}"), {"status": status}))
    elif result.gate:
        kind = "gate"
        status = gate_status(result.gate.kind)
        binds.update(gate=result.gate.kind, stage=result.next_stage or "")
        events.append(Event("gate_opened", pattern.gate_message(result.gate.kind)
                            or gate_message(result.gate.kind),
                            {"gate": result.gate.kind, **result.gate.payload}))
    else:
        assert result.next_stage, "checked by stages.run_checked"
        kind = "next"
        status = pattern.status_for(result.next_stage)
        binds.update(stage=result.next_stage)
    runnable = status in RUNNABLE
    fused = bool(next_token) and runnable
    if fused:
        binds.update(next_token=next_token, lease_until=lease_until())
    binds.update(status=status, n=len(events))
    if kind == "next" and fused and journal is not None and commit_ahead.possible() \
            and journal.may_go_on():  # else this commit stops the run, or is refused
        # The next stage starts now and its first call goes out while this commits.
        nxt = commit_ahead.predicted(run, _fused_next_values(binds, run, journal.figures()),
                                     result.state)
        handed = commit_ahead.hand_off(
            partial(_write, run, kind, fused, binds, calls, result, events, pattern,
                    enqueue, runnable, started=True),
            run_id=run_id, tokens=(token, next_token), stage=run.stage, journal=journal,
            calls=calls)
        return Next(True, nxt, next_token, ahead=handed)
    committed = _write(run, kind, fused, binds, calls, result, events, pattern, enqueue,
                       runnable)
    if committed is None:
        log.warning("run %s: stage result dropped, the run moved on", run_id)
        if calls and journal is not None:  # kept for a replay when the run still allows it
            journal.flush_quietly()
        return Next(False)
    if journal is not None:
        journal.written(calls)
    if result.gate and ((run.forked_from_id and (run.fork or {}).get("gates"))
                        or run.experiment_id):
        # A fork's gate policy (ask again, reuse the original decision, approve) applies once
        # the run is committed at its gate (fork_gates.py). A decision it takes makes the run
        # ready again: queued when this caller queues, else carried on by this caller (a
        # worker's in-place loop, which would otherwise stop at the gate and leave the run
        # decided but never continued).
        if any(hook(run_id, enqueue=enqueue) in DECIDED_BY_POLICY for hook in FORK_GATE_HOOKS):
            return Next(True)
    if result.gate:
        for gate_hook in GATE_OPEN_HOOKS:  # the stop's rules, assignee, deadline (issue 35)
            gate_hook(run_id)
    return Next(runnable, committed, next_token if fused else "")


def _write(run: Run, kind: str, fused: bool, binds: dict[str, Any], calls: list[PendingCall],
           result: StageResult, events: list[Event], pattern: Pattern, enqueue: bool,
           runnable: bool, started: bool = False) -> Run | None:
    """The commit's transaction; the run as committed, or None when the UPDATE matched
    nothing (the run moved on) and nothing was written. ``started``: the next stage, claimed
    by this commit, has started already (``ahead.py``), so its start is logged even if a
    cancel came meanwhile (that stage then stops itself)."""
    run_id = run.pk
    committed = None
    with transaction.atomic():
        row = prepared.update(("commit", kind, fused, started),
                              lambda: _commit_statement(kind, fused, started), binds)
        if row is not None:
            committed = instance_from(Run, row)
            if calls:
                prepared.insert(ModelCall, [call_row(run_id, run.stage, c.key, c.outcome)
                                            for c in calls])
            records.persist(committed, result.records)
            # The commit's own last event: a fused claim reserved one more, the next stage's
            # start.
            started_next = 1 if fused and (started or not committed.cancel_requested) else 0
            checkpoints.write(run_id, committed.stage_seq, stage=committed.stage,
                              gate=committed.gate, state=result.state,
                              event_seq=committed.last_event_seq - started_next)
            if started_next:
                events.append(stage_event(pattern, committed.stage, 1))
            write_events(run_id, committed.last_event_seq, events)
            if result.outcome:
                after_terminal(run_id, run.pattern, run.experiment_id)
            schedule_on_commit(run_id, enqueue and runnable)
    return committed


def _commit_statement(kind: str, fused: bool,
                      started: bool = False) -> tuple[QuerySet[Run], dict[str, Any]]:
    """A stage's commit (prepared once per shape): the run's UPDATE matching only while the
    stage's claim holds the lease and the run is at the stage it ran. ``kind``: the run ends
    ("end"), waits at a gate ("gate") or goes on to a stage ("next"); ``fused``: the next
    stage is claimed in the same UPDATE, and numbers its start event unless a cancel is asked
    for, or always when it has ``started`` already."""
    def arg(name: str, field: str | None = None) -> Slot:
        return slot(Run, name, field)

    values: dict[str, Any] = {"state": arg("state"), "stage_seq": F("stage_seq") + 1,
                              "stage_attempt": 0, "lease_owner": "", "lease_expires_at": None,
                              "active_seconds": F("active_seconds") + Slot("elapsed",
                                                                          FloatField()),
                              "updated_at": arg("now", "updated_at")}
    if kind == "end":
        values.update(stage="", gate="", answer=arg("answer"), error=arg("error"),
                      finished_at=arg("now", "finished_at"))
    elif kind == "gate":
        values.update(gate=arg("gate"), stage=arg("stage"))
    else:
        values.update(stage=arg("stage"), gate="")
    # The stage's calls not journaled yet are counted here, as their own records would have.
    values.update(cost_usd=F("cost_usd") + Slot("cost", DecimalField()),
                  prompt_tokens=F("prompt_tokens") + Slot("prompt", IntegerField()),
                  completion_tokens=F("completion_tokens") + Slot("completion", IntegerField()),
                  calls=F("calls") + Slot("calls", IntegerField()))
    seqs = F("last_event_seq") + Slot("n", IntegerField())
    if fused:
        values.update(lease_owner=arg("next_token", "lease_owner"),
                      lease_expires_at=arg("lease_until", "lease_expires_at"), stage_attempt=1)
        seqs = seqs + (Value(1) if started else Case(When(cancel_requested=True, then=Value(0)),
                                                      default=Value(1)))
    values.update(status=arg("status"), last_event_seq=seqs)
    return (Run.objects.filter(pk=arg("run", "id"), lease_owner=arg("token", "lease_owner"),
                               stage_seq=arg("seq", "stage_seq")), values)


def _fused_next_values(binds: dict[str, Any], run: Run, figures: dict[str, Any]) -> dict[str, Any]:
    """What ``_commit_statement("next", fused=True)`` sets, computed here from its binds: the
    run as that commit will leave it, for a next stage started before it is made
    (``ahead.py``). The counters are the stage journal's (its calls counted, written or not);
    ``tests/prepared_checks.py`` holds the two to the same values."""
    return {"stage": binds["stage"], "gate": "", "status": binds["status"],
            "stage_seq": binds["seq"] + 1, "stage_attempt": 1, "lease_owner": binds["next_token"],
            "lease_expires_at": binds["lease_until"], "updated_at": binds["now"],
            "active_seconds": run.active_seconds + binds["elapsed"],
            "cost_usd": figures["cost_usd"], "prompt_tokens": figures["prompt_tokens"],
            "completion_tokens": figures["completion_tokens"]}


def gate_message(gate: str) -> str:
    """The timeline's line for a gate whose pattern has none of its own."""
    return f"Waiting for a decision ({gate})."


def stop_run(run_id: int, token: str, seq: int, stop: RunStopped, elapsed: float = 0.0) -> bool:
    with transaction.atomic():
        run = locked_run(run_id, token, seq)
        if run is None:
            return False
        if (diverged := getattr(stop, "diverged", None)) is not None:
            # A replay stopped at a request its source never made: where, and the first
            # message that differs, kept on the run for its page and ``manage.py replay``.
            run.fork = {**(run.fork or {}), "diverged": {"seq": seq, **diverged}}
            Run.objects.filter(pk=run.pk).update(fork=run.fork)
        finish_run(run, stop.status, str(stop), elapsed)
    return False


def finish_run(run: Run, status: str, reason: str, elapsed: float = 0.0) -> None:
    run.status = status
    run.error = "" if status == Status.CANCELLED else reason
    run.stage, run.gate = "", ""
    run.stage_seq += 1
    run.lease_owner, run.lease_expires_at = "", None
    run.active_seconds += elapsed
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "stage", "gate", "stage_seq", "lease_owner",
                            "lease_expires_at", "active_seconds", "finished_at", "updated_at"])
    after_terminal(run.pk, run.pattern, run.experiment_id)
    for closed in GATE_CLOSE_HOOKS:  # a run ended at its gate (cancelled, say): its stop too
        closed(run.pk, outcome=status, how="ended", detail=reason)
    kinds: dict[str, str] = {Status.CANCELLED: "run_cancelled",
                             Status.BUDGET_EXCEEDED: "budget_exceeded"}
    kind = kinds.get(status, "run_finished")
    append_events(run.pk, [Event(kind, reason, {"status": status})])


