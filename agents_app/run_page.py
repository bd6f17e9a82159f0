"""What the run page shows: the run, its timeline and model calls, and its pattern's panel
(the package's ``panel.html``, with the context its ``panel.py`` computes)."""

from __future__ import annotations

from .models import Event, Run
from .notices import DECIDED_BY, last_decision, run_notice
from .patterns import PATTERNS
from .patterns.registry import part_of


def run_context(run: Run, **extra) -> dict:
    pattern = PATTERNS.get(run.pattern)
    template = pattern.panel_template if pattern else ""
    shown = timeline(run)
    events = shown["events"]
    ctx = {
        "run": run,
        "pattern": pattern,
        "panel_template": template,
        "pattern_panels": pattern.panels if template else (),
        "calls": list(run.model_calls.all()),
        **shown,
        # The status line (what a person last decided, what the run does now): drawn on the
        # page, in the answer to a decision and in every live update (notices.py).
        "run_notice": run_notice(run, pattern, _with_last_decision(run, events)),
    }
    if run.is_waiting and events and events[-1].kind == "gate_vote":
        # One approval of several (issue 35): said to every watcher, so a live update keeps it.
        ctx["vote_note"] = events[-1].message
    if run.forked_from_id:  # a fork: its first stages are its parent's (issue 33)
        from .forking import lineage

        ctx["inherited_calls"] = lineage.inherited_calls(run)
        ctx["inherited_events"] = lineage.inherited_events(run)
    if template:
        ctx.update(_panel_context(pattern, run, extra))
    ctx.update(extra)
    return ctx


# A run's page shows its newest events (a run of a thousand steps has thousands; drawing them
# all costs more than the rest of the page), and loads the earlier ones a page at a time.
EVENTS_SHOWN = 100


def timeline(run: Run) -> dict:
    """The timeline's part of a page's context (the run, change and review pages): the newest
    ``EVENTS_SHOWN`` events, where "Show earlier events" loads from (``earlier_events``, or
    None when they start at the first) and ``last_seq``, where the page's live channel picks
    up. Only the events the run row already counts: a stage that commits while the page is
    drawn sends its events over the live channel instead, so the page never counts an event
    whose effects it does not show."""
    events = newest_events(run)
    return {"events": events,
            "earlier_events": events[0].seq if events and events[0].seq > 1 and
            len(events) == EVENTS_SHOWN else None,
            "last_seq": events[-1].seq if events else 0}


def newest_only(run: Run) -> dict:
    """The timeline's part of a live update's or a gate answer's context, which draws no
    timeline: the newest event only (for the header's activity line) and ``last_seq``."""
    events = list(run.events.order_by("-seq")[:1])
    return {"events": events, "earlier_events": None,
            "last_seq": events[-1].seq if events else 0}


def newest_events(run: Run) -> list[Event]:
    """The run's newest ``EVENTS_SHOWN`` events up to ``last_event_seq``, oldest first: one
    range of the (run, seq) index, read backwards."""
    rows = list(run.events.filter(seq__lte=run.last_event_seq).order_by("-seq")[:EVENTS_SHOWN])
    return rows[::-1]


def events_before(run: Run, before: int) -> tuple[list[Event], int | None]:
    """The page of events before the event ``before`` (``EVENTS_SHOWN`` of them, oldest first),
    and the seq to load the page before it from (``None``: this page starts at the first)."""
    rows = list(run.events.filter(seq__lt=before, seq__lte=run.last_event_seq)
                .order_by("-seq")[:EVENTS_SHOWN + 1])
    more = len(rows) > EVENTS_SHOWN
    rows = rows[:EVENTS_SHOWN][::-1]
    return rows, rows[0].seq if more and rows else None


def _with_last_decision(run: Run, events: list[Event]) -> list[Event]:
    """``events``, after the last decision before them when they hold none, so the status line
    says what a person last decided even when it is older than the events shown."""
    if not events or last_decision(events) is not None or events[0].seq <= 1:
        return events
    earlier = (run.events.filter(seq__lt=events[0].seq, data__has_key=DECIDED_BY)
               .order_by("-seq").first())
    return [earlier, *events] if earlier is not None else events


def _panel_context(pattern, run: Run, extra: dict) -> dict:
    """The context of the package's ``panel.py``: ``context(run, **extra)``, where ``extra`` is
    what a gate view adds (the text a person typed, an error); nothing when it has none."""
    panel = part_of(pattern, "panel")
    return panel.context(run, **extra) if panel is not None else {}
