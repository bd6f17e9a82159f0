"""What every export format shares: which findings to export and in what order, the counts,
the review's verdict/source/triage fields, and the hygiene of untrusted plain text.

Pure Python on the plain ``review`` dict (no Django)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from ..schema import SEVERITIES, SEVERITY_RANK

# Invisible characters that reorder or hide text (bidi controls, zero-width joiners...).
HIDDEN = frozenset("\u061c\u200b\u200c\u200d\u200e\u200f\u2060\ufeff") | frozenset(
    chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
)


def is_hidden(char: str) -> bool:
    return char in HIDDEN or unicodedata.category(char) == "Cc"


def plain(value) -> str:
    """Untrusted text for a plain-text field: characters that hide or reorder text, and
    control characters other than line breaks and tabs, become U+FFFD."""
    text = str(value if value is not None else "").replace("\r\n", "\n").strip()
    return "".join("\ufffd" if is_hidden(c) and c not in "\n\t" else c for c in text)


def as_line(value) -> int | None:
    """A usable line number, or None (bools and non-integers are not line numbers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def also_at(finding: dict) -> list[dict]:
    """The other places of a clustered finding (``locations`` lists every place, its own
    first or anywhere): each a dict with ``file``, ``line`` and ``end_line``, untrusted like
    the rest (the exporters escape them)."""
    here = (finding.get("file"), as_line(finding.get("line")))
    out = []
    for loc in finding.get("locations") or ():
        if not isinstance(loc, dict) or not isinstance(loc.get("file"), str):
            continue
        if (loc["file"], as_line(loc.get("line"))) == here:
            continue
        out.append({"file": loc["file"], "line": as_line(loc.get("line")),
                    "end_line": as_line(loc.get("end_line"))})
    return out


def places(finding: dict) -> list[dict]:
    """Every place a finding holds, its own first: ``{"file", "line", "end_line", "key"}``
    (``key``: the finding that was found there and clustered into this one; "" for its own
    place or when unknown). A finding that clustered nothing has one place."""
    own = {"file": str(finding.get("file") or ""), "line": as_line(finding.get("line")),
           "end_line": as_line(finding.get("end_line")), "key": ""}
    keys = {}
    for loc in finding.get("locations") or ():
        if isinstance(loc, dict) and isinstance(loc.get("file"), str):
            keys.setdefault((loc["file"], as_line(loc.get("line"))), str(loc.get("key") or ""))
    out = [own]
    for other in also_at(finding):
        key = keys.get((other["file"], other["line"]), "")
        out.append({**other, "key": key if key != finding.get("key") else ""})
    return out


def _sort_key(finding: dict):
    severity = finding.get("severity")
    rank = SEVERITY_RANK.get(severity, len(SEVERITIES)) if isinstance(severity, str) else 99
    line = as_line(finding.get("line"))
    return (rank, str(finding.get("file") or ""), line if line is not None else 0,
            str(finding.get("key") or ""))


def ordered(findings: Iterable[dict] | None) -> list[dict]:
    return sorted((f for f in findings or () if isinstance(f, dict)), key=_sort_key)


def select_findings(review: dict, only_accepted: bool) -> list[dict]:
    """The kept findings to export, strongest severity first, then by file and line.

    With ``only_accepted`` only findings whose decision is ``"accepted"`` are returned. The
    dicts are the review's own (not copies); the list is new.
    """
    findings = ordered(review.get("findings"))
    if only_accepted:
        findings = [f for f in findings if f.get("decision") == "accepted"]
    return findings


def severity_of(finding: dict) -> str | None:
    """The finding's severity if it is a string (other values cannot be looked up)."""
    severity = finding.get("severity")
    return severity if isinstance(severity, str) else None


def severity_counts(findings: list[dict]) -> dict[str, int]:
    counts = dict.fromkeys(SEVERITIES, 0)
    for finding in findings:
        severity = severity_of(finding)
        if severity in counts:
            counts[severity] += 1
    return counts


def verdict_fields(review: dict) -> dict:
    verdict = review.get("verdict") or {}
    return {
        "proposed": verdict.get("proposed"),
        "final": verdict.get("final"),
        "decided_by": verdict.get("decided_by"),
        "decided_at": verdict.get("decided_at"),
        "version": verdict.get("version"),
        "override_reason": verdict.get("override_reason") or "",
        "by_rules": verdict.get("by_rules"),
    }


def triage_text(review: dict) -> str:
    """Which triage the export shows: a finalised version, or a draft that may still change."""
    verdict = verdict_fields(review)
    if not (verdict["final"] and verdict["version"]):
        return "draft: not finalised"
    text = f"triage version {verdict['version']}, finalised"
    if verdict["decided_by"]:
        text += f" by {verdict['decided_by']}"
    if verdict["decided_at"]:
        text += f" at {verdict['decided_at']}"
    return text


def source_fields(review: dict) -> dict:
    source = review.get("source") or {}
    return {"kind": source.get("kind") or "", "label": source.get("label") or ""}


def _tools_of(finding: dict) -> set[str]:
    """The analyzers whose results a finding rests on ("bandit+ruff" is both)."""
    return {t for e in finding.get("evidence") or () if isinstance(e, dict)
            for t in str(e.get("tool") or "").split("+") if t}


def analyzers_ran(review: dict, findings: list[dict]) -> list[dict] | None:
    """The analyzers the review's analysis record says ran (``review["analyzers"]``: id,
    name, version, imported), each with how many of ``findings`` rest on its results, most
    first; None for a review with no such record (nothing is made up for it)."""
    ran = review.get("analyzers")
    if not isinstance(ran, list):
        return None
    out = []
    for a in ran:
        if not isinstance(a, dict) or not a.get("name"):
            continue
        ident = str(a.get("id") or a["name"])
        out.append({"name": str(a["name"]), "version": str(a.get("version") or ""),
                    "imported": bool(a.get("imported")),
                    "findings": sum(1 for f in findings if ident in _tools_of(f))})
    return sorted(out, key=lambda a: -a["findings"])


def notes_for(review: dict, findings: list[dict], only_accepted: bool) -> list[str]:
    """The review's synthesis notes to export. An accepted-only export leaves out every note
    that names a finding it does not show (an amendment to a rejected finding, a merge of a
    dropped one): it would speak of findings the reader cannot see."""
    notes = [str(n) for n in review.get("notes") or ()]
    if not only_accepted:
        return notes
    shown = {f.get("key") for f in findings}
    hidden = sorted({str(f["key"]) for f in [*(review.get("findings") or ()),
                                             *(review.get("dropped") or ())]
                     if isinstance(f, dict) and f.get("key") and f.get("key") not in shown},
                    key=len, reverse=True)
    if not hidden:
        return notes
    named = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, hidden)) + r")(?![\w-])")
    return [n for n in notes if not named.search(n)]
