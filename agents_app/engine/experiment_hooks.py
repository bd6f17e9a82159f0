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
    if policy == "approve":
        decision = Decision(action="approve", author="experiment policy")
    elif policy == "reject":
        decision = Decision(action="reject", feedback=spec.get("reject_note", ""),
                            author="experiment policy")
    else:
        return "ask"
    try:
        decide(run, run.owner, run.stage_seq, decision, how=f"experiment:{policy}",
               enqueue=enqueue)
    except (StaleDecision, InvalidDecision) as exc:
        log.info("run %s: the experiment's %s at %s does not apply (%s); a person decides",
                 run_id, policy, run.gate, exc)
        return "ask"
    return "approved" if policy == "approve" else "rejected"
