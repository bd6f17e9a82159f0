"""The team lead's panel: the team, and every subtask attempt with its assignee, status and
result. (Django side of the package: it reads the run's state and options.)"""

from __future__ import annotations


def context(run, **extra) -> dict:
    return {"subtasks": (run.state or {}).get("subtasks", []),
            "team": (run.options or {}).get("team", [])}
