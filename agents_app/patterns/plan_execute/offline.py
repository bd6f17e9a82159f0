"""The offline model's planner, executor and synthesizer: no reasoning, only the task's own
structure. A task written as a list or a sequence ("first …, then …") becomes those steps;
feedback becomes a step of its own, so a person can see it was taken into account."""

from __future__ import annotations

import re
from typing import Any

from ...llm.offline import (
    LABEL,
    LIST_ITEM,
    capitalise,
    clip,
    find_section,
    key_terms,
    sections,
    split_task,
)
from .prompts import CURRENT, EARLIER, FAILED, FEEDBACK, OUTPUTS, PREVIOUS_PLAN, TASK


def plan(messages: list[dict[str, str]]) -> dict[str, Any]:
    secs = sections(messages)
    task = find_section(secs, TASK)
    feedback = find_section(secs, FEEDBACK)
    failed = find_section(secs, FAILED)
    previous = [m.strip() for m in LIST_ITEM.findall(find_section(secs, PREVIOUS_PLAN))]
    subject = clip(task, 80)
    if failed:
        failed_desc = failed.splitlines()[0]
        steps = [f"Retry with a narrower scope: {failed_desc}",
                 f"Check the result against the task: {subject}"]
        reasoning = "The failed step is retried with a smaller scope, then checked."
    elif previous:
        steps = list(previous)
    else:
        steps = [capitalise(s) for s in split_task(task)] or [
            f"Pin down what the task asks for and what a complete answer contains: {subject}",
            f"Work out the substance of the answer, covering {', '.join(key_terms(task, 4)) or 'each point'}",
            "Check the draft against the task and list any gaps or assumptions",
        ]
        reasoning = "Steps follow the structure of the task as written."
    if feedback:
        # Feedback is taken into account in a way a person can see: it becomes a step of
        # its own, before the final check when there is one.
        extra = f"Address the feedback: {clip(feedback, 200)}"
        at = len(steps) - 1 if len(steps) > 1 else len(steps)
        steps.insert(at, extra)
        reasoning = f"Revised to take the feedback into account: \u201c{clip(feedback, 120)}\u201d."
    return {"goal": f"Answer: {subject}", "reasoning": reasoning, "steps": steps}


def step_report(messages: list[dict[str, str]]) -> dict[str, Any]:
    secs = sections(messages)
    task = find_section(secs, TASK)
    current = find_section(secs, CURRENT)
    earlier = find_section(secs, EARLIER)
    n_prior = len(re.findall(r"^### Step", earlier, re.MULTILINE))
    terms = ", ".join(key_terms(current + " " + task)) or "none found"
    output = (
        f"**{current}**\n\n"
        f"- Key terms: {terms}\n"
        f"- Builds on {n_prior} earlier step{'s' if n_prior != 1 else ''}.\n"
        f"- Task length: {len(task.split())} words.\n\n{LABEL}"
    )
    return {"output": output, "succeeded": True, "problem": ""}


def synthesis(messages: list[dict[str, str]]) -> str:
    secs = sections(messages)
    task = find_section(secs, TASK)
    outputs = find_section(secs, OUTPUTS)
    titles = re.findall(r"^### (.+)$", outputs, re.MULTILINE)
    lines = "\n".join(f"{i}. {t}" for i, t in enumerate(titles, 1))
    return (f"### Answer to: {clip(task, 120)}\n\n"
            f"The plan was carried out in {len(titles)} step{'s' if len(titles) != 1 else ''}:\n\n"
            f"{lines}\n\n{LABEL} Set a provider key to get a real answer.")
