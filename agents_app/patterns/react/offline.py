"""The offline model's ReAct agent: deterministic and labelled. It first asks the person what
the task tells it to ask (when ``ask_person`` is offered), then makes the tool calls the task
spells out (arithmetic, the time), one an iteration, and answers with what they returned."""

from __future__ import annotations

import re
from typing import Any
from zoneinfo import ZoneInfo

from ...llm.offline import LABEL, PLAIN_LABEL, sections
from ..tools.offline import TIME, offered, planned_calls
from ..tools.toolbox import ASK_PERSON
from .prompts import ANSWERED, OBSERVATION, TASK, observation_heading

_ASK = re.compile(r"\bask me\b[\s,:]*(?P<what>[^.?!\n]*)", re.IGNORECASE)
_LOCAL_TIME = re.compile(r"\b(?:my|local)\s+(?:time\s*zone|time|city)\b|\bwhere I am\b",
                         re.IGNORECASE)
ZONE_QUESTION = "Which time zone are you in (for example Europe/Paris)?"
_THEN = re.compile(r",?\s+(?:and\s+)?then\b|,\s+and\b", re.IGNORECASE)
_ABOUT = re.compile(r"^(?:for|about)\s+", re.IGNORECASE)
_YOURS = {"i": "you", "me": "you", "my": "your", "mine": "yours", "am": "are", "i'm": "you're"}
_PERSON = re.compile(r"\b(?:I'm|I|me|my|mine|am)\b", re.IGNORECASE)


def person_question(task: str) -> str:
    """What the offline agent asks the person before anything else: what the task tells it
    to ask ("…, ask me which city to visit"), or the time zone a question about their local
    time leaves out. "" when it has nothing to ask."""
    if m := _ASK.search(task):
        # "ask me which city I live in, then …" → "Please tell me which city you live in."
        what = _THEN.split(m.group("what"), 1)[0].strip(" ,;:-")
        what = _ABOUT.sub("", _PERSON.sub(lambda p: _YOURS[p.group(0).lower()], what))
        return f"Please tell me {what}." if what else "What should I know for this task?"
    if _LOCAL_TIME.search(task) and TIME.search(task):
        return ZONE_QUESTION
    return ""


def _person_answer(messages: list[dict[str, str]]) -> str | None:
    """The person's answer to the agent's question, once there is one."""
    start = observation_heading(ASK_PERSON)
    for m in messages:
        if m.get("role") == "user" and m["content"].startswith(start):
            return m["content"].split("\n", 1)[-1].split(f" {ANSWERED} ", 1)[-1].strip()
    return None


def _zone(answer: str | None) -> str:
    try:
        return answer.strip() if answer and ZoneInfo(answer.strip()) else "UTC"
    except (ValueError, KeyError, OSError):  # not a zone name (KeyError): the clock says UTC
        return "UTC"


def _observations(messages: list[dict[str, str]]) -> list[str]:
    person = observation_heading(ASK_PERSON)
    return [m["content"].split("\n", 1)[-1] for m in messages
            if m.get("role") == "user" and m["content"].startswith(f"## {OBSERVATION}")
            and not m["content"].startswith(person)]


def thought(messages: list[dict[str, str]]) -> dict[str, Any]:
    task = sections(messages).get(TASK, "")
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    # The question comes first, and only when the person can be asked (ask_person is a tool).
    question = person_question(task) if offered(system, ASK_PERSON) else ""
    answer = _person_answer(messages)
    calls = [(question, ASK_PERSON, {"question": question})] if question else []
    calls += planned_calls(task, _zone(answer))
    done = sum(1 for m in messages if m.get("role") == "assistant")
    if done < len(calls):
        query, tool, args = calls[done]
        why = ("Only the person running this can tell." if tool == ASK_PERSON
               else f"The {tool} tool can tell.")
        return {"thought": f"{query} {why} {PLAIN_LABEL}",
                "action": {"type": "tool_call", "tool": tool, "input": args}}
    found = _observations(messages)
    lines = [f"You told me: {answer}"] if answer is not None else []
    lines += [f"- {o}" for o in found]
    if not lines:
        lines = ["The offline model can only use the calculator and the clock for what the "
                 "task spells out; there was nothing for it to look up here."]
    return {"thought": f"I have what I can get. {PLAIN_LABEL}",
            "action": {"type": "final_answer", "answer": "\n".join(lines) + f"\n\n{LABEL}"}}


def final(messages: list[dict[str, str]]) -> dict[str, Any]:
    answer = _person_answer(messages)
    found = ([f"You told me: {answer}"] if answer is not None else []) + \
        [f"- {o}" for o in _observations(messages)]
    return {"answer": ("\n".join(found) or "Nothing was found.") + f"\n\n{LABEL}"}
