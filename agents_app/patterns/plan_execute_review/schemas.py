"""The change pattern's gates and limits, the schemas its models answer in, and the records
its stages produce."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

PLAN_GATE = "plan_approval"
MERGE_GATE = "merge_request"
ESCALATION_GATE = "escalation"
MAX_DIFF_IN_PROMPT = 60_000
MAX_DIFF_STORED = 1_000_000
MAX_TEST_OUTPUT = 20_000
MAX_FIELD = 4000
MAX_COMMIT_MESSAGE = 10_000
MERGE_MODES = {"squash": "one squashed commit", "merge": "a merge commit"}
DEFAULT_MERGE_MODE = "squash"
PERSON_COMMENTS = "The person's comments to address"
# How a later round's executor prompt says the plan's edits are made already.
ALREADY_IN_FILES = "your previous attempt is already in the files"
# The reviewer prompt's section listing what Quorum found unfinished in the round (checks.py).
UNFINISHED = "Unfinished work Quorum found in this round"



# --- schemas the models answer in -----------------------------------------------------------
def _clean_list(items: list[str]) -> list[str]:
    return [s.strip() for s in items if s and s.strip()]


class PlanDoc(BaseModel):
    """The planner's plan document; the executor receives exactly this."""

    goal: str = Field(description="What the change achieves, in one or two sentences.")
    files: list[str] = Field(default_factory=list, description="Files to create or modify, "
                             "relative to the repository root.")
    approach: str = Field(default="", description="How the change is made, and why this way.")
    steps: list[str] = Field(min_length=1, description="Ordered, concrete edit steps.")
    test_strategy: str = Field(default="", description="How to check the change works.")
    risks: list[str] = Field(default_factory=list, description="What could go wrong.")

    @field_validator("files", "risks")
    @classmethod
    def _lists(cls, items: list[str]) -> list[str]:
        return _clean_list(items)

    @field_validator("steps")
    @classmethod
    def _steps(cls, steps: list[str]) -> list[str]:
        steps = _clean_list(steps)
        if not steps:
            raise ValueError("the plan needs at least one step")
        return steps


class ForkPlanDoc(BaseModel):
    """A fork's edit of the plan at its gate: the plan document's fields, checked as the plan
    gate checks a person's edit (``GateDecisions.validate_plan_edit``), not here, so both say
    the same."""

    goal: str = ""
    files: list[str] = Field(default_factory=list)
    approach: str = ""
    steps: list[str] = Field(default_factory=list)
    test_strategy: str = ""
    risks: list[str] = Field(default_factory=list)


class ExecutionReport(BaseModel):
    """The executor's report after its changes."""

    summary: str = Field(description="What you changed, in a few sentences.")
    done: list[str] = Field(default_factory=list, description="Plan steps carried out.")
    skipped: list[str] = Field(default_factory=list, description="Plan steps not carried out "
                               "or that failed, each starting with its number ('Step 2: ...') "
                               "and saying why; and comments of the person's you could not act "
                               "on.")
    surprises: list[str] = Field(default_factory=list, description="What you did not expect "
                                 "in the code, including anything that suggests the plan is "
                                 "wrong.")
    tests: str = Field(default="", description="Tests you ran and their result.")

    @field_validator("done", "skipped", "surprises")
    @classmethod
    def _lists(cls, items: list[str]) -> list[str]:
        return _clean_list(items)


class ReviewComment(BaseModel):
    file: str = Field(default="", description="Path of the file, or empty for the whole change.")
    line: int | None = Field(default=None, description="Line in the new version, if any.")
    problem: str = Field(description="What is wrong.")
    requested_change: str = Field(default="", description="What the executor should do.")


class ReviewVerdict(BaseModel):
    """The reviewer's decision on the change."""

    approve: bool = Field(description="True only if the change does what the plan says and "
                          "is correct.")
    summary: str = Field(description="The verdict in two or three sentences.")
    follows_plan: bool = Field(default=True, description="Does the change match the plan?")
    comments: list[ReviewComment] = Field(default_factory=list)
    rejection_kind: Literal["fixup", "plan_wrong", "unclear"] | None = Field(
        default=None, description="When rejecting: fixup (the executor can fix it from the "
        "comments), plan_wrong (the plan itself is mistaken), unclear (a person must decide).")
    reason: str = Field(default="", description="When rejecting: why, in one paragraph.")


# --- records the engine persists ------------------------------------------------------------
@dataclass
class AgentWorked:
    """One agent stage: its tool trace and its structured answer."""

    stage: str
    kind: str  # plan | execute | review
    plan_version: int
    round: int
    trace: list[dict[str, Any]]
    stopped: str
    answer: dict[str, Any]
    commit_sha: str = ""
    base_sha: str = ""
    diff: str = ""
    diff_truncated: bool = False
    files: list[dict[str, str]] = field(default_factory=list)
    test_output: str = ""
    test_exit: int | None = None
    test_ran: bool = False


@dataclass
class MergeRequestChanged:
    status: str  # draft | open | conflict | merged | discarded | closed
    head_sha: str = ""
    base_sha: str = ""
    merged_sha: str = ""
    message: str = ""
    decided: bool = False  # a person's decision: the persister records who and when


