"""The ReWOO run's panel: the planned calls, the evidence they returned, each draft answer
and each check against the evidence. The last draft is also ``final_answer``: the run page's
answer panel shows it with its citations linked to the evidence when it is the answer.
(Django side of the package: it reads the run's items.)"""

from __future__ import annotations


def context(run, **extra) -> dict:
    items = list(run.items.all())
    answers = [i.data for i in items if i.kind == "answer"]
    return {"sketches": [i.data for i in items if i.kind == "sketch"],
            "evidence": [i.data for i in items if i.kind == "evidence"],
            "answers": answers, "final_answer": answers[-1] if answers else None,
            "verifications": [i.data for i in items if i.kind == "verification"]}
