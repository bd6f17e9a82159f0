"""The offline model's actor and critic: deterministic and labelled. The first draft is
always sent back with one issue per key term of the task; the revision addresses them and is
approved, so both ends of the loop can be seen without a provider key."""

from __future__ import annotations

import re
from typing import Any

from ...llm.offline import LABEL, PLAIN_LABEL, clip, key_terms, sections
from .prompts import CRITIQUE, DRAFT, ISSUES, PREVIOUS_DRAFT, TASK


def actor(messages: list[dict[str, str]]) -> str:
    secs = sections(messages)
    task = secs.get(TASK, "")
    previous = secs.get(PREVIOUS_DRAFT, "")
    if not previous:
        points = "\n".join(f"- {t.capitalize()}: what it means for this task."
                           for t in key_terms(task, 5))
        return (f"# {clip(task, 80)}\n\nA first draft covering the key terms of the task.\n\n"
                f"{points}\n\n{LABEL}")
    issues = [i.strip("- ").strip() for i in secs.get(CRITIQUE, "").split(ISSUES, 1)[-1].splitlines()
              if i.strip().startswith("-")]
    body = previous.replace(LABEL, "").rstrip()
    added = "\n".join(f"- Addressed: {i}" for i in issues) or "- Tightened the wording."
    return f"{body}\n\n## Revisions\n{added}\n\n{LABEL}"


def critic(messages: list[dict[str, str]]) -> dict[str, Any]:
    secs = sections(messages)
    title = next((t for t in secs if t.startswith(f"{DRAFT} ")), f"{DRAFT} 1")
    n = int(re.sub(r"\D", "", title) or 1)
    if n >= 2:
        return {"approved": True, "score": 8, "issues": [],
                "summary": f"The revision addresses the issues raised. {PLAIN_LABEL}"}
    terms = key_terms(secs.get(TASK, ""), 3) or ["the task"]
    return {"approved": False, "score": 5,
            "summary": f"A start, but too general. {PLAIN_LABEL}",
            "issues": [f"Give a concrete example for “{t}”." for t in terms]}
