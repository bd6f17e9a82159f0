"""Checkpoints: the state each stage of a run started from, written in the same transaction
as the commit (or the decision) that led to it, so a fork, a replay or a comparison can start
from any stage without running what came before.

The state is JSON compressed with zlib at its fastest level: a code review's state (every
file of the change) shrinks about tenfold, and compressing costs well under a millisecond for
the states of the other patterns (measured in docs/BENCHMARKS.md).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

from .. import prepared
from ..models import Checkpoint, Run

LEVEL = 1


def pack(state: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(state, separators=(",", ":"), ensure_ascii=False,
                                    default=str).encode("utf-8"), LEVEL)


def unpack(data: bytes | memoryview) -> dict[str, Any]:
    return json.loads(zlib.decompress(bytes(data)).decode("utf-8"))


def digest(value: Any) -> str:
    """A stable hash of what a decision was made on (a gate's payload, a plan): the same
    bytes give the same hash, so a fork can reuse a decision only on identical input."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write(run_id: int, seq: int, *, stage: str, gate: str, state: dict[str, Any],
          event_seq: int, decision: dict | None = None) -> None:
    """Record the state stage ``seq`` of run ``run_id`` starts from, in one INSERT inside the
    caller's transaction (each seq is written once: by the one commit or decision that the
    run's conditional update let through, or by a fork's creation)."""
    prepared.insert(Checkpoint, [{"run_id": run_id, "seq": seq, "stage": stage or "",
                                  "gate": gate or "", "state": pack(state),
                                  "event_seq": event_seq, "decision": decision}])


def state_at(cp: Checkpoint) -> dict[str, Any]:
    return unpack(cp.state)


def at(run: Run, seq: int) -> Checkpoint | None:
    """The checkpoint of ``run`` at ``seq``: its own, or, for a fork, the ancestor's it
    stands on for the seqs before its fork point."""
    for r, upto in chain(run):
        if upto is None or seq < upto:
            found = Checkpoint.objects.filter(run_id=r, seq=seq).first()
            if found is not None:
                return found
    return None


def chain(run: Run) -> list[tuple[int, int | None]]:
    """``run`` and its ancestors as (run id, the seq from which the next run down has its
    own): the run itself first with None. A fork's seq ``s`` is the ancestor's own when it is
    below every fork point between them."""
    out: list[tuple[int, int | None]] = [(run.pk, None)]
    cut = run.fork_seq
    parent_id = run.forked_from_id
    seen = {run.pk}
    while parent_id is not None and cut is not None and parent_id not in seen:
        seen.add(parent_id)
        out.append((parent_id, cut))
        parent = Run.objects.filter(pk=parent_id).values("forked_from_id", "fork_seq").first()
        if parent is None:
            break
        parent_id = parent["forked_from_id"]
        cut = min(cut, parent["fork_seq"]) if parent["fork_seq"] is not None else None
    return out


def history(run: Run) -> list[Checkpoint]:
    """Every checkpoint of the run's own stages in order, the inherited ones first."""
    rows: dict[int, Checkpoint] = {}
    for r, upto in reversed(chain(run)):
        q = Checkpoint.objects.filter(run_id=r).defer("state")
        if upto is not None:
            q = q.filter(seq__lt=upto)
        for cp in q:
            rows[cp.seq] = cp
    return [rows[s] for s in sorted(rows)]
