"""Plan, execute, review on a git repository, ending in a merge request a person decides.
See ``pattern.py``."""

from .pattern import PlanExecuteReview
from .schemas import ESCALATION_GATE, MERGE_GATE, PLAN_GATE

PATTERN = PlanExecuteReview()

__all__ = ["ESCALATION_GATE", "MERGE_GATE", "PATTERN", "PLAN_GATE", "PlanExecuteReview"]
