"""The run page's status line: what a person last decided at a gate, and what the run is doing
since. Derived from the run's rows in this one place, and drawn in the answer to a decision,
on the page and in every live update (``live.panels_for``), so it follows the run's state
instead of repeating what was true when the person clicked ("The planner is writing a new
version…" after the new plan waits, "Its steps are being carried out" on a completed run).

A person's decision is the last event ``engine.decide`` stamped with ``decided_by``; its
message names who decided what ("alice approved plan v2."). What the run does now comes from
its status: the gate's own sentence while it waits, the pattern's ``status_lines`` while it
works, and the ones below once it has ended. Lines are by status, not by stage, so a screen
reader hears the line again when the run's state changes, not at every step."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from .models import Event, Run, Status

DECIDED_BY = "decided_by"  # the key engine.decide adds to the data of a decision's events
MAX_DECISION_CHARS = 240  # a decision's message quotes the person's feedback: kept short here

ENDED = {
    Status.COMPLETED: "The run completed; its answer is below.",
    Status.FAILED: "The run failed; the reason is at the top of the page.",
    Status.CANCELLED: "The run was cancelled.",
    Status.BUDGET_EXCEEDED: "The run stopped at its budget; the top of the page says which.",
}


def last_decision(events) -> Event | None:
    """The last event of a person's decision among ``events`` (in order), if any."""
    for event in reversed(events):
        if DECIDED_BY in (event.data or {}):
            return event
    return None


def when(moment) -> str:
    """A decision's time as the timeline shows it (with its date when not today)."""
    local = timezone.localtime(moment)
    if local.date() != timezone.localdate():
        return local.strftime("%Y-%m-%d %H:%M:%S")
    return local.strftime("%H:%M:%S")


def decided(event: Event) -> str:
    """``At 10:42:05, alice approved plan v2.``: who decided what, and when."""
    message = " ".join(event.message.split())
    if len(message) > MAX_DECISION_CHARS:
        message = message[: MAX_DECISION_CHARS - 1].rstrip() + "…"
    if not message.endswith((".", "…", "!", "?")):
        message += "."
    return f"At {when(event.created_at)}, {message}"


def doing_now(run: Run, pattern) -> str:
    """What the run is doing now, in one sentence of its pattern's words where it has them."""
    if run.status in ENDED:
        return ENDED[Status(run.status)]
    if run.is_waiting:
        return (pattern.gate_message(run.gate) if pattern else None) or "Waiting for you."
    line = (pattern.status_lines.get(run.status) if pattern else None)
    return line or f"The run goes on ({run.get_status_display().lower()})."


@dataclass(frozen=True)
class Notice:
    """The status line in its two parts: the decision (a fact of the past, which a page may
    quote) and what the run does now (which changes)."""

    decided: str = ""
    now: str = ""

    def __bool__(self) -> bool:
        return bool(self.decided)

    def __str__(self) -> str:
        return f"{self.decided} {self.now}".strip()


def run_notice(run: Run, pattern, events) -> Notice:
    """The status line: the last decision and what the run does now; empty while nobody has
    decided anything (the panels say what the run waits for)."""
    event = last_decision(events)
    if event is None:
        return Notice()
    return Notice(decided(event), doing_now(run, pattern))


def notice_for(run: Run) -> Notice:
    """The status line of ``run`` read from the database (its last decision only), with what
    the run does now even when nobody has decided anything: for a refusal, which needs a
    reason."""
    from .patterns import PATTERNS

    pattern = PATTERNS.get(run.pattern)
    event = (run.events.filter(seq__lte=run.last_event_seq, data__has_key=DECIDED_BY)
             .order_by("-seq").first())
    return Notice(decided(event) if event is not None else "", doing_now(run, pattern))
