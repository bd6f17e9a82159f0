"""Persisting what a pattern's stage or decision produced. Each record type of the pattern
layer maps to a function here; a new pattern adds its record types and their functions
without touching the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import prepared
from .models import Approval, PlanVersion, Run, RunItem, StepResult
from .patterns.base import Item, ItemEdited
from .patterns.records import GateDecided, PlanProposed, StepRecorded

_PERSISTERS: dict[type, Callable[[Run, Any, Any], None]] = {}


def persister(record_type: type):
    def register(fn):
        _PERSISTERS[record_type] = fn
        return fn

    return register


def persist(run: Run, records: list[Any], user=None) -> None:
    for record in records:
        _PERSISTERS[type(record)](run, record, user)


@persister(PlanProposed)
def _plan(run: Run, rec: PlanProposed, user) -> None:
    prepared.insert(PlanVersion, [{
        "run_id": run.pk, "version": rec.version, "steps": rec.steps, "goal": rec.goal,
        "reasoning": rec.reasoning, "author": rec.author, "reason": rec.reason,
        "frozen": rec.frozen, "details": rec.details}])


@persister(StepRecorded)
def _step(run: Run, rec: StepRecorded, user) -> None:
    prepared.insert(StepResult, [{
        "run_id": run.pk, "plan_version": rec.plan_version, "index": rec.index,
        "description": rec.description, "status": rec.status, "output": rec.output,
        "problem": rec.problem}])


@persister(GateDecided)
def _decision(run: Run, rec: GateDecided, user) -> None:
    prepared.insert(Approval, [{
        "run_id": run.pk, "gate": rec.gate, "action": rec.action,
        "plan_version": rec.plan_version, "edited": rec.edited, "feedback": rec.feedback,
        "user_id": user.pk if user is not None else None}])


@persister(Item)
def _item(run: Run, rec: Item, user) -> None:
    prepared.insert(RunItem, [{"run_id": run.pk, "kind": rec.kind, "key": rec.key,
                               "data": rec.data}])


@persister(ItemEdited)
def _item_edited(run: Run, rec: ItemEdited, user) -> None:
    # A fork's edit of a row copied from its parent: replaced in place (the page keeps its
    # order), made when the parent had none, removed when the edit leaves it out.
    if rec.data is None:
        RunItem.objects.filter(run=run, kind=rec.kind, key=rec.key).delete()
    else:
        RunItem.objects.update_or_create(run=run, kind=rec.kind, key=rec.key,
                                         defaults={"data": rec.data})
