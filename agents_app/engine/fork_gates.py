"""A fork's gates (issue 33): when a fork waits at a gate, its policy for that gate applies —
ask the person again (the default), approve, or reuse the original run's decision when what
is to be decided is byte-identical (the hash recorded with the original decision); a replay
reuses every decision or stops where one cannot be. The decision records which it was."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from ..events import append_events
from ..forking import checkpoints
from ..models import TERMINAL, Run, Status
from ..patterns import get_pattern
from ..patterns.base import Decision, Event, InvalidDecision
from .actions import StaleDecision, decide
from .commit import finish_run


def apply_gate_policy(run_id: int, *, enqueue: bool = True) -> str:
    """A fork waiting at a gate: ask (nothing), approve, or reuse the original decision when
    what is decided is byte-identical. Returns what was done."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None or not run.is_waiting or not run.forked_from_id:
        return "nothing"
    policy = (run.fork or {}).get("gates", {}).get(run.gate, "ask")
    if policy == "ask":
        return "ask"
    decision, how = None, ""
    if policy == "approve":
        decision, how = Decision(action="approve", author="policy"), "approved"
    else:
        original = original_decision(run)
        if original is not None:
            decision = Decision(action=original["action"], feedback=original.get("feedback", ""),
                                edits=original.get("edits"), author=original.get("author", ""))
            how = "reused"
    if decision is None:
        if (run.fork or {}).get("kind") == "replay":
            _diverged(run, "the gate's input differs from the original's (or the original was "
                           "never decided), so its decision cannot be reused")
            return "diverged"
        append_events(run.pk, [Event("gate_policy", f"Gate {run.gate}: what is to be decided "
                                     "differs from the original run's, so the decision is "
                                     "asked for again.", {"gate": run.gate})])
        return "ask"
    try:
        decide(run, run.owner, run.stage_seq, decision, how=how, enqueue=enqueue)
    except (StaleDecision, InvalidDecision):
        return "stale"
    return how


def original_decision(run: Run) -> dict[str, Any] | None:
    """The decision the lineage took at this gate on byte-identical input, if any: the
    checkpoint after the same seq in the run this fork came from (or its ancestors)."""
    if run.forked_from_id is None:
        return None
    source = Run.objects.filter(pk=run.forked_from_id).first()
    if source is None:
        return None
    after = checkpoints.at(source, run.stage_seq + 1)
    if after is None or not after.decision or after.decision.get("gate") != run.gate:
        return None
    on = get_pattern(run.pattern).decided_on(run.gate, run.state)
    if on is None or after.decision.get("on") != checkpoints.digest(on):
        return None
    return dict(after.decision)


def _diverged(run: Run, why: str) -> None:
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status in TERMINAL:
            return
        fork = {**(locked.fork or {}), "diverged": {"seq": locked.stage_seq,
                                                    "stage": locked.stage or locked.gate,
                                                    "why": why}}
        Run.objects.filter(pk=locked.pk).update(fork=fork)
        finish_run(locked, Status.FAILED, f"The replay stopped at stage {locked.stage_seq}: "
                                          f"{why}.")
