"""Committing: a stage's result written under the run's row lock, only while the worker still
holds the lease and the run is at the stage it ran; a run's end, however it ended, with the
clean-up its pattern registered."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from .. import records
from ..events import append_events
from ..models import RUNNABLE, Run, Status, gate_status
from ..patterns import get_pattern
from ..patterns.base import Event, RunStopped, StageResult
from .scheduling import schedule_on_commit

log = logging.getLogger("quorum.engine")

# Patterns whose runs hold resources outside the database (a git worktree) register what to
# do once a run has ended, however it ended: completed, failed, cancelled or over budget.
TERMINAL_HOOKS: dict[str, Callable[[int], None]] = {}


def register_terminal_hook(pattern: str, hook: Callable[[int], None]) -> None:
    TERMINAL_HOOKS[pattern] = hook


def after_terminal(run_id: int, pattern: str) -> None:
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


def commit_result(run_id: int, token: str, seq: int, result: StageResult, elapsed: float,
                  enqueue: bool) -> bool:
    with transaction.atomic():
        run = locked_run(run_id, token, seq)
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
            after_terminal(run_id, run.pattern)
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
            assert result.next_stage, "checked by stages.run_checked"
            run.status = pattern.status_for(result.next_stage)
            run.stage = result.next_stage
        run.save(update_fields=["state", "stage_seq", "stage_attempt", "lease_owner",
                                "lease_expires_at", "active_seconds", "status", "stage", "gate",
                                "answer", "error", "finished_at", "updated_at"])
        append_events(run_id, events)
        runnable = run.status in RUNNABLE
        schedule_on_commit(run_id, enqueue and runnable)
    return runnable


def gate_message(gate: str) -> str:
    """The timeline's line for a gate whose pattern has none of its own."""
    return f"Waiting for a decision ({gate})."


def stop_run(run_id: int, token: str, seq: int, stop: RunStopped, elapsed: float = 0.0) -> bool:
    with transaction.atomic():
        run = locked_run(run_id, token, seq)
        if run is None:
            return False
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
    after_terminal(run.pk, run.pattern)
    kinds: dict[str, str] = {Status.CANCELLED: "run_cancelled",
                             Status.BUDGET_EXCEEDED: "budget_exceeded"}
    kind = kinds.get(status, "run_finished")
    append_events(run.pk, [Event(kind, reason, {"status": status})])


