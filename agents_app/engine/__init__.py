"""The run engine: advances durable runs one stage at a time.

Every transition is claimed. A worker takes a *lease* on a runnable run with a conditional
update, runs the pattern's stage, and commits the result only if it still holds the lease
and the run's ``stage_seq`` is unchanged; the commit bumps ``stage_seq``. A task delivered
twice finds the lease taken or the stage gone and does nothing. A worker killed mid-stage
leaves a lease that is recovered when a worker restarts (or expires for the sweeper); the
stage then runs again, replaying the model calls it had already journaled, so no call is
paid or recorded twice and no step is recorded twice (steps are written with the commit).

A worker going on with the run in place (``advance_in_place``: the task, ``run_inline``)
has each stage's commit claim the next stage for it in the same UPDATE, and carries the run
that UPDATE returned instead of reading it again. Writes read back what they change
(``UPDATE … RETURNING``): the claim returns the run, the event counter its new numbers, a
model call's update of the counters the lease check (no row: the lease is lost), the cancel
flag and the totals the next call is held to.

A gate commits the run as ``awaiting_<gate>`` and ends the task; a decision is recorded
by ``decide`` (under a row lock, checked against the ``stage_seq`` the person saw) and
enqueues the continuation.

The modules, one seam each: ``creation`` (a new run), ``leases`` (claims, worker identity,
recovery and the sweeper), ``journal`` (model calls persisted, replayed and held to the
run's limits), ``stages`` (running a claimed stage), ``commit`` (a stage's result, a run's
end), ``actions`` (a person's decision at a gate, a cancel) and ``scheduling`` (enqueueing
the continuation by the task's name: the engine never imports ``agents_app.tasks``).
"""

from .actions import StaleDecision, cancel, decide
from .commit import (
    EXPERIMENT_END_HOOKS,
    FORK_GATE_HOOKS,
    register_terminal_hook,
)
from .creation import create_run
from .experiment_hooks import announce_end, apply_experiment_gate
from .fork_gates import apply_gate_policy
from .leases import (
    DB_UNAVAILABLE,
    LeaseLost,
    StageInterrupted,
    recover_after_restart,
    set_worker_identity,
    sweep,
)
from .stages import RETRY_AFTER_DB_ERROR, advance, advance_in_place, run_inline

if apply_gate_policy not in FORK_GATE_HOOKS:
    FORK_GATE_HOOKS.append(apply_gate_policy)


if apply_experiment_gate not in FORK_GATE_HOOKS:
    FORK_GATE_HOOKS.append(apply_experiment_gate)
if announce_end not in EXPERIMENT_END_HOOKS:
    EXPERIMENT_END_HOOKS.append(announce_end)


__all__ = [
    "DB_UNAVAILABLE",
    "RETRY_AFTER_DB_ERROR",
    "LeaseLost",
    "StageInterrupted",
    "StaleDecision",
    "advance",
    "advance_in_place",
    "cancel",
    "create_run",
    "decide",
    "recover_after_restart",
    "register_terminal_hook",
    "run_inline",
    "set_worker_identity",
    "sweep",
]
