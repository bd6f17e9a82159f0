"""Records a pattern's stage or decision may produce besides ``base.Item``: plan versions,
executed steps and gate decisions. The web app persists each type (``agents_app/records.py``);
several patterns use them (a plan and its gate are not one pattern's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PlanProposed:
    version: int
    steps: list[str]
    goal: str = ""
    reasoning: str = ""
    author: str = "model"  # "model" or a user's name
    reason: str = ""  # why this version exists
    frozen: int = 0  # steps already executed and kept from an earlier version
    details: dict[str, Any] = field(default_factory=dict)  # a richer plan document's fields


@dataclass
class StepRecorded:
    plan_version: int
    index: int
    description: str
    status: str  # "done" or "failed"
    output: str = ""
    problem: str = ""


@dataclass
class GateDecided:
    gate: str
    action: str  # approve | reject | auto_approve
    plan_version: int
    feedback: str = ""
    edited: bool = False
    author: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
