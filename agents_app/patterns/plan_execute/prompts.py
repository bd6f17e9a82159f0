"""What the planner, the executor and the synthesizer are told. The section headings are
named once here; the offline replies (``offline.py``) read the same ones."""

from __future__ import annotations

TASK = "Task"
COMPLETED = "Completed steps (keep; do not repeat them)"
FAILED = "Failed step"
PREVIOUS_PLAN = "Previous plan"
FEEDBACK = "Feedback on the previous plan"
INSTRUCTION = "Instruction"
PLAN = "Plan"
EARLIER = "Outputs of earlier steps"
CURRENT = "Current step"
OUTPUTS = "Step outputs"

PLANNER_SYSTEM = """You are the planner of a small team of language models.
Break the user's task into concrete, ordered steps. An executor will carry out each
step in a single reply, seeing the task, the whole plan and the outputs of the steps
before it, so each step must be doable in one answer and must say what it produces.
Use as few steps as the task allows (at most {max_steps}). Do not number the steps."""

EXECUTOR_SYSTEM = """You are the executor of a plan. Carry out only the current step,
using the task and the outputs of earlier steps. Put the step's result in `output`
(Markdown, no preamble). If the step cannot be done, set `succeeded` to false and say
in `problem` what stands in the way; do not invent results."""

SYNTHESIZER_SYSTEM = """You write the final answer to the user's task from the outputs
of the steps that were carried out. Answer the task directly and completely, in
Markdown. Do not describe the process or repeat the steps one by one."""

DIRECT_SYSTEM = """Answer the user's task directly and concisely, in Markdown."""


def _section(title: str, body: str) -> str:
    return f"## {title}\n{body.strip()}\n"


def _numbered(steps: list[str]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
