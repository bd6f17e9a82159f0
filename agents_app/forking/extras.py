"""What a comparison adds for some kinds of run (issue 33): beyond the stages, the code two
change runs left on their branches, and the findings each code review has that the others
lack. Each kind registers a function ``(runs) -> Extra | None``; a kind that does not apply
returns None, and one that cannot say (a repository moved, a branch deleted) says so in its
note instead of showing nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .diff import MAX_DIFF_LINES

__all__ = ["Extra", "extras", "register"]


@dataclass
class Extra:
    key: str                       # an id for the page ("code", "findings")
    title: str
    note: str = ""                 # what was compared, or why it could not be
    only: list[tuple[str, list[str]]] = field(default_factory=list)  # (run, what only it has)
    diff_lines: list[str] = field(default_factory=list)  # a unified diff, when there is one
    cut: int = 0                   # diff lines left out past MAX_DIFF_LINES


EXTRAS: list[Callable[[list], Extra | None]] = []


def register(fn: Callable[[list], Extra | None]) -> Callable[[list], Extra | None]:
    if fn not in EXTRAS:
        EXTRAS.append(fn)
    return fn


def extras(runs: list) -> list[Extra]:
    out = []
    for fn in EXTRAS:
        extra = fn(runs)
        if extra is not None:
            out.append(extra)
    return out


def clip(lines: list[str]) -> tuple[list[str], int]:
    if len(lines) <= MAX_DIFF_LINES:
        return lines, 0
    return lines[:MAX_DIFF_LINES], len(lines) - MAX_DIFF_LINES


def only_each(labels: list[str], sets: list[dict[str, str]]) -> list[tuple[str, list[str]]]:
    """For each run, the items (key → words) no other compared run has."""
    out = []
    for i, (label, items) in enumerate(zip(labels, sets, strict=True)):
        others = set().union(*(s.keys() for j, s in enumerate(sets) if j != i))
        out.append((label, [words for key, words in items.items() if key not in others]))
    return out
