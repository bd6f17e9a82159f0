"""What the run page shows: the run, its timeline and model calls, and its pattern's panel
(the package's ``panel.html``, with the context its ``panel.py`` computes)."""

from __future__ import annotations

import importlib

from .models import Run
from .patterns import PATTERNS
from .rendering import step_diff

LEGACY_PANELS = ("plan-panel", "steps-panel", "items-panel")


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
        try:
            panel = importlib.import_module(f"{pattern.package}.panel")
        except ModuleNotFoundError:
            panel = None
        if panel is not None:
            ctx.update(panel.context(run, **extra) if getattr(panel, "TAKES_EXTRA", False)
                       else panel.context(run))
    else:
        ctx.update(_legacy_context(run, extra))
    ctx.update(extra)
    return ctx


def _legacy_items(run: Run) -> dict:
    """What the panels of the patterns still drawn by run_detail.html show."""
    items = list(run.items.all())
    if run.pattern == "reflective":
        drafts = {i.key: i.data for i in items if i.kind == "draft"}
        critiques = {i.key: i.data for i in items if i.kind == "critique"}
        rounds, previous = [], None
        for key in sorted(drafts, key=int):
            text = drafts[key]["text"]
            changes = None
            if previous is not None:
                changes = [(op, line) for op, line in step_diff(previous.splitlines(),
                                                                 text.splitlines())
                           if op != "same" and line.strip()]
            rounds.append({"n": int(key), "draft": text, "critique": critiques.get(key),
                           "changes": changes})
            previous = text
        return {"reflection_rounds": rounds}
    if run.pattern == "debate":
        by_round: dict[int, list] = {}
        for i in items:
            if i.kind == "argument":
                by_round.setdefault(i.data["round"], []).append(i.data)
        conclusion = next((i.data for i in items if i.kind == "conclusion"), None)
        return {"debate_rounds": sorted(by_round.items()), "conclusion": conclusion,
                "positions": (run.options or {}).get("positions", [])}
    if run.pattern == "team_lead":
        return {"subtasks": (run.state or {}).get("subtasks", []),
                "team": (run.options or {}).get("team", [])}
    return {}


def _legacy_context(run: Run, extra: dict) -> dict:
    plans = list(run.plan_versions.all())
    plan = plans[-1] if plans else None
    diff = step_diff(plans[-2].steps, plan.steps) if len(plans) > 1 else []
    state_plan = run.state.get("plan") or {}
    done = len(run.state.get("results") or [])
    total = len(state_plan.get("steps") or [])
    return {
        "plans": plans,
        "plan": plan,
        "plan_diff": diff,
        "diff_changed": any(op != "same" for op, _ in diff),
        "steps": list(run.step_results.all()),
        "approvals": list(run.approvals.select_related("user")),
        "progress_done": done,
        "progress_total": total,
        "progress_pct": int(100 * done / total) if total else (100 if run.status == "completed" else 0),
        "at_plan_gate": run.status == "awaiting_plan_approval",
        # The plan editor shows the steps as last posted (even none), else the plan's own.
        "gate_steps": plan.steps if plan and extra.get("edited_steps") is None
        else extra.get("edited_steps") or [],
        **(items := _legacy_items(run)),
        "item_panel": bool(items),
    }
