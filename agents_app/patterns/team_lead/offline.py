"""The offline model's lead and members: deterministic and labelled. The lead splits the task
by its own structure, round-robin over the team; in the dynamic strategy its first review asks
for one check and its second finds the work complete; each member restates its subtask."""

from __future__ import annotations

import re
from typing import Any

from ...llm.offline import LABEL, PLAIN_LABEL, clip, key_terms, sections, split_task
from .prompts import MEMBER_INTRO, RESULTS, RESULTS_SO_FAR, TASK, WORK_LOG, YOUR_SUBTASK

CHECK = "Check the results so far against the task."  # the one reassignment it makes
_MEMBER = re.compile(r"^- ([A-Za-z][\w-]*):", re.MULTILINE)  # a line of prompts.team_block
_WHO = re.compile(rf"{re.escape(MEMBER_INTRO)} ([\w-]+)")
_DONE = re.compile(r"^### (T\d+) — ([\w-]+)", re.MULTILINE)  # a block of prompts.work_log


def _system(messages: list[dict[str, str]]) -> str:
    return next((m["content"] for m in messages if m.get("role") == "system"), "")


def _team(messages: list[dict[str, str]]) -> list[str]:
    return _MEMBER.findall(_system(messages)) or ["member"]


def delegation(messages: list[dict[str, str]]) -> dict[str, Any]:
    task = sections(messages).get(TASK, "")
    team = _team(messages)
    parts = split_task(task) or [f"Gather what is needed for: {clip(task, 150)}",
                                 f"Write the answer to: {clip(task, 150)}"]
    return {"subtasks": [{"assignee": team[i % len(team)], "task": p}
                         for i, p in enumerate(parts[:6])]}


def lead_review(messages: list[dict[str, str]]) -> dict[str, Any]:
    if CHECK not in sections(messages).get(WORK_LOG, ""):
        return {"complete": False, "reason": f"One check before the answer. {PLAIN_LABEL}",
                "reassignments": [{"assignee": _team(messages)[0], "task": CHECK}]}
    return {"complete": True, "reassignments": [], "reason": f"Enough to answer. {PLAIN_LABEL}"}


def member(messages: list[dict[str, str]]) -> str:
    who = _WHO.search(_system(messages))
    secs = sections(messages)
    subtask = secs.get(YOUR_SUBTASK, "")
    return (f"**{who.group(1) if who else 'member'}** on “{clip(subtask, 150)}”: covers "
            f"{', '.join(key_terms(subtask, 3)) or 'the subtask'}"
            + ("; builds on the earlier results." if RESULTS_SO_FAR in secs else ".")
            + f" {LABEL}")


def lead_text(messages: list[dict[str, str]]) -> str:
    parts = _DONE.findall(sections(messages).get(RESULTS, ""))
    lines = "\n".join(f"- {t} by {who}" for t, who in parts)
    return f"The team's results, combined:\n\n{lines}\n\n{LABEL}"
