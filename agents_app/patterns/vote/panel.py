"""The vote's panel: every round's answers, its groups side by side with their counts and the
agreement, what a person decided, and the gate's forms while the run waits. (Django side of
the package: it reads the run's items, state and options.)"""

from __future__ import annotations

from .pattern import GATE, voter_role

TAKES_EXTRA = True  # the gate's typed text comes back after a refused decision


def context(run, **extra) -> dict:
    answers: dict[int, list[dict]] = {}
    groupings: dict[int, dict] = {}
    decisions: dict[int, dict] = {}
    for item in run.items.all():
        if item.kind == "answer":
            answers.setdefault(item.data["round"], []).append(item.data)
        elif item.kind == "grouping":
            groupings[item.data["round"]] = item.data
        elif item.kind == "decision":
            decisions[item.data["round"]] = item.data
    models = run.models_used or {}
    opts = run.options or {}
    waiting = run.gate == GATE and run.is_waiting
    current = int((run.state or {}).get("round") or 0)
    rounds = []
    for r in sorted(answers):
        grouping = groupings.get(r)
        groups = []
        for n, g in enumerate((grouping or {}).get("groups", []), 1):
            groups.append({**g, "n": n, "size": len(g["voters"]),
                           "typed": _typed(extra, n, g["answer"])})
        rounds.append({
            "n": r,
            "answers": [{**a, "model": models.get(a.get("role") or voter_role(a["voter"]), "")}
                        for a in sorted(answers[r], key=lambda a: a["voter"])],
            "grouping": grouping, "groups": groups, "decision": decisions.get(r),
            "feedback": (decisions.get(r - 1) or {}).get("feedback", ""),
            "at_gate": waiting and r == current,
        })
    max_rounds = int(opts.get("max_rounds") or 1)
    return {"vote_rounds": rounds, "vote_waiting": waiting,
            "vote_can_again": waiting and current < max_rounds,
            "vote_max_rounds": max_rounds, "vote_current": current}


def _typed(extra: dict, n: int, answer: str) -> str:
    """The text of group ``n``'s edit box: what the person typed when their edit of this
    group was refused, else the group's answer."""
    if str(extra.get("typed_group", "")) == str(n) and extra.get("typed_answer") is not None:
        return extra["typed_answer"]
    return answer
