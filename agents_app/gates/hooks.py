"""Shared gates plug into the engine here, when Django is ready (``AgentsAppConfig.ready``):
the engine keeps lists of hooks and never imports this package, so no engine module is in an
import cycle (tests/test_import_graph.py)."""

from __future__ import annotations


def install() -> None:
    from ..engine.actions import PERSON_DECIDES
    from ..engine.commit import GATE_CLOSE_HOOKS, GATE_OPEN_HOOKS
    from . import core

    if core.opened not in GATE_OPEN_HOOKS:
        GATE_OPEN_HOOKS.append(core.opened)
    if core.closed not in GATE_CLOSE_HOOKS:
        GATE_CLOSE_HOOKS.append(core.closed)
    if core.person_decides not in PERSON_DECIDES:
        PERSON_DECIDES.append(core.person_decides)
