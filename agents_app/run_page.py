"""What the run page shows: the run, its timeline and model calls, and its pattern's panel
(the package's ``panel.html``, with the context its ``panel.py`` computes)."""

from __future__ import annotations

import importlib
import inspect

from .models import Run
from .patterns import PATTERNS

LEGACY_PANELS = ("items-panel",)


def run_context(run: Run, **extra) -> dict:
    pattern = PATTERNS.get(run.pattern)
    template = pattern.panel_template if pattern else ""
    ctx = {
        "run": run,
        "pattern": pattern,
        "panel_template": template,
        "pattern_panels": pattern.panels if template else LEGACY_PANELS,
        "calls": list(run.model_calls.all()),
        "events": (events := list(run.events.all())),
        "last_seq": events[-1].seq if events else 0,
    }
    if template:
        ctx.update(_panel_context(pattern, run, extra))
    else:
        ctx.update(_legacy_context(run, extra))
    ctx.update(extra)
    return ctx


def _panel_context(pattern, run: Run, extra: dict) -> dict:
    """The context of the package's ``panel.py`` (``context(run, **extra)``; ``extra`` is what
    a gate view adds, such as the text a person typed), or nothing when it has none."""
    name = f"{pattern.package}.panel"
    try:
        panel = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return {}
    takes_extra = any(p.kind is p.VAR_KEYWORD
                      for p in inspect.signature(panel.context).parameters.values())
    return panel.context(run, **extra) if takes_extra else panel.context(run)


def _legacy_items(run: Run) -> dict:
    """What the panels of the patterns still drawn by run_detail.html show."""
    return {}


def _legacy_context(run: Run, extra: dict) -> dict:
    items = _legacy_items(run)
    return {**items, "item_panel": bool(items)}
