"""Records the code review hands the engine; the Django side persists them
(``reviews_app/records.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReviewersFinished:
    reviewers: dict[str, dict]


@dataclass
class ReviewSynthesized:
    kept: list[dict]
    dropped: list[dict]
    verdict: str
    rule_verdict: str
    model_verdict: str
    summary: str
    notes: list[str] = field(default_factory=list)
    coverage: list[dict] | None = None  # what was examined, once the reviewers have run


@dataclass
class VerdictDecided:
    action: str  # accept | override
    verdict: str
    reason: str = ""
    author: str = ""
