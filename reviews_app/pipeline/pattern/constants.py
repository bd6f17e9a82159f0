"""The code review's gate, verdict wording and option defaults."""

from __future__ import annotations

from ..schema import CATEGORIES

TRIAGE_GATE = "triage"
VERDICT_LABELS = {"approve": "approve", "request_changes": "request changes",
                  "needs_discussion": "needs discussion"}
DEFAULTS = {
    "reviewers": list(CATEGORIES),
    "min_confidence": 0.5,
    "reviewer_timeout": 180.0,
    "max_prompt_chars": 60_000,
    "max_parallel_calls": 24,
    # Roles served by a model that reads no code (the built-in offline model): their answers
    # do not count as having examined a file.
    "offline_roles": [],
}
