"""The SARIF 2.1.0 export of a finished review.

File names become relative URI references that cannot climb out of the checkout (``\\`` counts
as ``/``, ``.``/``..`` segments are dropped), and characters that hide or reorder text are
replaced in messages. Rule ids come from ``sarif_rules``."""

from __future__ import annotations

from urllib.parse import quote

from .common import (
    also_at,
    as_line,
    ordered,
    plain,
    select_findings,
    severity_of,
    source_fields,
    triage_text,
    verdict_fields,
)
from .sarif_rules import Rules, category_slug

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
TOOL_NAME = "Quorum"

_SARIF_LEVELS = {
    "critical": "error",
    "high": "error",
    "medium": "warning",
    "low": "note",
    "info": "note",
}


def _artifact_uri(path) -> str:
    """A file name as a relative URI reference: no leading "/", no "." or ".." segments,
    unsafe characters (including ":") percent-encoded as UTF-8. A backslash separates
    segments too: a consumer on Windows would otherwise decode "..%5C" into a step up."""
    text = str(path or "").replace("\\", "/")
    segments = [s for s in text.split("/") if s not in ("", ".", "..")]
    return quote("/".join(segments), safe="/")


def _region(finding: dict) -> dict | None:
    line = as_line(finding.get("line"))
    if line is None or line < 1:
        return None
    region = {"startLine": line}
    end_line = as_line(finding.get("end_line"))
    if end_line is not None and end_line >= line:
        region["endLine"] = end_line
    return region


def _message_text(finding: dict) -> str:
    parts = [plain(finding.get("title")) or "Untitled finding"]
    description = plain(finding.get("description"))
    if description:
        parts.append(description)
    suggestion = plain(finding.get("suggestion"))
    if suggestion:
        parts.append(f"Suggestion: {suggestion}")
    return "\n\n".join(parts)


def _invocation(review: dict) -> dict:
    notifications = []
    for name, info in (review.get("reviewers") or {}).items():
        if not isinstance(info, dict):
            continue
        status = info.get("status") or ""
        if status in ("ok", ""):
            continue
        text = plain(f"Reviewer {name} {status}")
        if info.get("error"):
            text += f": {plain(info['error'])}"
        notifications.append(
            {
                "level": "note" if status == "skipped" else "error",
                "message": {"text": text},
                "properties": {"reviewer": str(name), "status": status},
            }
        )
    invocation = {"executionSuccessful": review.get("status") != "failed"}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    return invocation


def to_sarif(review: dict, *, only_accepted: bool = False) -> dict:
    """The review as a SARIF 2.1.0 log (a dict ready for ``json.dumps``).

    A finding that rests on an analyzer result has the analyzer's rule id (F401, B602), the
    rule defined once in a ``tool.extensions`` entry for that analyzer; a model's finding has
    a ``quorum/<category>/<kind>`` rule defined in ``tool.driver.rules``. The category is in
    each result's properties. Dropped findings are not results (the run's properties count
    them); results are ordered like ``select_findings``.
    """
    findings = select_findings(review, only_accepted)
    rules = Rules()
    results = []
    for finding in findings:
        category = category_slug(finding.get("category"))
        severity = finding.get("severity")
        result = {
            **rules.ref(finding, category),
            "level": _SARIF_LEVELS.get(severity_of(finding), "warning"),
            "message": {"text": _message_text(finding)},
        }
        uri = _artifact_uri(finding.get("file"))
        if uri:
            physical = {"artifactLocation": {"uri": uri}}
            region = _region(finding)
            if region:
                physical["region"] = region
            result["locations"] = [{"physicalLocation": physical}]
        # Every place a cluster holds is one of the result's locations (the problem is at
        # each; viewers that show one show the first, the finding's own) and, for viewers
        # that read only the first, a related location too.
        for other in also_at(finding):
            other_uri = _artifact_uri(other.get("file"))
            if uri and other_uri:
                place = {"artifactLocation": {"uri": other_uri}}
                if other_region := _region(other):
                    place["region"] = other_region
                result["locations"].append({"physicalLocation": place})
        related = []
        for n, other in enumerate(also_at(finding), 1):
            other_uri = _artifact_uri(other.get("file"))
            if not other_uri:
                continue
            place = {"artifactLocation": {"uri": other_uri}}
            other_region = _region(other)
            if other_region:
                place["region"] = other_region
            related.append({"id": n, "physicalLocation": place,
                            "message": {"text": "The same problem here."}})
        if related:
            result["relatedLocations"] = related
        result["properties"] = {
            "key": finding.get("key"),
            "category": category,
            "severity": severity,
            "confidence": finding.get("confidence"),
            "reviewers": list(finding.get("reviewers") or []),
            "decision": finding.get("decision"),
            "evidence": list(finding.get("evidence") or []),
        }
        if finding.get("decision") == "rejected":
            # A person rejected it: tools that honour suppressions (code scanning) hide it.
            by = plain(finding.get("decided_by")) or "a reviewer"
            why = plain(finding.get("comment")) or "no comment"
            result["suppressions"] = [{"kind": "external", "status": "accepted",
                                       "justification": f"Rejected by {by} in Quorum: {why}"}]
        results.append(result)

    driver = {"name": TOOL_NAME, "rules": rules.driver_rules()}
    if review.get("tool_version"):
        driver["version"] = str(review["tool_version"])
    tool = {"driver": driver}
    if extensions := rules.extensions():
        tool["extensions"] = extensions

    run = {
        "tool": tool,
        "invocations": [_invocation(review)],
        "results": results,
        "properties": {
            "reviewId": review.get("id"),
            "title": review.get("title") or "",
            "source": source_fields(review),
            "createdAt": review.get("created_at"),
            "status": review.get("status") or "",
            "offline": bool(review.get("offline")),
            "verdict": verdict_fields(review),
            "triage": triage_text(review),
            "onlyAccepted": bool(only_accepted),
            "droppedFindings": 0 if only_accepted else len(ordered(review.get("dropped"))),
            "totals": dict(review.get("totals") or {}),
        },
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}
