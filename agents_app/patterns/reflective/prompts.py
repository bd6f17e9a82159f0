"""What the actor and the critic are told. The offline replies (``offline.py``) read the same
headings, named here once."""

from __future__ import annotations

from typing import Any

TASK = "Task"
PREVIOUS_DRAFT = "Previous draft"
CRITIQUE = "Critique"
DRAFT = "Draft"  # "Draft N" when the critic reads draft N
ISSUES = "Issues:"

ACTOR_SYSTEM = """You write the answer to the user's task, in Markdown. When you are given a
previous draft and a critique, produce a complete revised draft that fixes every issue raised
while keeping what was already good. Reply with the draft only, no commentary."""

CRITIC_SYSTEM = """You are a demanding editor judging a draft against its task. Check that it
answers the task completely and correctly, and is clear and concise. Set `approved` to true
only if nothing important remains to fix; otherwise list the concrete issues, most important
first. Do not rewrite the draft yourself."""


def section(title: str, body: str) -> str:
    return f"## {title}\n{(body or '').strip() or '(none)'}\n"


def actor_messages(task: str, previous: str = "", critique: dict[str, Any] | None = None) -> list[dict[str, str]]:
    parts = [section(TASK, task)]
    if critique is not None:
        issues = "\n".join(f"- {i}" for i in critique["issues"]) or "(none listed)"
        parts += [section(PREVIOUS_DRAFT, previous),
                  section(CRITIQUE, f"{critique['summary']}\n\n{ISSUES}\n{issues}")]
    return [{"role": "system", "content": ACTOR_SYSTEM},
            {"role": "user", "content": "\n".join(parts)}]


def critic_messages(task: str, n: int, draft: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": CRITIC_SYSTEM},
            {"role": "user", "content": section(TASK, task) + "\n" + section(f"{DRAFT} {n}", draft)}]
