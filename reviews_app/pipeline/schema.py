"""The shapes every part of the review pipeline agrees on.

Findings travel as plain dicts (JSON in the run's state and in exports) with the keys of
``Finding``; the pydantic models validate what models answer and document the fields.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

CATEGORIES = ("security", "architecture", "style")  # the reviewer lenses (who looked)
# What kind of problem a finding is (seed 003's categorisation), whoever found it.
KINDS = ("security", "bug", "performance", "maintainability", "style", "documentation", "tests")
SEVERITIES = ("critical", "high", "medium", "low", "info")  # strongest first
VERDICTS = ("approve", "needs_discussion", "request_changes")  # mildest first
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}  # 0 is the strongest
VERDICT_RANK = {v: i for i, v in enumerate(VERDICTS)}

Category = Literal["security", "architecture", "style"]
Severity = Literal["critical", "high", "medium", "low", "info"]
Verdict = Literal["approve", "needs_discussion", "request_changes"]


def _lower(value):
    return value.strip().lower() if isinstance(value, str) else value


class Finding(BaseModel):
    """One problem a reviewer found. ``line``/``end_line`` are new-file line numbers."""

    category: Category
    severity: Severity
    file: str
    line: int | None = Field(default=None, ge=0)
    end_line: int | None = Field(default=None, ge=0)
    title: str = Field(min_length=1, max_length=300)
    description: str = ""
    suggestion: str = ""
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    rules: list[str] = Field(default_factory=list,
                             description="Ids of the analyzer results this finding rests on.")

    _norm = field_validator("category", "severity", mode="before")(_lower)


class ReviewerFindings(BaseModel):
    """A reviewer's answer."""

    findings: list[Finding] = Field(default_factory=list)


class Amendment(BaseModel):
    """A reviewer's change to the findings after reading its colleagues' findings."""

    action: Literal["add", "upgrade", "downgrade", "retract"]
    target: str = Field(default="", description="Id of the finding amended (not for add).")
    severity: Severity | None = Field(default=None, description="New severity (upgrade/downgrade).")
    reason: str = Field(min_length=1)
    finding: Finding | None = Field(default=None, description="The new finding (add only).")

    _norm = field_validator("action", "severity", mode="before")(_lower)


class ReflectionAnswer(BaseModel):
    amendments: list[Amendment] = Field(default_factory=list)


class DuplicateGroup(BaseModel):
    keep: str = Field(description="Id of the finding that stays.")
    merge: list[str] = Field(description="Ids of findings that describe the same problem.")
    reason: str = ""


class SynthesisAnswer(BaseModel):
    duplicates: list[DuplicateGroup] = Field(default_factory=list)
    verdict: Verdict
    summary: str = Field(min_length=1)

    _norm = field_validator("verdict", mode="before")(_lower)
