"""What ReWOO's planner and organizer are told: the planning prompt with the tool catalogue,
the evidence block the answer is written from and checked against, and the problems a failed
check found. The offline replies (``offline.py``) read the same headings, named here once."""

from __future__ import annotations

import re
from typing import Any

TASK = "Task"
EVIDENCE = "Evidence"
PROBLEMS = "Problems found in your previous answer"
ANSWER_TO_CHECK = "Answer to check"
ERROR = "ERROR: "  # before the error of a call that failed, in place of its output
# One piece of evidence in the block: its id, then (after the line "[E1] tool(...) for …:")
# its output or error, up to the next piece.
EVIDENCE_ITEM = re.compile(r"^\[(E\d+)\] .*?:\n(.*?)(?=^\[E\d+\] |\Z)", re.MULTILINE | re.DOTALL)
EVIDENCE_ID = re.compile(r"^\[(E\d+)\]", re.MULTILINE)
CITATION = re.compile(r"\[(E\d+)\]")  # how an answer cites evidence: [E1]

SKETCH_SYSTEM = """You plan how to answer a task with tools, before any tool runs. First decide
whether tools are needed at all: greetings, questions about yourself and general knowledge
need none (`needs_tools: false`, no sketches). Otherwise write at most {top_k} independent tool
calls, each with the question it answers. The calls run at the same time, so none may depend
on another's result.

Tools:
{catalogue}"""

ORGANIZE_SYSTEM = """You answer the task using only the evidence given, never outside
knowledge. Cite the evidence behind every claim as [E1], [E2]. If the evidence is not enough,
say so plainly and set `insufficient`. Give your confidence from 0 to 1."""

VERIFY_SYSTEM = """You check an answer against the evidence it cites. It is supported only if
every claim is backed by the cited evidence and no citation points to evidence that does not
say it. List each problem."""


def evidence_block(evidence: list[dict[str, Any]]) -> str:
    out = []
    for e in evidence:
        body = e["output"] if e["ok"] else f"{ERROR}{e['error']}"
        out.append(f"[{e['id']}] {e['tool']}({e['input']}) for “{e['query']}”:\n{body}")
    return "\n\n".join(out) or "(no evidence: no tool was needed or none ran)"


def sketch_messages(task: str, top_k: int, catalogue: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SKETCH_SYSTEM.format(top_k=top_k, catalogue=catalogue)},
            {"role": "user", "content": f"## {TASK}\n{task}"}]


def organize_messages(task: str, evidence: list[dict[str, Any]],
                      problems: list[str]) -> list[dict[str, str]]:
    user = f"## {TASK}\n{task}\n\n## {EVIDENCE}\n{evidence_block(evidence)}\n"
    if problems:
        user += f"\n## {PROBLEMS}\n" + "\n".join(f"- {p}" for p in problems) + "\n"
    return [{"role": "system", "content": ORGANIZE_SYSTEM}, {"role": "user", "content": user}]


def verify_messages(task: str, evidence: list[dict[str, Any]], answer: str) -> list[dict[str, str]]:
    user = (f"## {TASK}\n{task}\n\n## {EVIDENCE}\n{evidence_block(evidence)}"
            f"\n\n## {ANSWER_TO_CHECK}\n{answer}\n")
    return [{"role": "system", "content": VERIFY_SYSTEM}, {"role": "user", "content": user}]
