"""Template filters of the comparison page (issue 33)."""

from __future__ import annotations

from django import template

from ..forking.create import fork_terms as _fork_terms
from ..forking.create import gate_words as _gate_words
from ..forking.diff import StageDiff, StageRecord, as_text

register = template.Library()
HOW_WORDS = {"person": "by a person", "reused": "the original decision reused",
             "approved": "approved by the fork's gate policy"}


@register.filter
def signed(value) -> str:
    """A delta with its sign: +12, −3, 0."""
    n = int(value or 0)
    return f"+{n:,}" if n > 0 else (f"−{-n:,}" if n < 0 else "0")


@register.filter
def signed_usd(value) -> str:
    n = float(value or 0)
    return f"+${n:.4f}" if n > 0 else (f"−${-n:.4f}" if n < 0 else "$0")


@register.inclusion_tag("agents_app/_lineage_tree.html", takes_context=True)
def lineage_tree(context, run, open_=False):
    """The lineage a run belongs to, each run with its status and cost and a link to its diff
    with its parent; nothing when the run has no fork and is none."""
    from ..forking.lineage import flat, tree

    # A live update is rendered without a request; only the run's owner watches it.
    request = context.get("request")
    viewer = request.user.pk if request is not None else run.owner_id
    nodes = flat(tree(run), viewer)
    return {"nodes": nodes if len(nodes) > 1 else [], "run": run, "open": open_}


@register.filter
def fork_terms(fork: dict | None) -> str:
    """'with an edit; with gpt-4o as executor; the plan approval gate approves without asking'"""
    return "; ".join(_fork_terms(fork or {}))


@register.filter
def gate_words(gate: str) -> str:
    return _gate_words(gate or "")


@register.filter
def stage_figures(stage: StageRecord | None) -> str:
    """One side of a compared stage in figures: its calls (how many were reused), tokens,
    cost and time; a stage with no model call says so."""
    if stage is None:
        return ""
    if stage.decision:
        how = HOW_WORDS.get(stage.decision.get("how") or "person", "decided")
        return f"{stage.decision.get('action', 'decided')}, {how}"
    if not stage.calls:
        return "no model call"
    n = len(stage.calls)
    reused = sum(1 for c in stage.calls if c.replayed)
    calls = f"{n} call{'s' if n != 1 else ''}"
    if reused:
        calls += " (all reused, no cost)" if reused == n else f" ({reused} reused, no cost)"
    seconds = stage.latency_ms / 1000
    return f"{calls} · {stage.tokens:,} tokens · ${stage.cost:.4f} · {seconds:.1f} s"


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
