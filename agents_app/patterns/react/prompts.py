"""What the ReAct agent is told: the system prompt with the tool catalogue, the task, each
earlier call with its observation, and, when the loop is stopped, the request for the final
answer. The offline replies (``offline.py``) read the same headings, named here once."""

from __future__ import annotations

import json
from typing import Any

TASK = "Task"
OBSERVATION = "Observation"  # "## Observation (<tool>, ok|error)" after each call
ANSWERED = "answered:"  # "<person> answered: <answer>", the observation of ask_person

SYSTEM = """You solve the user's task by reasoning and using tools, one action at a time.
Each reply is a `thought` and an `action`: either a `tool_call` (a tool name and its input)
or a `final_answer`. After a tool call you see its observation (errors too). Answer as soon
as you know enough; do not repeat a call you already made.

Tools:
{catalogue}"""


def observation_heading(tool: str, ok: bool | None = None) -> str:
    """The heading of a call's observation; without ``ok``, its start (to find one)."""
    if ok is None:
        return f"## {OBSERVATION} ({tool}"
    return f"## {OBSERVATION} ({tool}, {'ok' if ok else 'error'})"


def person_answered(who: str, answer: str) -> str:
    return f"{who} {ANSWERED} {answer}"


def agent_messages(task: str, history: list[dict[str, Any]], catalogue: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": SYSTEM.format(catalogue=catalogue)},
                {"role": "user", "content": f"## {TASK}\n{task}"}]
    for h in history:
        messages.append({"role": "assistant", "content": json.dumps(
            {"thought": h["thought"], "action": {"type": "tool_call", "tool": h["tool"],
                                                 "input": h["input"]}})})
        messages.append({"role": "user", "content": f"{observation_heading(h['tool'], h['ok'])}"
                         f"\n{h['observation']}"})
    return messages


def final_messages(task: str, history: list[dict[str, Any]], catalogue: str,
                   reason: str) -> list[dict[str, str]]:
    return agent_messages(task, history, catalogue) + [{"role": "user", "content": (
        f"Stop using tools ({reason}). Give your final answer from what you have found; say "
        "what is missing.")}]
