"""ReWOO (plan, work in parallel, organize): the planner writes every tool call first, the
calls run side by side, and the answer is written only from their evidence, citing it, then
checked against it."""

from .pattern import ReWOO, ReWOOOptions

PATTERN = ReWOO()

__all__ = ["PATTERN", "ReWOO", "ReWOOOptions"]
