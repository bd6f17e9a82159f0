"""Pattern logic: plain Python, no Django. See ``base`` for the contract."""

from .base import Pattern
from .plan_execute import PlanExecute

PATTERNS: dict[str, Pattern] = {p.name: p for p in (PlanExecute(),)}


def get_pattern(name: str) -> Pattern:
    return PATTERNS[name]
