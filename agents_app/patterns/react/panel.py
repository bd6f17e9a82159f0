"""The ReAct run's panel: every iteration (thought, call, observation or why it was not run),
the forced final answer's reason, and the call waiting at a gate with its arguments as JSON.
(Django side of the package: it reads the run's items and state.)"""

from __future__ import annotations

import json


def context(run, **extra) -> dict:
    items = list(run.items.all())
    steps = sorted((i.data for i in items if i.kind == "step"), key=lambda d: d["iteration"])
    forced = next((i.data for i in items if i.kind == "final"), None)
    pending = (run.state or {}).get("pending") if run.is_waiting else None
    return {"react_steps": steps, "react_forced": forced, "pending": pending,
            "pending_args": json.dumps((pending or {}).get("input", {}), indent=2)}
