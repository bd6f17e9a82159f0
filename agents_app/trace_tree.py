"""A run's trace as a tree — the run, its stages, each stage's model calls and tool calls — with
the times a timing waterfall draws, all from the database.

Where the times come from:
  * a stage starts at its ``stage_started`` (or ``stage_resumed``) event and ends at the next
    event that starts a stage, opens a gate or ends the run; a stage with calls but no event of
    its own spans its calls;
  * a model call is stored when it returns (``ModelCall.created_at``) with its latency, so it
    started ``latency_ms`` before that;
  * tool calls: ReAct's steps and ReWOO's evidence (``RunItem``) carry their own seconds; the
    tool calls of an agent loop (a change run's ``AgentReport.trace``) ran between the model
    call of their turn and the next call of the stage;
  * the time a run waited at a gate, from ``gate_opened`` to the next stage, is a row of its own
    ("waiting for you"), so the bars of the work keep their scale to the whole run.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from django.utils import timezone

from .models import AgentReport, Event, ModelCall, Run, RunItem
from .trace import stage_label

STARTS = ("stage_started", "stage_resumed")
ENDS = ("gate_opened", "run_finished", "run_cancelled", "budget_exceeded")


@dataclass
class Span:
    """One row of the tree and one bar of the waterfall: offsets in seconds from the run's
    start."""

    kind: str  # run | stage | call | tool | wait
    label: str
    start: float
    seconds: float
    detail: str = ""
    error: str = ""
    role: str = ""
    model: str = ""
    tokens: int = 0
    cost: object = 0
    call_id: int | None = None
    children: list[Span] = field(default_factory=list)
    # Set by ``layout``: the bar's place in percent of the whole run.
    x: float = 0.0
    width: float = 0.0
    depth: int = 0

    @property
    def end(self) -> float:
        return self.start + self.seconds


def _offset(at: dt.datetime, origin: dt.datetime) -> float:
    return max(0.0, (at - origin).total_seconds())


def _stage_spans(run: Run, events: list[Event], origin: dt.datetime, end: float) -> list[Span]:
    """The stages in the order they started, each with its span, and the gate waits."""
    spans: dict[str, Span] = {}
    order: list[Span] = []
    waits: list[Span] = []
    open_stage: Span | None = None
    waiting: Span | None = None
    for e in events:
        at = _offset(e.created_at, origin)
        if e.kind in STARTS or e.kind in ENDS:
            if open_stage is not None:
                open_stage.seconds = max(open_stage.seconds, at - open_stage.start)
                open_stage = None
            if waiting is not None and e.kind in STARTS:
                waiting.seconds = at - waiting.start
                waiting = None
        if e.kind in STARTS:
            stage = str((e.data or {}).get("stage") or "")
            if stage in spans:  # resumed after an interruption: the same row goes on
                open_stage = spans[stage]
            else:
                open_stage = spans[stage] = Span("stage", stage_label(run.pattern, stage), at,
                                                 0.0, detail=stage)
                order.append(open_stage)
        elif e.kind == "gate_opened":
            waiting = Span("wait", "Waiting for you", at, 0.0,
                           detail=str((e.data or {}).get("gate") or ""))
            waits.append(waiting)
    if open_stage is not None:  # still running
        open_stage.seconds = max(open_stage.seconds, end - open_stage.start)
    if waiting is not None:  # still waiting, or the run ended while it waited
        waiting.seconds = max(0.0, end - waiting.start)
    # A wait belongs after the stage that opened it: keep them in time order.
    rows = sorted(order + waits, key=lambda s: (s.start, s.kind == "wait"))
    return rows


def _tool_spans(run: Run, stages: dict[str, Span], calls: dict[str, list[Span]]) -> None:
    """Add the tool calls to their stages."""
    for item in RunItem.objects.filter(run=run, kind__in=("step", "evidence")).order_by("id"):
        data = item.data or {}
        if not data.get("tool"):
            continue
        ok = data.get("ok", True)
        error = "" if ok else str(data.get("error") or data.get("observation") or "failed")[:300]
        if item.kind == "evidence":  # ReWOO: every tool call of "work" starts with the stage
            stage = stages.get("work")
            seconds = (data.get("latency_ms") or 0) / 1000
            start = stage.start if stage else 0.0
        else:  # ReAct: the call ran at the end of its step (or of the act stage a person let run)
            n = data.get("iteration")
            key = f"act:{n}" if data.get("approved_by") else f"step:{n}"
            stage = stages.get(key)
            seconds = float(data.get("seconds") or 0)
            if stage is None:
                continue
            start = max(stage.start, stage.end - seconds)
        if stage is None:
            continue
        stage.children.append(Span("tool", str(data["tool"]), start, seconds, error=error,
                                   detail=str(data.get("id") or "")))
    for report in AgentReport.objects.filter(run=run).only("stage", "trace"):
        stage = stages.get(report.stage)
        if stage is None:
            continue
        stage_calls = sorted(calls.get(report.stage, []), key=lambda c: c.start)
        for entry in report.trace or []:
            turn = f":{entry.get('turn')}"
            mine = [c for c in stage_calls if (c.detail or "").endswith(turn)]
            start = mine[0].end if mine else stage.start
            later = [c.start for c in stage_calls if c.start >= start - 1e-6 and c not in mine]
            end = min(later) if later else stage.end
            stage.children.append(Span(
                "tool", str(entry.get("tool") or "tool"), start, max(0.0, end - start),
                error="" if entry.get("ok", True) else str(entry.get("observation") or "")[:300]))


def build_trace(run: Run) -> Span:
    """The run's tree, its times laid out for the waterfall."""
    origin = run.created_at
    events = list(Event.objects.filter(run=run, kind__in=STARTS + ENDS).order_by("seq")
                  .only("kind", "data", "created_at"))
    model_calls = list(ModelCall.objects.filter(run=run).order_by("id").only(
        "stage", "key", "role", "model", "prompt_tokens", "completion_tokens", "cost_usd",
        "latency_ms", "error", "created_at", "attempts"))
    if run.finished_at:
        last = _offset(run.finished_at, origin)
    else:  # still going (or waiting): up to now
        last = 0.0 if run.is_terminal else _offset(timezone.now(), origin)
    ends = [_offset(c.created_at, origin) for c in model_calls]
    ends += [_offset(e.created_at, origin) for e in events]
    total = max([last, *ends, 0.0])
    rows = _stage_spans(run, events, origin, total)
    stages = {s.detail: s for s in rows if s.kind == "stage"}
    calls: dict[str, list[Span]] = {}
    for c in model_calls:
        end = _offset(c.created_at, origin)
        seconds = c.latency_ms / 1000
        span = Span("call", c.role, max(0.0, end - seconds), seconds, detail=c.key,
                    error=c.error[:300], role=c.role, model=c.model,
                    tokens=c.prompt_tokens + c.completion_tokens, cost=c.cost_usd, call_id=c.pk)
        calls.setdefault(c.stage, []).append(span)
        stage = stages.get(c.stage)
        if stage is None:  # a stage with no event of its own: it spans its calls
            stage = stages[c.stage] = Span("stage", stage_label(run.pattern, c.stage), span.start,
                                           0.0, detail=c.stage)
            rows.append(stage)
        stage.start = min(stage.start, span.start)
        stage.seconds = max(stage.seconds, span.end - stage.start)
        stage.children.append(span)
    _tool_spans(run, stages, calls)
    for s in stages.values():
        s.children.sort(key=lambda c: (c.start, c.kind))
    rows.sort(key=lambda s: (s.start, s.kind == "wait"))
    root = Span("run", f"Run {run.pk}", 0.0, total, children=rows, tokens=run.total_tokens,
                cost=run.cost_usd)
    layout(root, total)
    return root


def layout(span: Span, total: float, depth: int = 0) -> None:
    """Each bar's place in percent of ``total``; a bar too short to see is drawn 0.3% wide."""
    scale = 100.0 / total if total > 0 else 0.0
    span.depth = depth
    span.x = min(span.start * scale, 100.0)
    span.width = min(max(span.seconds * scale, 0.3), 100.0 - span.x) if total > 0 else 100.0
    for child in span.children:
        layout(child, total, depth + 1)


def rows(span: Span) -> list[Span]:
    """The tree, depth first: the order of the waterfall's rows."""
    out = [span]
    for child in span.children:
        out += rows(child)
    return out
