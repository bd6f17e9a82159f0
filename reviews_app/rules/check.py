"""The review rules a change must follow, and their deterministic half.

Rules come from two places (both in the review's options):
- ``rules``: the repository's ``.quorum.toml`` ``[[rules]]`` (``{"text", "scope",
  "path_glob", "severity"}``, see ``hosting/repo_config.py``); they have no id of their own,
  so the n-th is ``toml:n``;
- ``review_rules``: the team's rules kept in the database (``{"id": "rule:<pk>", "title",
  "text", "path_glob", "severity", "pattern", "source"}``); ``pattern`` is an optional regular
  expression that an added line breaking the rule matches.

A rule applies to a change when its path glob matches one of the change's files (the glob
matching of ``.quorum.toml``). A rule's pattern is untrusted: it is compiled by RE2 (never by
Python's backtracking ``re``), so matching takes time linear in the line whatever its shape;
patterns RE2 cannot run (backreferences, lookaround) are refused with the reason. It reads
added lines capped in length, within an overall time budget.
"""

from __future__ import annotations

import re
import time

from ..pipeline.diffs.hunks import added_lines
from ..pipeline.schema import SEVERITIES

MAX_RULES = 100
MAX_TEXT = 2000
MAX_TITLE = 120
MAX_PATTERN = 300
MAX_LINE = 300  # characters of a line a pattern reads
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
# A rule's pattern is written by any signed-in user (or suggested by a model), so it is matched
# with RE2, whose time is linear in the line it reads: no pattern can backtrack. Python's ``re``
# is never used on it (it would hold the interpreter lock for as long as it backtracks:
# ``(a?){40}a{40}`` on a line of 40 a's takes hours). Patterns RE2 cannot run (backreferences,
# lookaround, possessive quantifiers) are refused, with the reason in words.
RE2_MAX_MEM = 8 << 20  # bytes for one compiled pattern
_RE2_UNSUPPORTED = (
    ("(?=", "lookahead (?=…)"), ("(?!", "negative lookahead (?!…)"),
    ("(?<=", "lookbehind (?<=…)"), ("(?<!", "negative lookbehind (?<!…)"),
    ("(?>", "atomic groups (?>…)"), ("(?P", "named backreferences (?P=name)"),
    ("(?#", "comments (?#…)"), ("(?(", "conditionals (?(…)…|…)"),
)
_RE2_WHY = "the matcher runs in time linear in the line and has nothing that needs backtracking"


def _parser():
    """The standard library's own regex parser (Python 3.11+), to read a pattern's shape."""
    from re import _constants as c
    from re import _parser as p

    return p, c


def _shape_problem(pattern: str) -> str:
    """What in ``pattern``'s shape would make a backtracking matcher slow, or "". RE2 runs
    every shape in linear time, so this refuses nothing: it only explains a pattern RE2 finds
    too large to compile (a repetition inside a repetition usually is why)."""
    p, c = _parser()
    repeats = (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None))

    def walk(items, outer: int) -> str:
        for op, av in items:
            if op in repeats:
                _, hi, sub = av
                wide = hi == c.MAXREPEAT or hi > 20
                if hi > 1 and outer > 1 and (wide or outer > 20):
                    return "it repeats a repetition, like (a+)+ or (x{1,30}){1,30}"
                if why := walk(sub, max(outer, hi)):
                    return why
            elif op == c.BRANCH:
                for sub in av[1]:
                    if why := walk(sub, outer):
                        return why
            elif op == c.SUBPATTERN:
                if why := walk(av[-1], outer):
                    return why
        return ""

    try:
        return walk(p.parse(pattern), 1)
    except Exception:  # noqa: BLE001 - RE2 is the judge; this only adds words
        return ""


def re2_refusal(pattern: str, exc: Exception) -> str:
    """RE2's reason for refusing ``pattern``, in words for the person who wrote it (the
    sentence continues "The pattern …")."""
    raw = exc.args[0] if exc.args else str(exc)
    reason = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if reason.startswith("invalid perl operator: "):
        op = reason.removeprefix("invalid perl operator: ")
        for prefix, name in _RE2_UNSUPPORTED:
            if op.startswith(prefix):
                return f"uses {name}, which review rules do not support ({_RE2_WHY})"
    if m := re.match(r"invalid escape sequence: \\([1-9]|k|g)", reason):
        return (f"refers back to a group (\\{m.group(1)}…), which review rules do not support "
                f"({_RE2_WHY})")
    if reason.startswith("bad repetition operator: ") and reason.endswith("+"):
        return (f"uses a possessive quantifier ({reason[25:]}), which review rules do not "
                f"support ({_RE2_WHY})")
    if reason.startswith("invalid repetition size") or "too large" in reason or \
            "pattern too large" in reason:
        shape = _shape_problem(pattern)
        return ("is too large to compile" + (f": {shape}" if shape else "")
                + "; repeat less")
    return f"is not a valid regular expression ({_clean(reason, 120)})"


def _re2_options():
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print each refusal on standard error
    options.max_mem = RE2_MAX_MEM
    return options


def compile_pattern(pattern: str):
    """The pattern compiled by RE2 (``search(text)`` like ``re``), or None and why it is not
    used (the sentence continues "The pattern …")."""
    import re2

    if not isinstance(pattern, str) or not pattern.strip():
        return None, "is empty"
    if len(pattern) > MAX_PATTERN:
        return None, f"is longer than {MAX_PATTERN} characters"
    if "\x00" in pattern:
        return None, "contains a NUL character"
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in pattern):
        return None, "contains characters that are not valid Unicode"
    try:
        return re2.compile(pattern, _re2_options()), ""
    except re2.error as exc:
        return None, re2_refusal(pattern, exc)
    except (TypeError, ValueError, OverflowError) as exc:
        return None, f"is not a valid regular expression ({_clean(str(exc), 120)})"


class Budget:
    """The time every pattern of one review may spend, checked between lines."""

    def __init__(self, seconds: float = TIME_BUDGET) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> bool:
        return time.monotonic() < self.deadline


def pattern_hits(compiled, files: list[dict], paths: list[str],
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
