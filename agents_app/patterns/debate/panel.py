"""The debate's panel: the positions, every round's arguments side by side, and the judge's
conclusion. (Django side of the package: it reads the run's items.)"""

from __future__ import annotations


def context(run, **extra) -> dict:
    by_round: dict[int, list] = {}
    conclusion = None
    for item in run.items.all():
        if item.kind == "argument":
            by_round.setdefault(item.data["round"], []).append(item.data)
        elif item.kind == "conclusion" and conclusion is None:
            conclusion = item.data
    return {"debate_rounds": sorted(by_round.items()), "conclusion": conclusion,
            "positions": (run.options or {}).get("positions", [])}
