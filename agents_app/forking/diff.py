"""Two or more runs side by side, aligned by stage (issue 33). Plain Python, no Django: the
caller reads each run's stages (``StageRecord``: the stage, its model calls, what it left in
the run's state, the decision at its gate) and this module aligns them, diffs each pair and
marks the first stage where they part.

Alignment is by stage name in order (``difflib.SequenceMatcher`` over the names), so a run
that took an extra step or round shows a stage the other lacks instead of every later stage
shifted. Two aligned stages are *the same* when their calls asked the same things and got the
same answers, their outputs are equal and their decisions are equal; the first pair that is
not is the divergence.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

MAX_DIFF_LINES = 400   # a diff longer than this is cut, saying how much was left out
MAX_TEXT = 200_000     # characters of one side compared at most


@dataclass
class CallRecord:
    key: str
    role: str
    model: str
    prompt: str            # the call's messages as one text (roles marked)
    response: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: int = 0
    replayed: bool = False  # served from another run's journal (no provider call, no cost)
    error: str = ""


@dataclass
class StageRecord:
    seq: int
    stage: str             # the engine's stage name ("plan", "step:1:0", …)
    label: str             # in words
    calls: list[CallRecord] = field(default_factory=list)
    output: Any = None     # what the stage left for the next (the pattern's view of it)
    decision: dict | None = None  # at a gate: what the person (or the policy) decided

    @property
    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.calls)

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.calls)

    @property
    def latency_ms(self) -> int:
        return sum(c.latency_ms for c in self.calls)


@dataclass
class TextDiff:
    same: bool
    lines: list[str]       # unified diff lines ("" when the same)
    cut: int = 0           # lines left out past MAX_DIFF_LINES


@dataclass
class StageDiff:
    left: StageRecord | None
    right: StageRecord | None
    prompts: TextDiff
    outputs: TextDiff
    responses: TextDiff
    decisions: TextDiff
    tokens_delta: int
    cost_delta: float
    latency_delta_ms: int

    @property
    def same(self) -> bool:
        return (self.left is not None and self.right is not None and self.prompts.same
                and self.outputs.same and self.responses.same and self.decisions.same)

    @property
    def name(self) -> str:
        side = self.left or self.right
        return side.label if side else ""


def as_text(value: Any) -> str:
    """A value as comparable text: strings as they are, anything else as indented JSON with
    sorted keys (so the same data always reads the same)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value[:MAX_TEXT]
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str)[:MAX_TEXT]


def text_diff(a: str, b: str, left: str = "left", right: str = "right") -> TextDiff:
    if a == b:
        return TextDiff(True, [])
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), left, right, n=2,
                                      lineterm=""))
    cut = max(0, len(lines) - MAX_DIFF_LINES)
    return TextDiff(False, lines[:MAX_DIFF_LINES], cut)


def _calls_text(stage: StageRecord | None, what: str) -> str:
    if stage is None:
        return ""
    parts = []
    for c in stage.calls:
        body = c.prompt if what == "prompt" else (c.error or c.response)
        parts.append(f"### {c.key} ({c.role}, {c.model})\n{body}")
    return "\n".join(parts)


def align(a: list[StageRecord], b: list[StageRecord]
          ) -> list[tuple[StageRecord | None, StageRecord | None]]:
    """The stages of two runs paired by name in order; a stage only one run has is paired
    with None."""
    names_a, names_b = [s.stage for s in a], [s.stage for s in b]
    out: list[tuple[StageRecord | None, StageRecord | None]] = []
    matcher = difflib.SequenceMatcher(a=names_a, b=names_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += list(zip(a[i1:i2], b[j1:j2], strict=True))
            continue
        # replaced or inserted: pair what can be paired by position, the rest alone
        left, right = a[i1:i2], b[j1:j2]
        for k in range(max(len(left), len(right))):
            out.append((left[k] if k < len(left) else None,
                        right[k] if k < len(right) else None))
    return out


def stage_diff(left: StageRecord | None, right: StageRecord | None,
               names: tuple[str, str] = ("left", "right")) -> StageDiff:
    def pair(get) -> TextDiff:
        return text_diff(get(left), get(right), *names)

    return StageDiff(
        left, right,
        prompts=pair(lambda s: _calls_text(s, "prompt")),
        responses=pair(lambda s: _calls_text(s, "response")),
        outputs=pair(lambda s: as_text(s.output) if s else ""),
        # What was decided, not how: a person's approval and the same approval reused by a
        # fork's gate policy are the same decision (how is shown beside each side).
        decisions=pair(lambda s: as_text(_what(s.decision)) if s else ""),
        tokens_delta=(right.tokens if right else 0) - (left.tokens if left else 0),
        cost_delta=(right.cost if right else 0.0) - (left.cost if left else 0.0),
        latency_delta_ms=(right.latency_ms if right else 0) - (left.latency_ms if left else 0))


def _what(decision: dict | None) -> dict | None:
    return {k: v for k, v in decision.items() if k != "how"} if decision else decision


@dataclass
class RunDiff:
    rows: list[StageDiff]
    divergence: int | None   # index of the first row that is not the same (None: all are)

    @property
    def first_divergent(self) -> StageDiff | None:
        return self.rows[self.divergence] if self.divergence is not None else None


def compare(a: list[StageRecord], b: list[StageRecord],
            names: tuple[str, str] = ("left", "right")) -> RunDiff:
    rows = [stage_diff(x, y, names) for x, y in align(a, b)]
    first = next((i for i, r in enumerate(rows) if not r.same), None)
    return RunDiff(rows, first)


@dataclass
class Column:
    """One stage across several runs: each run's stage (or None) and whether they agree."""

    name: str
    stages: list[StageRecord | None]
    same: bool


def side_by_side(runs: list[list[StageRecord]]) -> tuple[list[Column], int | None]:
    """Three to six runs aligned on the first: each row a stage of the first run (or a stage
    only some others have), with each run's stage and whether all agree; and the index of the
    first row where they do not."""
    if not runs:
        return [], None
    base = runs[0]
    rows: dict[int, list[StageRecord | None]] = {}
    extra: list[tuple[int, int, StageRecord]] = []  # (after base row, run, stage)
    for r, other in enumerate(runs):
        pos = -1
        for x, y in align(base, other):
            if x is not None:
                pos = base.index(x)
                rows.setdefault(pos, [None] * len(runs))[r] = y
            elif y is not None:
                extra.append((pos, r, y))
    columns: list[Column] = []
    for i, stage in enumerate(base):
        cells = rows.get(i, [None] * len(runs))
        columns.append(_column(stage.label, cells))
        for _after, r, y in [e for e in extra if e[0] == i]:
            cells = [None] * len(runs)
            cells[r] = y
            columns.append(_column(y.label, cells))
    for _after, r, y in [e for e in extra if e[0] == -1]:
        cells = [None] * len(runs)
        cells[r] = y
        columns.insert(0, _column(y.label, cells))
    first = next((i for i, c in enumerate(columns) if not c.same), None)
    return columns, first


def _column(name: str, cells: list[StageRecord | None]) -> Column:
    present = [c for c in cells if c is not None]
    same = len(present) == len(cells) and all(
        stage_diff(present[0], c).same for c in present[1:])
    return Column(name, cells, same)
