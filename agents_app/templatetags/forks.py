"""Template filters of the comparison page (issue 33)."""

from __future__ import annotations

from django import template

from ..forking.diff import StageDiff, StageRecord, as_text

register = template.Library()


@register.filter
def signed(value) -> str:
    """A delta with its sign: +12, −3, 0."""
    n = int(value or 0)
    return f"+{n:,}" if n > 0 else (f"−{-n:,}" if n < 0 else "0")


@register.filter
def signed_usd(value) -> str:
    n = float(value or 0)
    return f"+${n:.4f}" if n > 0 else (f"−${-n:.4f}" if n < 0 else "$0")


@register.filter
def diff_parts(row: StageDiff) -> list:
    return [("Prompts", row.prompts), ("Replies", row.responses), ("Output", row.outputs),
            ("Decision", row.decisions)]


@register.filter
def stage_gist(stage: StageRecord) -> str:
    """A stage's output in a line: what it left for the next stage (or its last reply)."""
    if stage.output:
        return " ".join(as_text(stage.output).split())
    if stage.calls:
        return " ".join((stage.calls[-1].error or stage.calls[-1].response).split())
    return ""
