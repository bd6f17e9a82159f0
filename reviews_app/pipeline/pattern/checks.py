"""Change-level checks that run beside the reviewers, in the same parallel batch: cross-file
(pull-request level) analysis and the review-rules guardian.

``jobs`` returns the model calls to add to the reviewers' batch (name → callable returning a
``Reply``); ``collect`` turns their outcomes into findings (numbered, with the bookkeeping
fields of ``synthesis.number_findings``) and events. Skeleton: no checks yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents_app.patterns.base import Event, ModelClient


def jobs(state: dict, client: ModelClient) -> dict[str, Callable[[], Any]]:
    return {}


def collect(state: dict, outcomes: dict[str, Any]) -> tuple[list[dict], list[Event]]:
    return [], []
