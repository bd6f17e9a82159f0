"""Fault: a gate's deadline fires on time although every process was killed before it
(issue 35).

The real processes on a private SQLite database and Redis (append-only, as ``make dev`` runs
it): Daphne, a Celery worker (thread pool) and Celery beat (``celery -A config beat``, its
schedule file in the temporary folder, as ``make dev`` runs it; the gate timers every
``QUORUM_GATE_TIMER_SECONDS``, 15 s). A team has a rule "deadline 1 minute, then approve";
two team runs (Plan-and-Execute, offline model) go to the worker and stop at plan approval —
the worker records each stop with its deadline (run A's one minute after it opened, run B's
moved ``--gap`` seconds later).

Then SIGKILL to the whole process group of every process — web, worker, beat — ``--kill-after``
seconds after the stops opened, well before the deadline; ``--down`` seconds later all three
start again. Measured: when run A's default decision landed (its ``defaulted`` audit row, and
the run moved on) relative to its ``deadline_at``. PASS when under 60 s.

Run B tests the claim: from half a second before its deadline until it is decided and the
restarted beat has swept at least once more, this process sweeps the timers by hand
(``gates.core.sweep_timers``) from ``--sweepers`` threads every 50 ms, racing each other and
the beat's sweep in the worker. PASS when each run has exactly one
``defaulted`` audit row, one closing of its stop and one decision.

    .venv/bin/python tests/faults/deadline_restart.py [--kill-after 10] [--down 15]

Exit status 0 when all of it holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.faults import common  # noqa: E402

TARGET_S = 60.0
TASK = "Collect the logs of the billing service, then find the error."
MODELS = {role: common.OFFLINE for role in ("planner", "executor", "synthesizer")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kill-after", type=float, default=10.0,
                        help="seconds after the stops opened to kill every process")
    parser.add_argument("--down", type=float, default=15.0,
                        help="seconds every process stays down")
    parser.add_argument("--gap", type=float, default=20.0,
                        help="seconds between run A's deadline and run B's")
    parser.add_argument("--sweepers", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=240.0)
    args = parser.parse_args()
    stack = common.Stack("deadline-restart", persistent_redis=True)
    procs = Procs(stack.dir)
    stack.own(procs)
    try:
        procs.start()
        return run(args, procs)
    finally:
        stack.close()


class Procs:
    """Daphne, a Celery worker and Celery beat, killed and started together."""

    def __init__(self, var: Path):
        self.var = var
        self.web = self.worker = self.beat = None
        self.starts = 0

    def start(self) -> float:
        from tests.stack import BIN, Proc, app_env, free_port, start_web, start_worker, wait_until

        t = time.monotonic()
        self.beat = Proc("beat", [str(BIN / "celery"), "-A", "config", "beat", "--schedule",
                                  str(self.var / "celerybeat-schedule"), "--loglevel", "INFO"],
                         app_env(QUORUM_VAR_DIR=self.var), self.var)
        self.worker = start_worker(self.var, node="deadline", concurrency=8,
                                   QUORUM_VAR_DIR=self.var)
        self.web = start_web(self.var, free_port(), QUORUM_VAR_DIR=self.var)
        wait_until(lambda: "beat: Starting" in self.beat.log()
                   or self.beat.popen.poll() is not None, 60, what="beat to start")
        if self.beat.popen.poll() is not None:
            raise RuntimeError(f"beat exited:\n{self.beat.log()[-3000:]}")
        self.starts += 1
        return time.monotonic() - t

    def kill(self) -> list[str]:
        """SIGKILL each process group (no warm shutdown); their logs' last lines."""
        for proc in (self.web, self.worker, self.beat):
            if proc is not None:
                proc.kill()
        return [p.log() for p in (self.web, self.worker, self.beat) if p is not None]

    def logs(self) -> dict[str, str]:
        return {p.name: p.log() for p in (self.web, self.worker, self.beat) if p is not None}

    def close(self) -> None:
        for proc in (self.web, self.worker, self.beat):
            if proc is not None:
                proc.stop()


def run(args, procs: Procs) -> int:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from agents_app import engine
    from agents_app.gates import core
    from agents_app.gates.models import GateAudit, GateOpening, GateRule
    from agents_app.models import Run
    from agents_app.teams.models import Membership, Team
    from tests.stack import wait_until

    User = get_user_model()
    alice, bob = (User.objects.create_user(n) for n in ("alice", "bob"))
    team = Team.objects.create(name="Platform")
    Membership.objects.create(team=team, user=alice, role="member")
    Membership.objects.create(team=team, user=bob, role="approver")
    GateRule.objects.create(team=team, name="Plans in a minute", deadline_minutes=1,
                            default_action="approve")
    runs = [engine.create_run(alice, "plan_execute", f"{TASK} ({name})", options={},
                              models=MODELS, team=team) for name in ("A", "B")]
    wait_until(lambda: GateOpening.objects.filter(run__in=runs).count() == 2, 120,
               what="both runs to stop at their gate")
    a, b = (GateOpening.objects.get(run=r) for r in runs)
    b.deadline_at = a.deadline_at + timedelta(seconds=args.gap)
    GateOpening.objects.filter(pk=b.pk).update(deadline_at=b.deadline_at)
    print(f"common: {common.machine()}")
    print(f"stops opened; run A's deadline {a.deadline_at:%H:%M:%S.%f} UTC "
          f"({(a.deadline_at - timezone.now()).total_seconds():.1f} s ahead), run B's "
          f"{args.gap:.0f} s later")

    time.sleep(max(0.0, args.kill_after - (timezone.now() - a.opened_at).total_seconds()))
    killed_at = timezone.now()
    procs.kill()
    print(f"SIGKILL to web, worker and beat at {killed_at:%H:%M:%S} "
          f"({(a.deadline_at - killed_at).total_seconds():.1f} s before A's deadline)")
    time.sleep(args.down)
    took = procs.start()
    restarted = timezone.now()
    print(f"all three started again in {took:.1f} s, ready at {restarted:%H:%M:%S} "
          f"({(a.deadline_at - restarted).total_seconds():.1f} s before A's deadline)")

    # Run B: sweep by hand from several threads around its deadline, racing the beat.
    hand: list[dict] = []
    errors: list[str] = []
    done = threading.Event()

    def sweeper() -> None:
        from django.db import connection

        try:
            while not done.is_set():
                fired = core.sweep_timers()
                if fired["defaulted"]:
                    hand.append(fired)
                time.sleep(0.05)
        except Exception as exc:  # noqa: BLE001 - reported
            errors.append(repr(exc))
        finally:
            connection.close()

    def beat_sweeps() -> int:  # the beat's sweeps the worker finished so far
        return len(re.findall(r"gate_timers\[[0-9a-f-]+\] succeeded", procs.logs()["worker"]))

    deadline = time.monotonic() + args.timeout
    threads: list[threading.Thread] = []
    sweeps_before = 0
    while time.monotonic() < deadline:
        now = timezone.now()
        if not threads and now >= b.deadline_at - timedelta(seconds=0.5):
            sweeps_before = beat_sweeps()
            threads = [threading.Thread(target=sweeper) for _ in range(args.sweepers)]
            for t in threads:
                t.start()
        # Until both fired and, while the threads kept sweeping, the beat swept too.
        if threads and beat_sweeps() > sweeps_before and all(
                GateAudit.objects.filter(opening=op, what="defaulted").exists()
                for op in (a, b)):
            break
        time.sleep(0.1)
    overlapped = beat_sweeps() - sweeps_before
    time.sleep(3.0)  # let any second firing land, if there were one
    done.set()
    for t in threads:
        t.join(30)

    ok = True
    rows = []
    for name, op, run in (("A", a, runs[0]), ("B", b, runs[1])):
        op.refresh_from_db()
        audits = list(GateAudit.objects.filter(opening=op).order_by("id"))
        defaulted = [x for x in audits if x.what == "defaulted"]
        run = Run.objects.get(pk=run.pk)
        late = (defaulted[0].at - op.deadline_at).total_seconds() if defaulted else None
        decisions = [x for x in audits if x.what in ("decided", "defaulted", "policy")]
        moved = not run.is_waiting
        rows.append((name, late, len(defaulted), len(decisions), op.outcome, run.status))
        fine = (len(defaulted) == 1 and len(decisions) == 1 and moved
                and op.closed_at is not None)
        if name == "A":
            fine = fine and late is not None and 0 <= late < TARGET_S
        ok = ok and fine
        when = f"{late:.1f} s after" if late is not None else "never, "
        print(f"run {name}: defaulted {when} its deadline · 'defaulted' audit rows {len(defaulted)} · decisions "
              f"{len(decisions)} · stop outcome {op.outcome or '-'} · run now {run.status} · "
              f"{'PASS' if fine else 'FAIL'}")
    print(f"hand sweeps from {len(threads)} threads, every 50 ms from 0.5 s before B's "
          f"deadline: {len(hand)} claimed B's default ({'this process' if hand else 'the beat'}"
          f" fired it); the beat's sweeps in the worker meanwhile: {overlapped}")
    worker_log = procs.logs().get("worker", "")
    print(f"worker after the restart: gate_timers received "
          f"{worker_log.count('agents_app.tasks.gate_timers[')} times")
    for e in errors[:5]:
        print(f"# sweeper error: {e}")
    ok = ok and not errors
    print(f"{'PASS' if ok else 'FAIL'}: a deadline after every process was killed fires "
          f"{rows[0][1] if rows[0][1] is None else f'{rows[0][1]:.1f} s'} after its time "
          f"(target < {TARGET_S:.0f} s), once for each gate")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
