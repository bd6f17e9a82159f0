"""A run's stages as the comparison reads them (issue 33): one ``StageRecord`` per stage that
ran, in order, with its model calls (a fork's earlier ones from its ancestors, marked), what it
changed in the run's state, and at each gate the decision taken there.

Built from the checkpoints: stage ``seq`` started from checkpoint ``seq`` and left checkpoint
``seq + 1``; the keys of the state that differ between the two are the stage's output. A gate
is a record of its own (``gate:<kind>``), with no calls, whose decision is the one recorded on
the checkpoint it led to.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Q

from ..models import Checkpoint, ModelCall, Run
from ..trace import stage_label
from . import checkpoints
from .diff import CallRecord, StageRecord

MAX_VALUE = 20_000  # characters of one changed value kept in a stage's output


def gate_name(gate: str) -> str:
    """A gate's record as the comparison (and ``manage.py fork --from``) names it."""
    return f"gate:{gate}"


def gate_label(gate: str) -> str:
    return f"Gate: {gate.replace('_', ' ')}"


def _prompt(messages: Any) -> str:
    parts = []
    for m in messages or []:
        content = m.get("content") if isinstance(m, dict) else m
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, default=str)
        role = (m.get("role") if isinstance(m, dict) else "") or "message"
        parts.append(f"[{role}]\n{content}")
    return "\n".join(parts)


def call_record(c: ModelCall, run_id: int) -> CallRecord:
    return CallRecord(key=c.key, role=c.role, model=c.model, prompt=_prompt(c.messages),
                      response=c.response or "", prompt_tokens=c.prompt_tokens,
                      completion_tokens=c.completion_tokens, cost=float(c.cost_usd),
                      latency_ms=c.latency_ms,
                      replayed=bool(c.replayed_from_id) or c.run_id != run_id, error=c.error)


def _changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            value = after.get(key)
            text = json.dumps(value, ensure_ascii=False, default=str)
            out[key] = value if len(text) <= MAX_VALUE else text[:MAX_VALUE] + " …"
    return out


def stages(run: Run) -> list[StageRecord]:
    """The stages ``run`` ran (its inherited ones first), each with its calls and output."""
    history = checkpoints.history(run)
    if not history:
        return []
    full = {cp.pk: cp for cp in Checkpoint.objects.filter(pk__in=[cp.pk for cp in history])}
    states = [checkpoints.state_at(full[cp.pk]) for cp in history]
    q = Q()
    for cp in history:
        if cp.stage and not cp.gate:
            q |= Q(run_id=cp.run_id, stage=cp.stage)
    calls: dict[tuple[int, str], list[ModelCall]] = {}
    if q:
        for c in ModelCall.objects.filter(q).order_by("id"):
            calls.setdefault((c.run_id, c.stage), []).append(c)
    forks = dict(Run.objects.filter(pk__in={cp.run_id for cp in history}).values_list(
        "pk", "fork"))
    out: list[StageRecord] = []
    for i, cp in enumerate(history):
        after = states[i + 1] if i + 1 < len(history) else None
        nxt = history[i + 1] if i + 1 < len(history) else None
        decided = nxt.decision if nxt is not None else None
        if nxt is not None and nxt.run_id != cp.run_id:
            # The next checkpoint is where a fork starts: the stage's own output is the one its
            # run left, and what the fork changed there is a record of its own. A gate's
            # decision too is the one taken in the run that waited there (a fork made just
            # after it starts with no decision of its own).
            theirs = Checkpoint.objects.filter(run_id=cp.run_id, seq=nxt.seq).first()
            if theirs is not None:
                after = checkpoints.state_at(theirs)
                decided = theirs.decision
        if i and history[i - 1].run_id != cp.run_id:
            before = Checkpoint.objects.filter(run_id=history[i - 1].run_id, seq=cp.seq).first()
            edited = _changed(checkpoints.state_at(before), states[i]) if before else {}
            if edited:
                # A person's edit, or what the fork set up for itself (a change run's own
                # branch and worktree): either way the runs differ from here, and it is shown.
                by_person = bool((forks.get(cp.run_id) or {}).get("edits"))
                out.append(StageRecord(cp.seq, "fork:edit", "Edited when forked" if by_person
                                       else "Set up for the fork", [], output=edited))
        if cp.gate:
            out.append(StageRecord(cp.seq, gate_name(cp.gate), gate_label(cp.gate), [],
                                   output=None, decision=_decision(decided)))
            continue
        if not cp.stage:
            continue
        if after is not None:
            output: Any = _changed(states[i], after)
        elif run.is_terminal:  # the stage the run ended in
            output = {"error": run.error} if run.error else {"answer": run.answer}
        else:  # the stage running now: its calls so far
            output = None
        out.append(StageRecord(cp.seq, cp.stage, stage_label(run.pattern, cp.stage),
                               [call_record(c, run.pk) for c in
                                calls.get((cp.run_id, cp.stage), [])], output=output))
    return out


def _decision(d: dict[str, Any] | None) -> dict[str, Any] | None:
    if not d:
        return None
    return {k: d.get(k) for k in ("action", "feedback", "edits", "how") if d.get(k)}
