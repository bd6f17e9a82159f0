"""The JSON export of a finished review.

JSON export structure (``schema_version`` 1)::

    {
      "schema_version": 1,
      "only_accepted": bool,                # True: only findings marked "accepted"
      "review": {"id", "title", "tool_version", "source": {"kind", "label"}, "created_at",
                 "status", "offline", "verdict": {"proposed", "final", "decided_by",
                 "decided_at", "version", "override_reason", "by_rules"},
                 "triage",                  # which version: "triage version N, finalised
                 "summary", "notes": [str, ...],   # by X at T" or "draft: not finalised"
                 "analyzers": [{"name", "version", "imported"}, ...]},
      "counts": {"critical": n, "high": n, "medium": n, "low": n, "info": n},
      "findings": [FINDING, ...],           # strongest severity first, then file, then line
      "dropped": [FINDING + "drop_reason"], # absent when only_accepted
      "coverage": [{"path", "reason", "detail", "reviewed"}, ...],
      "reviewers": {name: {"status", "error", "model", "findings", "tokens", "cost_usd"}},
      "totals": {"tokens", "cost_usd"}
    }

    FINDING = {"key", "category", "severity", "file", "line", "end_line", "locations",
               "title", "description", "suggestion", "confidence", "reviewers", "evidence",
               "decision", "decided_by", "decided_at", "comment", "history", "duplicate_of"}
    locations: every place the finding holds, its own (file, line) first:
               [{"file", "line", "end_line", "key"}, ...]; a cluster lists each place it
               folded (``key``: the finding found there, whose dropped record says
               "Clustered into …"; "" for the finding's own place)
    evidence item = {"tool", "rule", "url"}  # tool "ruff"/"bandit"/"bandit+ruff"; "model"
                                             # when no analyzer reported the rule in this run
    history: how reflection changed the finding; duplicate_of: the key a dropped duplicate
    repeats ("" otherwise)
    notes: with only_accepted, the notes that name a finding not exported are left out
    analyzers: those the review's analysis record says ran ([] when it has none), imported
    SARIF tools marked ``imported``

Every key listed is always present (``None``, ``""``, ``[]`` or ``{}`` when unknown).
"""

from __future__ import annotations

import json

from .common import (
    notes_for,
    ordered,
    places,
    select_findings,
    severity_counts,
    source_fields,
    triage_text,
    verdict_fields,
)

JSON_SCHEMA_VERSION = 1

FINDING_FIELDS = (
    "key",
    "category",
    "severity",
    "file",
    "line",
    "end_line",
    "locations",
    "title",
    "description",
    "suggestion",
    "confidence",
    "reviewers",
    "evidence",
    "decision",
    "decided_by",
    "decided_at",
    "comment",
    "history",
    "duplicate_of",
)
_LIST_FIELDS = frozenset({"reviewers", "evidence", "history"})
_NULL_FIELDS = frozenset({"line", "end_line", "confidence", "decided_by", "decided_at"})


def _finding_record(finding: dict, *, dropped: bool = False) -> dict:
    record = {}
    for field in FINDING_FIELDS:
        if field == "locations":
            record[field] = places(finding)
            continue
        value = finding.get(field)
        if value is None and field not in _NULL_FIELDS:
            value = [] if field in _LIST_FIELDS else ""
        record[field] = value
    if dropped:
        record["drop_reason"] = finding.get("drop_reason") or ""
    return record


def _export_dict(review: dict, only_accepted: bool) -> dict:
    findings = select_findings(review, only_accepted)
    data = {
        "schema_version": JSON_SCHEMA_VERSION,
        "only_accepted": bool(only_accepted),
        "review": {
            "id": review.get("id"),
            "title": review.get("title") or "",
            "tool_version": review.get("tool_version") or "",
            "source": source_fields(review),
            "created_at": review.get("created_at"),
            "status": review.get("status") or "",
            "offline": bool(review.get("offline")),
            "verdict": verdict_fields(review),
            "triage": triage_text(review),
            "summary": review.get("summary") or "",
            "notes": notes_for(review, findings, only_accepted),
            "analyzers": [{"name": str(a["name"]), "version": str(a.get("version") or ""),
                           "imported": bool(a.get("imported"))}
                          for a in review.get("analyzers") or ()
                          if isinstance(a, dict) and a.get("name")],
        },
        "counts": severity_counts(findings),
        "findings": [_finding_record(f) for f in findings],
    }
    if not only_accepted:
        data["dropped"] = [_finding_record(f, dropped=True) for f in ordered(review.get("dropped"))]
    data["coverage"] = [
        {
            "path": item.get("path") or "",
            "reason": item.get("reason") or "",
            "detail": item.get("detail") or "",
            "reviewed": bool(item.get("reviewed")),
        }
        for item in review.get("coverage") or ()
        if isinstance(item, dict)
    ]
    data["reviewers"] = {
        str(name): {
            "status": info.get("status") or "",
            "error": info.get("error") or "",
            "model": info.get("model") or "",
            "findings": info.get("findings"),
            "tokens": info.get("tokens"),
            "cost_usd": info.get("cost_usd"),
        }
        for name, info in (review.get("reviewers") or {}).items()
        if isinstance(info, dict)
    }
    totals = review.get("totals") or {}
    data["totals"] = {"tokens": totals.get("tokens"), "cost_usd": totals.get("cost_usd")}
    return data


def to_json(review: dict, *, only_accepted: bool = False) -> str:
    """The review as pretty-printed JSON text (structure documented in the module docstring)."""
    return json.dumps(_export_dict(review, only_accepted), indent=2)
