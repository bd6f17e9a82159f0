"""Fault: SQLite locked by another connection while runs progress in a real Celery worker.

Another process holds ``BEGIN EXCLUSIVE`` (every writer waits; in WAL mode readers go on) for
a while, then rolls back. Quorum's connections wait up to the busy timeout of
config/settings.py (``OPTIONS["timeout"]``, 30 s). Phases, each with fresh runs of every
pattern:

* ``short``: held ``--short`` s (default 5), well under the busy timeout: writers wait, the
  runs go on as if nothing happened.
* ``long``: held ``--long`` s (default 35), longer than the busy timeout: writes fail with
  "database is locked".

What must hold: a run that cannot be claimed waits for the database and goes on; a stage that
cannot read or write is dropped (its journaled calls kept), its run given back as soon as the
database takes a write, and the stage run again; never a run failed for it, never a
half-written stage, never a failed model or reviewer reported instead. Afterwards every run
has ended by itself, without a sweeper (``--sweep`` adds the stand-in for the beat process:
every 2 s, runs idle 6 s); the runs match a clean run of their kind (nothing duplicated or
missing, the audit of ``sigkill.py``); ``PRAGMA integrity_check`` is ``ok``.

PostgreSQL restarted (fast, immediate, every connection terminated) is
``tests/faults/pg_restart.py``.

    .venv/bin/python tests/faults/db_locked.py [--runs 3] [--short 5] [--long 35]

Exit status 0 when every check holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.faults import common  # noqa: E402


class Locker:
    """Hold ``BEGIN EXCLUSIVE`` on the SQLite database from another connection."""

    def __init__(self, path: str, seconds: float):
        self.path, self.seconds = path, seconds
        self.held = threading.Event()
        self.over = threading.Event()

    def _hold(self) -> None:
        con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            con.execute("BEGIN EXCLUSIVE")
            self.held.set()
            time.sleep(self.seconds)
            con.execute("ROLLBACK")
        finally:
            con.close()
            self.over.set()

    def start(self) -> Locker:
        threading.Thread(target=self._hold, daemon=True).start()
        self.held.wait(60)
        return self


def integrity(path: str) -> str:
    con = sqlite3.connect(path, timeout=60)
    try:
        return ", ".join(r[0] for r in con.execute("PRAGMA integrity_check"))
    finally:
        con.close()


def phase(name: str, fault, expected: dict, args, workers) -> dict:
    from django.db import close_old_connections

    from agents_app import engine
    from agents_app.models import RUNNABLE, Run

    ids, kinds, decided, swept, errors = [], {}, [], set(), 0
    for p in args.patterns:
        for i in range(args.runs):
            v = common.VARIANTS[p][i % len(common.VARIANTS[p])]
            run_id = common.start(v, i, repo_name=f"{name}-{p}-{i}")
            ids.append(run_id)
            kinds[run_id] = v
    started = time.monotonic()
    time.sleep(args.after)
    in_flight = Run.objects.filter(pk__in=ids, status__in=RUNNABLE).count()
    close_old_connections()
    fault = fault().start()
    next_sweep = 0.0
    deadline = time.monotonic() + args.timeout + 60
    while time.monotonic() < deadline:
        try:
            common.answer_gates(ids, decided)
            if args.sweep and fault.over.is_set() and time.monotonic() >= next_sweep:
                swept.update(engine.sweep(idle_seconds=6.0))
                next_sweep = time.monotonic() + 2.0
            if fault.over.is_set() and common.settled(ids, decided):
                break
        except engine.DB_UNAVAILABLE:  # this process writes too (decisions, sweeps)
            errors += 1
            close_old_connections()
        if fault.over.is_set() and deadline > time.monotonic() + args.timeout:
            deadline = time.monotonic() + args.timeout
        time.sleep(0.2)
    fault.over.wait()
    close_old_connections()
    wall = time.monotonic() - started
    rows = list(Run.objects.filter(pk__in=ids).values_list("pk", "status", "error",
                                                           "lease_expires_at"))
    audits, failed = [], []
    for run_id, status, error, _ in rows:
        if status == "completed":
            audits.append(common.audit(run_id, expected[kinds[run_id].label], decided))
        elif status == "failed":
            failed.append((run_id, error))
    log = workers.log()
    return {
        "phase": name, "runs": len(ids), "in_flight": in_flight,
        "completed": sum(s == "completed" for _, s, _, _ in rows), "failed": failed,
        "waiting": [r for r, s, _, _ in rows if s.startswith("awaiting_")],
        "resumable": [r for r, s, _, lease in rows if s in RUNNABLE and lease is None],
        "stuck": [r for r, s, _, lease in rows if s in RUNNABLE and lease is not None],
        "swept": len(swept), "bad": [a for a in audits if not a.ok], "wall": wall,
        "script_errors": errors,
        # Each warning is in the log twice (the quorum handler and Celery's).
        "rerun": (log.count("interrupted, the database is unavailable")
                  - log.count(": the claim interrupted")) // 2,
        "retried_claims": (log.count(": the claim interrupted")
                           + log.count("); trying again in")) // 2,
    }


def run_phases(args) -> tuple[list[dict], list[str], str]:
    from django.conf import settings
    from django.db import connection

    stack = common.Stack("db-locked", keep=args.keep)
    results = []
    try:
        expected = {}
        for p in args.patterns:
            for v in common.VARIANTS[p]:
                expected[v.label] = common.snapshot(common.run_clean(
                    v, 0, repo_name=f"clean-{p}-{v.name}"))
        workers = stack.own(common.Workers(stack.dir, node="dbfault", concurrency=40,
                                           QUORUM_OFFLINE_LATENCY=args.latency))
        workers.start()
        db = connection.settings_dict["NAME"]
        busy = settings.DATABASES["default"]["OPTIONS"].get("timeout")
        setting = f"SQLite (WAL), busy timeout {busy} s (config/settings.py)"
        for name in args.phases:
            hold = args.short if name == "short" else args.long
            row = phase(name, lambda h=hold: Locker(db, h), expected, args, workers)
            row["fault"] = f"BEGIN EXCLUSIVE held {hold:g} s"
            row["integrity"] = integrity(db)
            results.append(row)
            print(f"  {name}: {row['fault']}, {row['wall']:.0f} s", flush=True)
        worker_alive = workers.pid is not None
    finally:
        stack.close()
    checks = [] if worker_alive else ["the worker is gone"]
    for r in results:
        if r["integrity"] != "ok":
            checks.append(f"{r['phase']}: the integrity check says {r['integrity']}")
        for a in r["bad"]:
            checks.append(f"{r['phase']}: run {a.run_id}: "
                          + "; ".join(a.duplicates + a.missing + a.lost_decisions + a.other))
        for run_id in r["stuck"]:
            checks.append(f"{r['phase']}: run {run_id} is left with a live lease")
        if r["resumable"]:
            checks.append(f"{r['phase']}: runs not finished {args.timeout:.0f} s after the "
                          f"lock: {r['resumable'][:10]}")
        for run_id, error in r["failed"]:
            checks.append(f"{r['phase']}: run {run_id} failed (a lock must only delay runs): "
                          f"{error[:300]}")
    return results, checks, setting


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per pattern and phase")
    parser.add_argument("--patterns", nargs="+", default=list(common.PATTERN_NAMES),
                        choices=common.PATTERN_NAMES)
    parser.add_argument("--short", type=float, default=5.0, help="s, under the busy timeout")
    parser.add_argument("--long", type=float, default=35.0, help="s, over the busy timeout")
    parser.add_argument("--phases", nargs="+", default=["short", "long"],
                        choices=["short", "long"])
    parser.add_argument("--latency", type=float, default=0.3, help="offline model s/call")
    parser.add_argument("--after", type=float, default=1.5, help="s from start to the lock")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="s allowed after the lock is released")
    parser.add_argument("--sweep", action="store_true",
                        help="sweep from this script too (a stand-in for the beat process)")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    total = time.monotonic()
    results, checks, setting = run_phases(args)
    print(f"\n# SQLite locked — {time.strftime('%Y-%m-%d %H:%M')}, {common.machine()}")
    print(f"# {setting}; offline model {args.latency} s/call; the lock taken {args.after} s "
          f"after the runs started; sweeper: {'script, every 2 s' if args.sweep else 'none'}\n")
    print(common.table(
        ["phase", "fault", "runs", "in flight", "completed", "failed", "waiting",
         "not finished", "stuck lease", "stages run again", "claims retried",
         "duplicates/missing", "integrity_check", "wall s"],
        [[r["phase"], r["fault"], r["runs"], r["in_flight"], r["completed"], len(r["failed"]),
          len(r["waiting"]), len(r["resumable"]), len(r["stuck"]), r["rerun"],
          r["retried_claims"], len(r["bad"]), r["integrity"], f"{r['wall']:.0f}"]
         for r in results]))
    for c in checks:
        print(c)
    ok = not checks
    print(f"\n{'PASS' if ok else 'FAIL'}: {time.monotonic() - total:.0f} s in all.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
