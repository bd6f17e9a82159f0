"""The offline model's ReWOO planner and organizer: deterministic and labelled. The plan is
the tool calls the task spells out (arithmetic, the time); the answer lists what each piece of
evidence returned, citing it; the check finds citations of evidence that does not exist."""

from __future__ import annotations

from typing import Any

from ...llm.offline import LABEL, PLAIN_LABEL, sections
from ..tools.offline import planned_calls
from .prompts import (
    ANSWER_TO_CHECK,
    CITATION,
    ERROR,
    EVIDENCE,
    EVIDENCE_ID,
    EVIDENCE_ITEM,
    TASK,
)


def sketch(messages: list[dict[str, str]]) -> dict[str, Any]:
    calls = planned_calls(sections(messages).get(TASK, ""))
    return {"needs_tools": bool(calls), "reasoning": f"Calls the task spells out. {PLAIN_LABEL}",
            "sketches": [{"query": q, "tool": t, "arguments": a} for q, t, a in calls]}


def organize(messages: list[dict[str, str]]) -> dict[str, Any]:
    items = EVIDENCE_ITEM.findall(sections(messages).get(EVIDENCE, ""))
    good = [(i, text.strip()) for i, text in items if not text.startswith(ERROR)]
    if not good:
        return {"answer": f"The evidence is not enough to answer. {LABEL}", "citations": [],
                "confidence": 0.1, "insufficient": True}
    lines = "\n".join(f"- {text.splitlines()[0]} [{i}]" for i, text in good)
    return {"answer": f"From the evidence:\n\n{lines}\n\n{LABEL}",
            "citations": [i for i, _ in good], "confidence": 0.6, "insufficient": False}


def verify(messages: list[dict[str, str]]) -> dict[str, Any]:
    secs = sections(messages)
    known = set(EVIDENCE_ID.findall(secs.get(EVIDENCE, "")))
    cited = set(CITATION.findall(secs.get(ANSWER_TO_CHECK, "")))
    unknown = sorted(cited - known)
    return {"supported": not unknown,
            "problems": [f"{c} is not in the evidence." for c in unknown]}
