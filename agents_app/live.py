"""What the live channel sends: for new events of a run, their timeline entries plus the panels
of its page that those events change, as htmx out-of-band swaps. Which panels an event kind
changes comes from the engine (the kinds every run emits) and from the run's pattern (its own
kinds, ``Pattern.live_events``); a pattern with a page of its own names its renderer
(``Pattern.live_renderer``)."""

from __future__ import annotations

from django.template.loader import render_to_string
from django.utils.module_loading import import_string

from .models import Run
from .patterns import PATTERNS

LIVE_MESSAGE_LIMIT = 900_000  # bytes; Daphne refuses WebSocket messages over 1 MiB
# The run page's own panels, around the pattern's.
HEAD = ("gate-status", "header")  # the status line first: a panel's update may quote it
TAIL = ("answer-panel", "calls-panel")


def panels_for(run: Run, kinds) -> set[str]:
    """The panels of ``run``'s page that events of ``kinds`` change (the header and the status
    line always: both follow the run's state)."""
    pattern = PATTERNS.get(run.pattern)
    own = set(pattern.panels) if pattern else set()
    table = dict(pattern.live_events) if pattern else {}
    panels = {"header", "gate-status"}
    for kind in kinds:
        if kind == "model_call":
            panels.add("calls-panel")
        elif kind == "run_finished":
            panels |= own | {"answer-panel"}
        elif kind in ("gate_opened", "gate_edited", "run_cancelled", "budget_exceeded"):
            panels |= own
        panels |= set(table.get(kind, ()))
    return panels


def live_message(page: str, ctx: dict, events, panels: set[str], order: tuple[str, ...], *,
                 bulky: tuple[str, ...] = (), too_large: str = "",
                 sources: dict[str, str] | None = None) -> str:
    """The WebSocket message for new events on ``page``: their timeline entries, then the
    ``panels`` (in ``order``) as out-of-band swaps, each from ``page`` or the template
    ``sources`` names for it. A message too large for one frame leaves out the ``bulky``
    panels and adds the ``too_large`` partial, which asks the person to load the page."""
    sources = sources or {}
    parts = {"": render_to_string("agents_app/_timeline_append.html",
                                  {**ctx, "new_events": events})}
    for name in order:
        if name in panels:
            parts[name] = render_to_string(f"{sources.get(name, page)}#{name}",
                                           {**ctx, "oob": True})
    html = "\n".join(parts.values())
    if too_large and len(html.encode()) > LIVE_MESSAGE_LIMIT:
        kept = [part for name, part in parts.items() if name not in bulky]
        kept.append(render_to_string(f"{page}#{too_large}", {**ctx, "oob": True}))
        html = "\n".join(kept)
    return html


def render_run_update(run: Run, events, panels: set[str]) -> str:
    """The run page's message: the header, the pattern's panels, the answer and the calls."""
    from .run_page import run_context

    ctx = run_context(run)
    own = tuple(ctx["pattern_panels"])
    template = ctx["panel_template"]
    return live_message("agents_app/run_detail.html", ctx, events, panels, HEAD + own + TAIL,
                        sources=dict.fromkeys(own, template) if template else {})


def render_live(run: Run, events, panels: set[str]) -> str:
    """The WebSocket message for ``events`` of ``run``, by the page its pattern uses."""
    pattern = PATTERNS.get(run.pattern)
    if pattern is not None and pattern.live_renderer:
        return import_string(pattern.live_renderer)(run, events, panels)
    return render_run_update(run, events, panels)
