"""What the voters and the aggregator are told. The offline replies (``offline.py``) read the
same headings, named here once."""

from __future__ import annotations

from typing import Any

TASK = "Task"
FEEDBACK = "Feedback from the person"
EARLIER = "Answers of the previous round"  # what a voter of round 2 and later reads
ANSWERS = "Answers"
VOTER = "Voter"  # "### Voter N" above each answer the aggregator reads
GROUP = "Group"  # "### Group N" above each earlier answer a voter reads

VOTER_SYSTEM = """You answer the user's task on your own, in Markdown. Other models answer the
same task independently; their answers will be compared with yours, so give your real best
answer, state its conclusion plainly near the start, and keep it concise. When answers of an
earlier round and a person's feedback are given, reconsider: keep your answer if you still
think it right, change it if the others or the feedback convince you."""

AGGREGATOR_SYSTEM = """You compare independent answers to the same task and group the ones
that are equivalent: they reach the same conclusion or give the same result, whatever their
wording, length or order. Answers that disagree on the substance belong to different groups.
Every voter number must appear in exactly one group. For each group give the voter whose
answer best represents it and a short label (a few words) naming what its answers say. Do not
judge which group is right and do not write a new answer."""


def section(title: str, body: str) -> str:
    return f"## {title}\n{(body or '').strip() or '(none)'}\n"


def voter_messages(task: str, earlier: list[dict[str, Any]] | None = None,
                   feedback: str = "") -> list[dict[str, str]]:
    """A voter's call: the task, and from round 2 on the previous round's groups and the
    person's feedback (``earlier``: groups with ``label``, ``answer`` and ``size``)."""
    parts = [section(TASK, task)]
    if earlier:
        blocks = "\n\n".join(f"### {GROUP} {n}: {g['label']} ({g['size']} voter"
                             f"{'s' if g['size'] != 1 else ''})\n{g['answer']}"
                             for n, g in enumerate(earlier, 1))
        parts.append(section(EARLIER, blocks))
    if feedback.strip():
        parts.append(section(FEEDBACK, feedback))
    return [{"role": "system", "content": VOTER_SYSTEM},
            {"role": "user", "content": "\n".join(parts)}]


def aggregator_messages(task: str, answers: dict[int, str]) -> list[dict[str, str]]:
    """The aggregator's call: the task and each voter's answer under ``### Voter N``."""
    blocks = "\n\n".join(f"### {VOTER} {i}\n{text}" for i, text in sorted(answers.items()))
    return [{"role": "system", "content": AGGREGATOR_SYSTEM},
            {"role": "user", "content": section(TASK, task) + "\n" + section(ANSWERS, blocks)}]
