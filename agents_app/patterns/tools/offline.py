"""The offline model's tool calls: the ones a task spells out, arithmetic for the calculator
and a question about the time for the clock. The offline replies of the patterns that use tools
plan from these, so each shows its flow with real tool calls and no provider key."""

from __future__ import annotations

import re

from .toolbox import HEADING

ARITHMETIC = re.compile(r"(?<![\w.])(\(?\s*\d[\d.\s()*/+\-%]*[*/+\-%]\s*\(?\s*\d[\d.\s()*/+\-%]*)")
TIME = re.compile(r"\b(time|date|today|now|day)\b", re.IGNORECASE)
MAX_CALLS = 4


def planned_calls(task: str, timezone: str = "UTC") -> list[tuple[str, str, dict[str, str]]]:
    """The tool calls a task spells out, as (question, tool, arguments): arithmetic, and a
    question about the time."""
    calls: list[tuple[str, str, dict[str, str]]] = []
    for m in ARITHMETIC.finditer(task):
        expression = m.group(1).strip().rstrip("?.")
        if any(op in expression for op in "*/+-%"):
            calls.append((f"What is {expression}?", "calculator", {"expression": expression}))
    if TIME.search(task):
        calls.append(("What is the current time?", "current_time", {"timezone": timezone}))
    return calls[:MAX_CALLS]


def offered(system: str, tool: str) -> bool:
    """Whether the tool catalogue in a system prompt offers ``tool``."""
    return f"{HEADING}{tool}\n" in system
