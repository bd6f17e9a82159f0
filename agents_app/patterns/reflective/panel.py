"""The reflective run's panel: every round's draft, its critique, and what changed since the
draft before. (Django side of the package: it reads the run's items.)"""

from __future__ import annotations

from ...rendering import step_diff


def context(run, **extra) -> dict:
    drafts, critiques = {}, {}
    for item in run.items.all():
        if item.kind == "draft":
            drafts[item.key] = item.data
        elif item.kind == "critique":
            critiques[item.key] = item.data
    rounds, previous = [], None
    for key in sorted(drafts, key=int):
        text = drafts[key]["text"]
        changes = None
        if previous is not None:
            changes = [(op, line) for op, line in step_diff(previous.splitlines(), text.splitlines())
                       if op != "same" and line.strip()]
        rounds.append({"n": int(key), "draft": text, "critique": critiques.get(key),
                       "changes": changes, "edited_by": drafts[key].get("edited_by", "")})
        previous = text
    return {"reflection_rounds": rounds}
