"""Forking a code review (issue 33), the plain-Python part: which stages can be forked, and
the edit a fork may start with — one reviewer's findings, at the synthesis (before the
duplicates are merged, the weak ones dropped and the verdict proposed).

The Django side (``reviews_app/services.py``, ``fork_review``) gives the fork a review of its
own; a fork of a pull request's review publishes nothing unless a person presses Publish
(``reviews_app/prflow/publishing``, ``reviews_app/prflow/status.py``).
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, Field

from agents_app.patterns.base import ForkEdit, InvalidDecision
from agents_app.patterns.gate_input import check_field, check_text
from common import secret_keys

from .. import synthesis
from ..quality.apply import set_kinds
from ..schema import Finding

FIELDS = ("category", "severity", "file", "line", "end_line", "title", "description",
          "suggestion", "confidence", "rules")
MAX_TEXT = 4000
MAX_FINDINGS = 100


class EditedFinding(Finding):
    """A finding as a person edits it: the finding schema's fields, and the key of the
    reviewer's finding it replaces (empty for a new one)."""

    key: str = Field(default="", description="SEC-1, …: the finding this replaces; empty for "
                                             "a new finding.")


class ReviewerEdit(BaseModel):
    """One reviewer's findings, as the synthesis is to read them."""

    reviewer: str = Field(description="security, architecture or style.")
    findings: list[EditedFinding] = Field(default_factory=list)


REPLAY_REFUSAL = (
    "A code review cannot be replayed: its triage (each finding accepted or rejected, then "
    "the verdict) is made outside the run's stages and is not in its journal, so a replay "
    "could not end where the review did. Fork it from its triage gate to triage the same "
    "findings again, or from an earlier stage to review it again.")


def refusal(stage: str, gate: str) -> str | None:
    if stage == "close" and not gate:
        return ("The verdict was decided at this stage: a fork from here would only close "
                "it again. Fork the review from its triage gate to triage it anew.")
    return None


def _shown(f: dict) -> dict:
    return {"key": f["key"], **{k: f.get(k) for k in FIELDS}}


def edit(stage: str, gate: str, state: dict[str, Any]) -> ForkEdit | None:
    if stage != "synthesize" or gate or not state.get("findings"):
        return None
    reviewers = list(state["options"]["reviewers"])
    kept = [f for f in state["findings"] if f["status"] == "kept"]
    first = next((r for r in reviewers if any(f["reviewer"] == r for f in kept)),
                 reviewers[0] if reviewers else "")
    value = {"reviewer": first, "findings": [_shown(f) for f in kept if f["reviewer"] == first]}
    return ForkEdit(ReviewerEdit, value, "One reviewer's findings, before the synthesis",
                    apply)


def apply(state: dict[str, Any], value: ReviewerEdit, author: str) -> tuple[dict[str, Any],
                                                                            list[Any]]:
    """``state`` with the findings of ``value.reviewer`` replaced by the person's: a finding
    named by its key is changed in place (its history says so), one left out is dropped with
    that reason, one without a key is added with a new key. InvalidDecision, saying what is
    wrong, for an unknown reviewer, key or file, or a text that cannot be kept."""
    reviewers = list(state["options"]["reviewers"])
    name = value.reviewer.strip().lower()
    if name not in reviewers:
        raise InvalidDecision(f"This review has no reviewer {value.reviewer.strip()[:40]!r}; its "
                              f"reviewers are {', '.join(reviewers)}.")
    if len(value.findings) > MAX_FINDINGS:
        raise InvalidDecision(f"{len(value.findings)} findings; at most {MAX_FINDINGS}.")
    findings = copy.deepcopy(state["findings"])
    mine = {f["key"]: f for f in findings if f["reviewer"] == name and f["status"] == "kept"}
    files = {f["path"] for f in state["files"]}
    who = author or "a person"
    seen: set[str] = set()
    changed = False
    for i, item in enumerate(value.findings, 1):
        data = _checked(i, item, files)
        key = item.key.strip()
        if key:
            if key not in mine:
                raise InvalidDecision(f"Finding {i}: {key[:20]} is not one of the {name} "
                                      "reviewer's findings; leave its key empty to add it as "
                                      "a new one.")
            if key in seen:
                raise InvalidDecision(f"Finding {i}: {key[:20]} is given twice.")
            seen.add(key)
            target = mine[key]
            if any(not _same(target.get(k), data[k]) for k in FIELDS):
                target.update(data)
                target["history"] = [*target.get("history", []),
                                     f"edited by {who} when this review was forked"]
                secret_keys.mask_finding(target)
                changed = True
            continue
        [added] = synthesis.number_findings(name, [data],
                                            synthesis.next_index(findings, name))
        added["history"].append(f"added by {who} when this review was forked")
        set_kinds([added])
        findings.append(secret_keys.mask_finding(added))
        changed = True
    for key, f in mine.items():
        if key not in seen:
            f["status"] = "dropped"
            f["drop_reason"] = f"removed by {who} when this review was forked"
            changed = True
    if not changed:
        return state, []
    return {**state, "findings": findings}, []


def _same(before: Any, after: Any) -> bool:
    """A field the person left as shown (texts compared without their outer spaces; no line,
    line 0 and no rules alike)."""
    if isinstance(before, str) and isinstance(after, str):
        return before.strip() == after.strip()
    return (before or None) == (after or None)


def _checked(i: int, item: EditedFinding, files: set[str]) -> dict[str, Any]:
    where = f"Finding {i}"
    path = check_field(f"{where}'s file", item.file, max_chars=1000)
    if path not in files:
        raise InvalidDecision(f"{where}: {path[:200]} is not a file of this change.")
    if item.line and item.end_line and item.end_line < item.line:
        raise InvalidDecision(f"{where}: its last line ({item.end_line}) is before its first "
                              f"({item.line}).")
    rules = [check_field(f"{where}'s rule", r, max_chars=200) for r in item.rules]
    if len(item.suggestion) > MAX_TEXT:  # kept as written: a suggestion may be code
        raise InvalidDecision(f"{where}'s suggestion is {len(item.suggestion):,} characters; "
                              f"the limit is {MAX_TEXT:,}.")
    return {
        "category": item.category, "severity": item.severity, "file": path,
        "line": item.line or None, "end_line": item.end_line or None,
        "title": check_field(f"{where}'s title", item.title, max_chars=300),
        "description": check_field(f"{where}'s description", item.description,
                                   max_chars=MAX_TEXT, required=False),
        "suggestion": check_text(f"{where}'s suggestion", item.suggestion),
        "confidence": float(item.confidence), "rules": rules}
