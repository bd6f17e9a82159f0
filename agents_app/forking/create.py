"""Making a fork: a new run that starts from another run's checkpoint (issue 33).

Nothing before the fork point runs again and nothing of it is copied but what a page lists:
the fork's state is the checkpoint's (with the person's edit applied), its earlier model
calls and events are read through its parent (``lineage``), and the few record rows a page
shows (plan versions, steps, approvals, agent reports, items) are copied up to the
checkpoint so every page works unchanged. Its budget and limits count its own calls only.

Kinds, all forks underneath: ``fork`` (from any stage, with an edit and other models),
``again`` (the same task, options and models, from the start), ``continue`` (a run stopped by
its budget or failed at a stage, from its last committed stage, with a higher budget), ``retry``
(from a stage, as it was) and ``replay`` (from the start, every call served from the
journal, stopping where a request differs). A ``continue`` after a budget stop reuses the calls
of the stage it starts from whose requests are the same, ``replay`` all of them (``journal``);
a ``retry`` and a ``continue`` after a failure call anew.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from ..engine.fork_gates import apply_gate_policy
from ..events import write_events
from ..llm.gateway import is_offline
from ..models import (
    AgentReport,
    Approval,
    Checkpoint,
    PlanVersion,
    Run,
    RunItem,
    Status,
    StepResult,
    gate_status,
)
from ..patterns import get_pattern
from ..patterns.base import Event, InvalidDecision
from . import checkpoints

KINDS = ("fork", "again", "continue", "retry", "replay")
GATE_POLICIES = ("ask", "reuse", "approve")
# Record rows a page lists, copied into a fork up to its checkpoint.
COPIED = (PlanVersion, StepResult, Approval, AgentReport, RunItem)
KIND_WORDS = {"fork": "forked", "again": "ran again", "continue": "continued",
              "retry": "retried", "replay": "replayed"}


class ForkRefused(Exception):
    """No fork was made; ``str()`` says why in plain words, ``status`` the HTTP answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class ForkPoint:
    """Where a fork starts: the checkpoint, its owner run and its state (edits not yet
    applied)."""

    checkpoint: Checkpoint
    state: dict[str, Any]


def latest_seq(run: Run) -> int:
    """The last committed stage of ``run``: where a running run is forked from, and where a
    stopped one continues (a run that failed at a stage has a checkpoint of its end after
    it, which is no stage to run: the stage it failed at is the one before)."""
    own = Checkpoint.objects.filter(run=run).exclude(stage="", gate="").order_by("-seq") \
        .values_list("seq", flat=True)
    seq = own.first()
    if seq is None:
        history = [cp for cp in checkpoints.history(run) if not is_end(cp)]
        if not history:
            raise ForkRefused(f"Run #{run.pk} has no recorded stages to fork from: it was made "
                              "before forks existed. “Run again” still works.")
        seq = history[-1].seq
    return seq


def is_end(cp: Checkpoint) -> bool:
    """The checkpoint a run's end wrote: no stage runs from it."""
    return not cp.stage and not cp.gate


def point(run: Run, seq: int) -> ForkPoint:
    cp = checkpoints.at(run, seq)
    if cp is None:
        raise ForkRefused(f"Run #{run.pk} has no recorded stage {seq} to fork from (it was "
                          "made before forks existed, or that stage never ran).", 404)
    return ForkPoint(cp, checkpoints.state_at(cp))


def _models(run: Run, pattern, changed: dict[str, str] | None) -> dict[str, str]:
    from ..llm.gateway import check_model_name

    models = dict(run.models_used or {})
    for role, model in (changed or {}).items():
        if role not in pattern.roles:
            raise ForkRefused(f"{pattern.label} has no role {role[:40]!r}; its roles are "
                              f"{', '.join(pattern.roles)}.")
        model = (model or "").strip()
        if not model or len(model) > 200 or not model.isprintable():
            raise ForkRefused(f"Give a model name for the {role} role.")
        if problem := check_model_name(model):
            raise ForkRefused(f"The {role} role's model: {problem}")
        models[role] = model
    return models


def _gates(pattern, policies: dict[str, str] | None) -> dict[str, str]:
    out = {}
    for gate, policy in (policies or {}).items():
        if gate not in pattern.gates:
            raise ForkRefused(f"{pattern.label} has no gate {gate[:40]!r}; its gates are "
                              f"{', '.join(pattern.gates) or 'none'}.")
        if policy not in GATE_POLICIES:
            raise ForkRefused(f"A gate is asked again, its original decision reused when what "
                              f"is decided is the same, or approved: not {policy[:20]!r}.")
        out[gate] = policy
    return out


def _budget(value: Any, parent: Any, what: str, high: Any) -> Any:
    if value is None:
        return parent
    if value <= 0 or value > high:
        raise ForkRefused(f"The {what} must be above 0 and at most {high}.")
    return value


def create_fork(parent: Run, user, *, seq: int | None = None, kind: str = "fork",
                edits: dict[str, Any] | None = None, models: dict[str, str] | None = None,
                gates: dict[str, str] | None = None, max_cost_usd: Decimal | None = None,
                max_tokens: int | None = None, note: str = "", enqueue: bool = True,
                extra: dict[str, Any] | None = None, **labels: Any) -> Run:
    """The fork of ``parent`` from its checkpoint ``seq`` (its last committed stage when
    None). Raises ForkRefused with the reason; nothing is saved then. ``extra`` goes into the
    fork's record; ``labels`` are an experiment's columns (a cell that shares its first stages
    with another cell's run is a fork of it)."""
    if kind not in KINDS:
        raise ForkRefused(f"Unknown kind of fork {kind[:20]!r}.")
    pattern = get_pattern(parent.pattern)
    if kind in ("again", "replay"):
        seq = 0
    elif kind == "continue":
        if parent.status not in (Status.BUDGET_EXCEEDED, Status.FAILED):
            raise ForkRefused("Only a run stopped by its budget or failed at a stage can "
                              "continue; fork it from a stage instead.", 409)
        seq = latest_seq(parent)
    elif seq is None:
        seq = latest_seq(parent)
    if seq < 0:
        raise ForkRefused("A stage number is 0 or more.")
    if kind == "again" and checkpoints.at(parent, 0) is None:
        fp = ForkPoint(Checkpoint(seq=0, stage=pattern.first_stage(
            initial := pattern.initial_state(parent.task, parent.options or {})), gate=""),
            initial)
    else:
        fp = point(parent, seq)
    cp, state = fp.checkpoint, fp.state
    if is_end(cp):
        raise ForkRefused(f"Stage {cp.seq} is where run #{parent.pk} ended: no stage runs from "
                          "there. Fork it from an earlier stage.", 409)
    if kind == "replay" and (why := pattern.replay_refusal(state)):
        raise ForkRefused(why, 409)
    if why := pattern.fork_refusal(cp.stage, cp.gate, state):
        raise ForkRefused(why, 409)
    edit_records: list[Any] = []
    if edits:
        try:
            state, edit_records = pattern.apply_fork_edit(cp.stage, cp.gate, state, edits,
                                                          user.get_username())
        except InvalidDecision as exc:
            raise ForkRefused(str(exc)) from None
    routes = _models(parent, pattern, None if kind == "replay" else models)
    policies = _gates(pattern, gates)
    if kind == "replay":
        policies = dict.fromkeys(pattern.gates, "reuse")
    root = parent.root_id or parent.pk
    max_cost = _budget(max_cost_usd, parent.max_cost_usd, "cost budget", Decimal("1000"))
    max_tok = _budget(max_tokens, parent.max_tokens, "token budget", 50_000_000)
    fork = {"kind": kind, "by": user.get_username(), "from_run": parent.pk, "seq": cp.seq,
            "stage": cp.stage, "gate": cp.gate, "edits": edits or {},
            "models": {r: m for r, m in routes.items() if (parent.models_used or {}).get(r) != m},
            "gates": policies, "note": note[:2000], "at": timezone.now().isoformat(),
            # A replay is served every call; a continuation after a budget stop the calls of
            # its first stage that asked the same (they were good: only the budget stopped
            # it). A retry, or a continuation after a failure, asks anew: a reply that made
            # the stage fail would make it fail the same way again.
            "reuse_calls": kind == "replay" or (kind == "continue"
                                                and parent.status == Status.BUDGET_EXCEEDED),
            **(extra or {})}
    with transaction.atomic():
        run = Run.objects.create(
            owner=user, team_id=parent.team_id, pattern=parent.pattern, task=parent.task,
            status=gate_status(cp.gate) if cp.gate else Status.QUEUED, stage=cp.stage,
            gate=cp.gate, state=state, options=state.get("options", parent.options),
            models_used=routes, offline=any(is_offline(m) for m in routes.values()),
            max_cost_usd=max_cost, max_tokens=max_tok, stage_seq=cp.seq, last_event_seq=1,
            forked_from=parent, fork_seq=cp.seq, root_id=root, fork=fork, **labels)
        bound = pattern.fork_state(state, run.pk)
        if bound is not state:
            run.state, run.options = bound, bound.get("options", run.options)
            run.save(update_fields=["state", "options"])
        write_events(run.pk, 1, [Event("run_forked", describe(fork, parent, pattern),
                                       {"from_run": parent.pk, "seq": cp.seq, "kind": kind})])
        checkpoints.write(run.pk, cp.seq, stage=cp.stage, gate=cp.gate, state=run.state,
                          event_seq=1)
        if cp.pk is not None:
            copy_records(cp, run)
        if edit_records:
            from .. import records as run_records

            run_records.persist(run, edit_records, user=user)
        if pattern.on_fork:
            import_string(pattern.on_fork)(parent, run, cp)
        if not cp.gate:
            from ..engine.scheduling import schedule_on_commit

            schedule_on_commit(run.pk, enqueue)
        else:
            transaction.on_commit(lambda: apply_gate_policy(run.pk, enqueue=enqueue))
    return run


POLICY_TERMS = {"ask": "asks again", "reuse": "reuses the original decision",
                "approve": "approves without asking"}


def gate_words(gate: str) -> str:
    return f"the {gate.replace('_', ' ')} gate"


def fork_terms(fork: dict) -> list[str]:
    """What a fork changed, in words: its edit, its models and its gate policies."""
    out = []
    if fork.get("edits"):
        out.append("with an edit")
    if fork.get("models"):
        out.append("with " + ", ".join(f"{m} as {r}" for r, m in sorted(fork["models"].items())))
    for gate, policy in sorted((fork.get("gates") or {}).items()):
        if policy != "ask":
            out.append(f"{gate_words(gate)} {POLICY_TERMS.get(policy, policy)}")
    return out


def describe(fork: dict, parent: Run, pattern) -> str:
    from ..trace import stage_label

    what = stage_label(pattern.name, fork["stage"]) if fork["stage"] else "its end"
    where = f"at {gate_words(fork['gate'])}" if fork["gate"] else f"from {what}"
    text = f"{fork['by']} {KIND_WORDS[fork['kind']]} run #{parent.pk} {where} (stage {fork['seq']})"
    extra = fork_terms(fork)
    return text + (f"; {'; '.join(extra)}" if extra else "") + "."


def copy_records(cp: Checkpoint, run: Run) -> None:
    """The record rows a page lists, as they were at the checkpoint: from the run that owns it,
    made up to the checkpoint's commit (that run holds its own ancestors' copies)."""
    for model in COPIED:
        rows = list(model.objects.filter(run_id=cp.run_id, created_at__lte=cp.created_at))
        for row in rows:
            row.pk = None
            row.run_id = run.pk
        if rows:
            model.objects.bulk_create(rows)



__all__ = ["GATE_POLICIES", "KINDS", "ForkRefused", "apply_gate_policy", "create_fork"]
