"""Pattern logic: plain Python, no Django. See ``base`` for the contract."""

from .base import Pattern
from .debate import Debate
from .plan_execute import PlanExecute
from .plan_execute_review import PlanExecuteReview
from .react import ReAct
from .reflective import Reflective
from .rewoo import ReWOO
from .team_lead import TeamLead

PATTERNS: dict[str, Pattern] = {p.name: p for p in (PlanExecute(), PlanExecuteReview(),
                                                    Reflective(), Debate(), TeamLead(), ReWOO(),
                                                    ReAct())}


def register_pattern(pattern: Pattern) -> None:
    """Other apps add their patterns when Django starts (see their AppConfig.ready)."""
    PATTERNS[pattern.name] = pattern


def get_pattern(name: str) -> Pattern:
    return PATTERNS[name]


def pattern_label(name: str) -> str:
    """A pattern's name in words for people (``plan_execute`` → "Plan and execute"); a key
    no pattern registers is shown with spaces, never as an error."""
    pattern = PATTERNS.get(name or "")
    return pattern.label if pattern and pattern.label else (name or "").replace("_", " ")
