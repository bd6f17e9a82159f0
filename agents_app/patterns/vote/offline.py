"""The offline model's voters and aggregator: deterministic and labelled. In the first round
the voters disagree on purpose, in a way that depends only on their number: odd-numbered
voters put the task's first key term first, even-numbered ones its second, so three voters
split two to one (67%, below the default threshold of 75%) and the gate can be seen without
a provider key. From the second round on every voter takes up the largest group of the round
before (and says which feedback it read), so another round visibly settles the vote. The
aggregator groups the answers by their normalised text."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...llm.offline import LABEL, PLAIN_LABEL, clip, key_terms, sections
from .grouping import group_by_text
from .prompts import ANSWERS, EARLIER, FEEDBACK, GROUP, TASK, VOTER

_GROUP = re.compile(rf"^### {GROUP} (\d+)[^\n]*\n(.*?)(?=^### {GROUP} \d+|\Z)", re.M | re.S)
_VOTER = re.compile(rf"^### {VOTER} (\d+)\s*\n(.*?)(?=^### {VOTER} \d+\s*$|\Z)", re.M | re.S)


def voter(i: int) -> Callable[[list[dict[str, str]]], str]:
    """Voter ``i``'s offline replies."""

    def reply(messages: list[dict[str, str]]) -> str:
        secs = sections(messages)
        task = secs.get(TASK, "")
        earlier = _GROUP.findall(secs.get(EARLIER, ""))
        if earlier:
            answer = earlier[0][1].strip().splitlines()[0]
            feedback = secs.get(FEEDBACK, "")
            heard = (f"\n\nFeedback taken into account: “{clip(feedback, 200)}”."
                     if feedback else "")
            return (f"{answer}\n\nA stand-in answer to “{clip(task, 80)}”: this round every "
                    f"offline voter takes up the largest group's answer.{heard}\n\n{LABEL}")
        terms = key_terms(task, 4) or ["the task"]
        focus = terms[0] if i % 2 else (terms[1] if len(terms) > 1 else "a narrower reading")
        return (f"**Start from “{focus}”.**\n\nA stand-in answer to “{clip(task, 80)}”. The "
                "offline voters disagree on purpose: odd-numbered voters start from the first "
                "key term of the task, even-numbered ones from the second.\n\n" + LABEL)

    reply.__name__ = f"voter_{i}"
    return reply


def aggregator(messages: list[dict[str, str]]) -> dict[str, Any]:
    text = "\n".join(m.get("content", "") for m in messages if m.get("role") == "user")
    answers_part = text.split(f"## {ANSWERS}\n", 1)[-1]
    answers = {int(n): body.strip() for n, body in _VOTER.findall(answers_part)}
    groups = group_by_text(answers)
    n = len(answers)
    summary = ("All the answers say the same." if len(groups) == 1 else
               f"{len(groups)} different answers among {n} voters.")
    return {"groups": [{"voters": g["voters"], "representative": g["representative"],
                        "label": g["label"]} for g in groups],
            "summary": f"{summary} {PLAIN_LABEL}"}
