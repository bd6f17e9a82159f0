"""What the run page shows: the run, its timeline and model calls, and its pattern's panel
(the package's ``panel.html``, with the context its ``panel.py`` computes)."""

from __future__ import annotations

from .models import Run
from .notices import run_notice
from .patterns import PATTERNS
from .patterns.registry import part_of


def run_context(run: Run, **extra) -> dict:
    pattern = PATTERNS.get(run.pattern)
    template = pattern.panel_template if pattern else ""
    ctx = {
        "run": run,
        "pattern": pattern,
        "panel_template": template,
        "pattern_panels": pattern.panels if template else (),
        "calls": list(run.model_calls.all()),
        # Only the events the run row already counts: a stage that commits while this page is
        # drawn sends its events over the live channel instead (the page subscribes from
        # ``last_seq``), so the page never counts an event whose effects it does not show.
        "events": (events := list(run.events.filter(seq__lte=run.last_event_seq))),
        "last_seq": events[-1].seq if events else 0,
        # The status line (what a person last decided, what the run does now): drawn on the
        # page, in the answer to a decision and in every live update (notices.py).
        "run_notice": run_notice(run, pattern, events),
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


def _panel_context(pattern, run: Run, extra: dict) -> dict:
    """The context of the package's ``panel.py``: ``context(run, **extra)``, where ``extra`` is
    what a gate view adds (the text a person typed, an error); nothing when it has none."""
    panel = part_of(pattern, "panel")
    return panel.context(run, **extra) if panel is not None else {}
