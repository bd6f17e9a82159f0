"""Reading a run through its lineage (issue 33): a fork's stages before its fork point are its
parent's, so its trace, its timeline and its comparison read them there — never copied — and
the lineage tree (every fork of a root, each with its cost and status) is one query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import Q

from ..models import Event, ModelCall, Run
from . import checkpoints


def owner_of(run: Run | None, seq: int) -> int | None:
    """The id of the run in ``run``'s lineage whose own stage ``seq`` is: ``run`` itself from
    its fork point on, an ancestor before it."""
    if run is None:
        return None
    cp = checkpoints.at(run, seq)
    if cp is not None:
        return cp.run_id
    return run.pk if run.fork_seq is None or seq >= run.fork_seq else None


def inherited_stages(run: Run) -> list[tuple[int, str]]:
    """(owner run id, stage name) of every stage a fork has from its ancestors, in order."""
    if run.forked_from_id is None:
        return []
    return [(cp.run_id, cp.stage) for cp in checkpoints.history(run)
            if cp.run_id != run.pk and cp.stage]


def inherited_calls(run: Run) -> list[ModelCall]:
    """The model calls of the stages a fork has from its ancestors (not made again: the trace
    shows them as the ancestors', at no cost to the fork)."""
    stages = inherited_stages(run)
    if not stages:
        return []
    q = Q()
    for owner, stage in stages:
        q |= Q(run_id=owner, stage=stage)
    return list(ModelCall.objects.filter(q).order_by("id"))


def events_until(run: Run, seq: int, depth: int = 0) -> list[Event]:
    """The events of ``run``'s lineage up to the commit that led to its stage ``seq``, oldest
    first: the owning run's own, after its ancestors' up to its own fork point."""
    cp = checkpoints.at(run, seq)
    if cp is None or depth > 100:
        return []
    owner = run if cp.run_id == run.pk else Run.objects.filter(pk=cp.run_id).first()
    if owner is None:
        return []
    own = list(Event.objects.filter(run_id=owner.pk, seq__lte=cp.event_seq).order_by("seq"))
    if owner.forked_from_id and owner.fork_seq is not None:
        parent = Run.objects.filter(pk=owner.forked_from_id).first()
        if parent is not None:
            return events_until(parent, owner.fork_seq, depth + 1) + own
    return own


def inherited_events(run: Run) -> list[Event]:
    """The events of a fork's ancestors up to its fork point, oldest first."""
    if run.forked_from_id is None or run.fork_seq is None:
        return []
    parent = Run.objects.filter(pk=run.forked_from_id).first()
    return events_until(parent, run.fork_seq) if parent is not None else []


@dataclass
class Node:
    run: Run
    children: list[Node] = field(default_factory=list)
    depth: int = 0

    @property
    def label(self) -> str:
        from ..trace import stage_label

        fork = self.run.fork or {}
        if not fork:
            return "original"
        kind = {"fork": "fork", "again": "run again", "replay": "replay",
                "continue": "continued", "retry": "retry"}.get(fork.get("kind"), "fork")
        if fork.get("gate"):
            where = f"at the {str(fork['gate']).replace('_', ' ')} gate"
        elif fork.get("stage"):
            where = f"from {stage_label(self.run.pattern, fork['stage'])}"
        else:
            where = "from the start" if not fork.get("seq") else "from its end"
        return f"{kind} {where} (stage {fork.get('seq')})"


def tree(run: Run) -> Node:
    """The lineage ``run`` belongs to, from its root: every run the owner may see is the
    caller's business (these are all the owner's: a fork belongs to whoever made it, and
    runs of one lineage are only listed for their owner)."""
    root_id = run.root_id or run.pk
    runs = list(Run.objects.filter(Q(pk=root_id) | Q(root_id=root_id))
                .only("id", "status", "cost_usd", "prompt_tokens", "completion_tokens",
                      "forked_from_id", "fork_seq", "fork", "owner_id", "pattern",
                      "created_at", "calls").order_by("id"))
    nodes = {r.pk: Node(r) for r in runs}
    root = nodes.get(root_id) or Node(run)
    for r in runs:
        if r.pk != root_id and r.forked_from_id in nodes:
            nodes[r.forked_from_id].children.append(nodes[r.pk])
    _depths(root, 0)
    return root


def _depths(node: Node, depth: int) -> None:
    node.depth = depth
    for c in node.children:
        _depths(c, depth + 1)


def flat(node: Node, owner_id: int) -> list[Node]:
    """The tree in order, depth first, only the runs of ``owner_id`` (another person's fork
    of a shared run is theirs to see)."""
    out = [node] if node.run.owner_id == owner_id else []
    for c in node.children:
        out += flat(c, owner_id)
    return out


def total_cost(run: Run) -> Decimal:
    return run.cost_usd or Decimal(0)
