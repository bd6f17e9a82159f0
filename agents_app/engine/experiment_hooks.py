"""How the engine serves experiments without importing them (issue 34): after a run of an
experiment ends, a task (known by its name) scores it and starts the next runs of its grid
(``announce_end``);
when a run of an experiment waits at a gate, the experiment's policy for that gate applies —
approve, reject with its fixed note, or wait for a person — and the decision records it."""

from __future__ import annotations

import logging

from config import send_task

from ..models import Run
from ..patterns.base import Decision, InvalidDecision

log = logging.getLogger("quorum.experiments")
RUN_ENDED = "agents_app.tasks.experiment_run_ended"
# False where the caller scores and tops up itself after each run it drives (``manage.py
# experiment run --here``, the tests): nothing is sent to the broker then.
ANNOUNCE = True


def announce_end(run_id: int) -> None:
    """Queue the run's scoring and its experiment's top-up (a worker does both)."""
    if not ANNOUNCE:
        return
    try:
        send_task(RUN_ENDED, (run_id,), ignore_result=True)
    except Exception as exc:  # the broker is away: the beat's sweep tops up every minute
        log.warning("run %s: could not queue its experiment's next runs: %s", run_id, exc)


def apply_experiment_gate(run_id: int, *, enqueue: bool = True) -> str:
    """A run of an experiment waiting at a gate: its experiment's policy for the gate."""
    from .actions import StaleDecision, decide

    run = Run.objects.filter(pk=run_id).select_related("experiment").first()
    if run is None or run.experiment is None or not run.is_waiting:
        return "nothing"
    spec = run.experiment.spec
    policy = (spec.get("gates") or {}).get(run.gate, "wait")
    how = f"experiment:{policy}"
    if policy == "reject" and rejected_before(run):
        # Rejected once at this gate already: what the revision is worth is measured by
        # going on with it. Rejecting every revision would loop for ever (a planner answers
        # each rejection with a new plan; nothing else bounds it).
        policy, how = "approve", "experiment:approve-after-reject"
    if policy == "approve":
        decision = Decision(action="approve", author="experiment policy")
    elif policy == "reject":
        decision = Decision(action="reject", feedback=spec.get("reject_note", ""),
                            author="experiment policy")
    else:
        return "ask"
    try:
        decide(run, run.owner, run.stage_seq, decision, how=how, enqueue=enqueue)
    except (StaleDecision, InvalidDecision) as exc:
        log.info("run %s: the experiment's %s at %s does not apply (%s); a person decides",
                 run_id, policy, run.gate, exc)
        return "ask"
    return "approved" if policy == "approve" else "rejected"


def rejected_before(run: Run) -> bool:
    """Whether the experiment's policy has rejected at this gate of this run already."""
    from ..models import Checkpoint

    return Checkpoint.objects.filter(run=run, decision__how="experiment:reject",
                                     decision__gate=run.gate).exists()
