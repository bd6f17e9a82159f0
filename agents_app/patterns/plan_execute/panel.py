"""The plan-and-execute run's panels: the plan (its versions, what changed, the gate's editor)
and the executed steps. (Django side of the package: it reads the run's records.)"""

from __future__ import annotations

from ...rendering import step_diff


def context(run, **extra) -> dict:
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
    }
