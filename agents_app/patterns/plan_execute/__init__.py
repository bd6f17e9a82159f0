"""Plan and execute: a planner writes the plan, a person approves, edits or rejects it at a
gate, an executor carries out the steps in order, and a synthesizer writes the answer."""

from .pattern import EMPTY_PLAN, PLAN_GATE, PlanDraft, PlanExecute, PlanExecuteOptions, StepReport

PATTERN = PlanExecute()

__all__ = ["EMPTY_PLAN", "PATTERN", "PLAN_GATE", "PlanDraft", "PlanExecute", "PlanExecuteOptions",
           "StepReport"]
