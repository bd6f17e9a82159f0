"""The review rules a change must follow, and their deterministic half.

Rules come from two places (both in the review's options):
- ``rules``: the repository's ``.quorum.toml`` ``[[rules]]`` (``{"text", "scope",
  "path_glob", "severity"}``, see ``hosting/repo_config.py``); they have no id of their own,
  so the n-th is ``toml:n``;
- ``review_rules``: the team's rules kept in the database (``{"id": "rule:<pk>", "title",
  "text", "path_glob", "severity", "pattern", "source"}``); ``pattern`` is an optional regular
  expression that an added line breaking the rule matches.

A rule applies to a change when its path glob matches one of the change's files (the glob
matching of ``.quorum.toml``). A rule's pattern is untrusted: it is compiled only when short,
valid and free of the shapes that make a backtracking regex slow (a repetition inside a
repetition, alternatives inside an unbounded repetition, more than two unbounded
repetitions), and it reads added lines capped in length, within an overall time budget.
"""

from __future__ import annotations

import re
import time

from .diffs.hunks import added_lines
from .schema import SEVERITIES

MAX_RULES = 100
MAX_TEXT = 2000
MAX_TITLE = 120
MAX_PATTERN = 300
MAX_LINE = 300  # characters of a line a pattern reads
MAX_UNBOUNDED = 2  # unbounded repetitions in one pattern
MAX_HITS = 30  # per rule
TIME_BUDGET = 2.0  # seconds for every pattern of a review
TOML = ".quorum.toml"


def _clean(value, n: int) -> str:
    text = " ".join(str(value or "").split()) if isinstance(value, str) else ""
    return text if len(text) <= n else text[:n - 1].rstrip() + "…"


def _title_from(text: str) -> str:
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return _clean(first, 80)


def normalise(options: dict) -> list[dict]:
    """Every rule of the review, in one shape: ``{"id", "title", "text", "path_glob",
    "severity", "pattern", "source"}``. Items that are not rules (no text) are left out."""
    out: list[dict] = []
    toml = [r for r in options.get("rules") or () if isinstance(r, dict)]
    for i, r in enumerate(toml, 1):
        text = _clean(r.get("text"), MAX_TEXT)
        if text:
            out.append({"id": f"toml:{i}", "title": _title_from(text), "text": text,
                        "path_glob": str(r.get("path_glob") or "**"),
                        "severity": _severity(r.get("severity")), "pattern": "",
                        "source": TOML})
    for r in options.get("review_rules") or ():
        if not isinstance(r, dict):
            continue
        text = _clean(r.get("text"), MAX_TEXT)
        if not text or not str(r.get("id") or "").strip():
            continue
        pattern = r.get("pattern")
        out.append({"id": _clean(r["id"], 40), "title": _clean(r.get("title"), MAX_TITLE)
                    or _title_from(text), "text": text,
                    "path_glob": str(r.get("path_glob") or "**"),
                    "severity": _severity(r.get("severity")),
                    "pattern": pattern if isinstance(pattern, str) else "",
                    "source": _clean(r.get("source"), 20) or "manual"})
    return out[:MAX_RULES]


def _severity(value) -> str:
    v = value.strip().lower() if isinstance(value, str) else ""
    return v if v in SEVERITIES else "medium"


def applicable(rules: list[dict], paths: list[str]) -> list[tuple[dict, list[str]]]:
    """The rules whose glob matches at least one of ``paths``, each with those paths."""
    from reviews_app.hosting.repo_config import glob_match

    out = []
    for rule in rules:
        mine = [p for p in paths if glob_match(rule["path_glob"], p)]
        if mine:
            out.append((rule, mine))
    return out


def label(rule: dict) -> str:
    """How a rule is named in notes: “title” (rule #3) or (.quorum.toml rule 2)."""
    rid = rule["id"]
    where = (f"{TOML} rule {rid.split(':', 1)[1]}" if rid.startswith("toml:") else
             f"rule #{rid.split(':', 1)[1]}" if rid.startswith("rule:") else rid)
    return f"\u201c{rule['title']}\u201d ({where})"


# --- patterns ----------------------------------------------------------------------------------
def _parser():
    """The standard library's own regex parser (Python 3.11+), to read a pattern's shape."""
    from re import _constants as c
    from re import _parser as p

    return p, c


def _shape_problem(pattern: str) -> str:
    """Why ``pattern`` could backtrack for too long, or ""."""
    p, c = _parser()
    repeats = (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None))
    unbounded = 0

    def walk(items, outer: int) -> str:
        nonlocal unbounded
        for op, av in items:
            if op in repeats:
                _, hi, sub = av
                wide = hi == c.MAXREPEAT or hi > 20
                unbounded += wide
                if hi > 1 and outer > 1 and (wide or outer > 20):
                    return "repeats a repetition, like (a+)+"
                if why := walk(sub, max(outer, hi)):
                    return why
            elif op == c.BRANCH:
                if outer > 20:
                    return "has alternatives inside an unbounded repetition, like (a|ab)*"
                for sub in av[1]:
                    if why := walk(sub, outer):
                        return why
            elif op == c.SUBPATTERN:
                if why := walk(av[-1], outer):
                    return why
            elif op in (c.ASSERT, c.ASSERT_NOT):
                if why := walk(av[1], outer):
                    return why
            elif op in (c.GROUPREF, c.GROUPREF_EXISTS, getattr(c, "GROUPREF_IGNORE", None)):
                return "refers back to a group"
        return ""

    try:
        why = walk(p.parse(pattern), 1)
    except Exception as exc:  # the stdlib parser is the judge of validity below
        return f"could not be read ({type(exc).__name__})"
    if not why and unbounded > MAX_UNBOUNDED:
        why = f"has more than {MAX_UNBOUNDED} unbounded repetitions (*, + or {{n,}})"
    return why


def compile_pattern(pattern: str) -> tuple[re.Pattern[str] | None, str]:
    """The compiled pattern, or None and why it is not used."""
    if not pattern.strip():
        return None, "is empty"
    if len(pattern) > MAX_PATTERN:
        return None, f"is longer than {MAX_PATTERN} characters"
    if "\x00" in pattern:
        return None, "contains a NUL character"
    try:
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return None, f"is not a valid regular expression ({_clean(str(exc), 120)})"
    if why := _shape_problem(pattern):
        return None, f"{why}, which can make matching take far too long"
    return compiled, ""


class Budget:
    """The time every pattern of one review may spend, checked between lines."""

    def __init__(self, seconds: float = TIME_BUDGET) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> bool:
        return time.monotonic() < self.deadline


def pattern_hits(compiled: re.Pattern[str], files: list[dict], paths: list[str],
                 budget: Budget) -> tuple[dict[str, list[int]], bool]:
    """``{path: [line, …]}`` of the added lines of ``paths`` that ``compiled`` matches (at most
    ``MAX_HITS`` in all), and whether every line was read before the budget ran out."""
    wanted = set(paths)
    hits: dict[str, list[int]] = {}
    count = 0
    for f in files:
        if f["path"] not in wanted:
            continue
        for n, text in added_lines(f):
            if not budget.left():
                return hits, False
            if compiled.search(text[:MAX_LINE]):
                hits.setdefault(f["path"], []).append(n)
                count += 1
                if count >= MAX_HITS:
                    return hits, True
    return hits, True
