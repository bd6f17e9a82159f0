"""The quality stage after reflection (seed 003): every finding is checked against the code
(safeguard: keep, correct or discard with a reason), given a severity by a written rubric,
and a category (schema.KINDS). Skeleton: findings pass through unchanged.
"""

from __future__ import annotations

from agents_app.patterns.base import ModelClient, StageResult


def run(state: dict, client: ModelClient) -> StageResult:
    return StageResult(state=state, next_stage="synthesize", events=[])
