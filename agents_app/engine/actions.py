"""A person's actions on a run: a decision at the gate the run waits at, and a cancel."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from .. import records
from ..events import append_events
from ..forking import checkpoints
from ..models import TERMINAL, Run, Status
from ..notices import DECIDED_BY
from ..patterns import get_pattern
from ..patterns.base import Decision, Event
from . import cancels
from .commit import GATE_CLOSE_HOOKS, finish_run
from .scheduling import schedule_on_commit

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class StaleDecision(Exception):
    """The run is no longer at the gate the person saw."""


# How a person's decision is taken (``agents_app/gates/core.person_decides``, installed when
# Django is ready): through the gate's rules. Without it, applied as it is.
PERSON_DECIDES: list[Callable[..., Run]] = []


def decide(run: Run, user: User, expected_seq: int, decision: Decision, *,
           enqueue: bool = True, how: str = "person", channel: str = "page") -> Run:
    """A decision at the run's gate. Raises StaleDecision or InvalidDecision (NotAllowed, a
    subclass, when this person may not decide it). ``how``: "person" — through the gate's
    rules (agents_app/gates/core.py: a gate may need several approvals, and then records
    this one and waits: the run comes back with ``vote_note``) — or the policy that decided
    (a fork's "reused" or "approved", an experiment's), applied as it is. ``channel``: where
    the person decided (the run page, the inbox, a batch, the command line)."""
    if how == "person" and PERSON_DECIDES:
        return PERSON_DECIDES[0](run, user, expected_seq, decision, enqueue=enqueue,
                                 channel=channel)
    return apply_decision(run, user, expected_seq, decision, enqueue=enqueue, how=how,
                          channel="policy")


def apply_decision(run: Run, user: User, expected_seq: int, decision: Decision, *,
                   enqueue: bool = True, how: str = "person", channel: str = "page",
                   closing_detail: str = "") -> Run:
    """Apply a decision at the run's gate and close the gate's stop in its audit."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if not locked.is_waiting or locked.stage_seq != expected_seq:
            raise StaleDecision("This run is no longer waiting for that decision: it was "
                                "decided already, cancelled, or the page is out of date.")
        pattern = get_pattern(locked.pattern)
        gate, before = locked.gate, locked.state
        # What the decision is made on (the pattern says): a fork may reuse it on the same.
        on = pattern.decided_on(gate, before)
        result = pattern.decide(locked.gate, locked.state, decision)
        records.persist(locked, result.records, user=user)
        if not result.next_stage:  # a pattern's bug: nothing is written
            raise ValueError(f"{pattern.name}: the decision at {locked.gate} gave no next stage")
        locked.state = result.state
        locked.stage = result.next_stage
        locked.status = pattern.status_for(result.next_stage)
        locked.gate = ""
        locked.stage_seq += 1
        locked.save(update_fields=["state", "stage", "status", "gate", "stage_seq", "updated_at"])
        # The answer's panels are stamped with the run's last event (``data-as-of``): the page
        # keeps a live update newer than the answer, and drops the decision's own.
        # A decision's events say who made it: the run page's status line names the last one
        # (agents_app/notices.py), and so does the refusal of a decision sent too late.
        events = [Event(e.kind, e.message, {**e.data, DECIDED_BY: user.get_username()})
                  for e in result.events]
        locked.last_event_seq = append_events(locked.pk, events) or locked.last_event_seq
        checkpoints.write(locked.pk, locked.stage_seq, stage=locked.stage, gate="",
                          state=locked.state, event_seq=locked.last_event_seq, decision={
                              "gate": gate, "action": decision.action,
                              "feedback": decision.feedback, "edits": decision.edits,
                              "author": decision.author or user.get_username(), "how": how,
                              "on": None if on is None else checkpoints.digest(on)})
        for closed in GATE_CLOSE_HOOKS:
            closed(locked.pk, outcome=decision.action, actor=user if how == "person" else None,
                   channel=channel, how=how, detail=closing_detail or (
                       f"{decision.action} by {decision.author or user.get_username()}"
                       + (f" ({how})" if how != "person" else "")
                       + (f": {decision.feedback[:300]}" if decision.feedback else "")))
        schedule_on_commit(locked.pk, enqueue)
    return locked


def cancel(run: Run, user: User, reason: str = "") -> str:
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status in TERMINAL:
            return "This run has already finished."
        lease_active = locked.lease_owner and locked.lease_expires_at and \
            locked.lease_expires_at > timezone.now()
        if locked.is_waiting or not lease_active:
            finish_run(locked, Status.CANCELLED, reason or f"Cancelled by {user}.")
            return "Run cancelled."
        Run.objects.filter(pk=locked.pk).update(cancel_requested=True)
        cancels.told([locked.pk])
        append_events(locked.pk, [Event("cancel_requested", f"{user} asked to cancel: the run "
                                        "stops before its next model call, or within a second "
                                        "if it is running a command.")])
        return ("Cancelling: the run stops before its next model call, or within a second if "
                "it is running a command.")


