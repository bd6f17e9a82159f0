"""Team memories in the review pipeline (pure: no Django).

A memory is a short, path-scoped rule a person approved ("in `tests/**`, asserts are
intended"), handed to the pipeline as a dict ``{"id", "path_glob", "text", "match",
"effect"}``. It works twice:

- the reviewers read the memories that match the files of their prompt (``prompt_section``);
- at synthesis, ``apply`` drops (effect ``drop``) or downgrades to ``info`` (effect
  ``downgrade``) each kept finding in a matching file that matches the memory's ``match``:
  ``{"rules": [...]}`` (any analyzer rule in common) or ``{"category", "title"}`` (same
  category and the same normalised title). A memory without a ``match`` only informs the
  reviewers. So a memory works the same with the offline model, which reads no prompt text.

Globs are fnmatch-like on POSIX paths relative to the repository root: ``*`` and ``?`` stay
within one folder, ``**`` spans folders (``tests/**`` is everything under ``tests/``,
``**/conftest.py`` is every ``conftest.py``), ``[abc]`` / ``[!abc]`` are character classes.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ..pipeline.schema import SEVERITY_RANK

MAX_GLOB = 300
MAX_TEXT = 1000
DOWNGRADE_TO = "info"
EFFECTS = ("drop", "downgrade")
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# --- globs ----------------------------------------------------------------------------------------
def glob_error(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable path glob, or None when it is."""
    if not isinstance(pattern, str) or not pattern.strip():
        return "Give a path glob, e.g. tests/** or src/app/*.py (** alone is every file)."
    if len(pattern) > MAX_GLOB:
        return f"The path glob is too long: keep it under {MAX_GLOB} characters."
    if _CONTROL.search(pattern):
        return "The path glob contains a control character (a NUL byte or a line break)."
    if pattern.startswith("/") or "\\" in pattern or re.match(r"^[A-Za-z]:", pattern):
        return "The path glob is relative to the repository root: no leading /, no backslash."
    if any(part in (".", "..") for part in pattern.split("/")):
        return "The path glob cannot contain . or .. folders."
    try:
        _compile(pattern)
    except re.error:
        return "The path glob could not be read."
    return None


@lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern:
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "]") else i + 1)
            if end < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1:end]
            neg = body.startswith("!")
            body = body[1:] if neg else body
            body = re.sub(r"([\\^\[\]&~|])", r"\\\1", body)
            out.append(f"[{'^/' if neg else ''}{body}]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    """Whether ``path`` (relative, POSIX) matches ``pattern``; an unusable glob matches
    nothing."""
    if not isinstance(path, str) or glob_error(pattern):
        return False
    return bool(_compile(pattern).match(path.lstrip("/")))


def escape(path: str) -> str:
    """``path`` as a glob matching exactly itself (file names may contain * ? [ ])."""
    return re.sub(r"([*?\[\]])", r"[\1]", path)


def glob_for(path: str) -> str:
    """The glob a suggestion from a finding in ``path`` gets: its folder and everything under
    it (``app/api/views.py`` -> ``app/api/**``), or the file itself at the top level."""
    path = (path or "").strip().lstrip("/")
    folder, _, name = path.rpartition("/")
    return f"{escape(folder)}/**" if folder else escape(name)


# --- matching findings ------------------------------------------------------------------------
def normal_title(title: str) -> str:
    return _SPACE.sub(" ", str(title or "")).strip().lower().rstrip(".")[:200]


def match_for(finding: dict) -> dict:
    """What a suggestion from ``finding`` matches: its analyzer rules, else its category and
    normalised title."""
    rules = sorted({str(r) for r in finding.get("rules") or () if r})
    if rules:
        return {"rules": rules}
    return {"category": str(finding.get("category") or ""),
            "title": normal_title(finding.get("title") or "")}


def matches(finding: dict, memory: dict) -> bool:
    """Whether ``memory``'s glob and ``match`` both cover ``finding``."""
    match = memory.get("match") or {}
    if not isinstance(match, dict) or not glob_match(memory.get("path_glob") or "",
                                                      finding.get("file") or ""):
        return False
    rules = match.get("rules") or match.get("rule") or []
    rules = [rules] if isinstance(rules, str) else rules
    if rules:
        return bool({str(r) for r in rules} & {str(r) for r in finding.get("rules") or ()})
    title, category = match.get("title"), match.get("category")
    if not title:
        return False  # a memory without a match only informs the reviewers
    return (normal_title(title) == normal_title(finding.get("title") or "")
            and (not category or category == finding.get("category")))


def for_paths(memories: list[dict] | None, paths) -> list[dict]:
    """The memories whose glob matches at least one of ``paths``."""
    paths = list(paths)
    return [m for m in memories or () if any(glob_match(m.get("path_glob") or "", p)
                                             for p in paths)]


# --- the reviewers' prompt ----------------------------------------------------------------------
def _one_line(text: str, n: int = MAX_TEXT) -> str:
    text = _SPACE.sub(" ", _CONTROL.sub(" ", str(text or ""))).strip()
    return text if len(text) <= n else text[:n - 1].rstrip() + "…"


def prompt_section(memories: list[dict] | None, paths) -> str:
    """The body of the reviewers' "Team memories" section for a prompt with these files, or
    "" when no memory matches them. One line each, so a memory's text cannot open a section
    of its own."""
    lines = [f"- #{m.get('id')} in `{_one_line(m.get('path_glob'), MAX_GLOB)}`: "
             f"{_one_line(m.get('text'))}" for m in for_paths(memories, paths)]
    if not lines:
        return ""
    return ("Your team decided these for the files below. Do not report what a memory says "
            "is fine; report everything else as usual.\n" + "\n".join(lines))


# --- applying them at synthesis -----------------------------------------------------------------
def apply(findings: list[dict[str, Any]], memories: list[dict] | None) -> int:
    """Drop or downgrade, in place, each kept finding a memory covers (the first memory that
    covers it decides); stamp ``f["memories"]``. Returns how many findings changed."""
    changed = 0
    for f in findings:
        if f.get("status") != "kept":
            continue
        for m in memories or ():
            if not matches(f, m):
                continue
            text = _one_line(m.get("text"), 300)
            if m.get("effect") == "downgrade":
                if SEVERITY_RANK.get(f.get("severity"), 0) >= SEVERITY_RANK[DOWNGRADE_TO]:
                    continue  # already as low as a memory puts it
                f.setdefault("history", []).append(
                    f"downgraded from {f['severity']} to {DOWNGRADE_TO} by memory "
                    f"#{m.get('id')}: {text}")
                f["severity"] = DOWNGRADE_TO
                effect = "downgraded"
            else:
                f["status"] = "dropped"
                f["drop_reason"] = f"memory #{m.get('id')}: {text}"
                effect = "dropped"
            f["memories"] = [*(f.get("memories") or []), {"id": m.get("id"), "effect": effect}]
            changed += 1
            break
    return changed
