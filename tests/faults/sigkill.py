"""Fault: the Celery worker killed with SIGKILL at random moments, across at least 50 runs of
each pattern (the seven dashboard and change patterns and the code review).

For each pattern: runs start in waves while a real worker (thread pool, offline model slowed
to ``--latency`` s a call) works on them; after a random interval (``--kill-min`` to
``--kill-max`` s, seeded) the worker's whole process group gets SIGKILL and a new worker with
the same node name starts, as a service manager restarts it. Gates are answered like a person
(``engine.decide``: approve the plan, merge, approve the tool call, accept the verdict) while
the kills go on. A stand-in for the beat process sweeps every ``--sweep-every`` s for runs
with no lease and no progress for ``--sweep-idle`` s (production: every 60 s, after 120 s).

At the end every run is audited against a clean run of the same kind made in this process
first: it must be completed (or waiting at its gate); no stage started twice; no step, plan,
item, finding, report, approval, model call or commit more or fewer than the clean run; the
run's call counter equal to its call rows; event numbers without gaps; every decision given
recorded where its gate keeps it.

    .venv/bin/python tests/faults/sigkill.py [--runs 50] [--patterns plan_execute react ...]

Exit status 0 when every run passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.faults import common  # noqa: E402


class Pool:
    """Several workers at once (one process per core, as ``make dev`` runs them): ``kill``
    SIGKILLs one of them, picked by the seeded generator; ``start`` starts those not running."""

    def __init__(self, members: list[common.Workers], rng: random.Random):
        self.members, self.rng = members, rng

    def start(self) -> None:
        for w in self.members:
            if w.pid is None:  # never started, stopped, or killed
                w.start()

    def kill(self) -> None:
        self.rng.choice(self.members).kill()

    def stop(self) -> None:
        for w in self.members:
            w.stop()


def phase(pattern: str, workers: common.Workers | Pool, expected: dict, args, rng: random.Random):
    from agents_app import engine
    from agents_app.models import Run

    variants = common.VARIANTS[pattern]
    per_wave = max(1, math.ceil(args.runs / args.waves))
    ids: list[int] = []
    decided: list[common.Decided] = []
    kinds: dict[int, common.Variant] = {}
    kills, swept = 0, set()
    started = time.monotonic()
    next_sweep = started + args.sweep_every
    workers.start()
    deadline = started + args.phase_timeout
    while True:
        if len(ids) < args.runs:
            for i in range(len(ids), min(args.runs, len(ids) + per_wave)):
                v = variants[i % len(variants)]
                run_id = common.start(v, i, repo_name=f"{pattern}-{i}")
                ids.append(run_id)
                kinds[run_id] = v
        until = time.monotonic() + rng.uniform(args.kill_min, args.kill_max)
        while time.monotonic() < until:
            common.answer_gates(ids, decided)
            if time.monotonic() >= next_sweep:
                swept.update(engine.sweep(idle_seconds=args.sweep_idle))
                next_sweep = time.monotonic() + args.sweep_every
            if len(ids) == args.runs and common.settled(ids, decided):
                break
            time.sleep(0.03)
        if len(ids) == args.runs and common.settled(ids, decided):
            break
        if time.monotonic() > deadline:
            break
        if kills < args.max_kills:
            workers.kill()
            kills += 1
            workers.start()
    # No more kills: let whatever is left finish (or show that it cannot).
    while len(ids) == args.runs and not common.settled(ids, decided) \
            and time.monotonic() < deadline:
        common.answer_gates(ids, decided)
        if time.monotonic() >= next_sweep:
            swept.update(engine.sweep(idle_seconds=args.sweep_idle))
            next_sweep = time.monotonic() + args.sweep_every
        time.sleep(0.05)
    wall = time.monotonic() - started
    workers.stop()
    audits = [common.audit(i, expected[kinds[i].label], decided) for i in ids]
    statuses = dict(Run.objects.filter(pk__in=ids).values_list("pk", "status"))
    return {
        "pattern": pattern, "runs": len(ids), "kills": kills,
        "terminal": sum(s in ("completed", "failed", "cancelled", "budget_exceeded")
                        for s in statuses.values()),
        "waiting": sum(s.startswith("awaiting_") for s in statuses.values()),
        "resumed": sum(a.resumed for a in audits), "swept": len(swept),
        "decisions": len(decided),
        "duplicates": sum(bool(a.duplicates) for a in audits),
        "missing": sum(bool(a.missing) for a in audits),
        "lost": sum(bool(a.lost_decisions) for a in audits),
        "other": sum(bool(a.other) for a in audits),
        "wall": wall, "audits": audits,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="runs per pattern (default 50)")
    parser.add_argument("--patterns", nargs="+", default=list(common.PATTERN_NAMES),
                        choices=common.PATTERN_NAMES)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--latency", type=float, default=0.05,
                        help="seconds per offline model call (default 0.05)")
    parser.add_argument("--kill-min", type=float, default=0.3)
    parser.add_argument("--kill-max", type=float, default=2.0)
    parser.add_argument("--max-kills", type=int, default=12, help="kills per pattern at most")
    parser.add_argument("--waves", type=int, default=8, help="runs start in this many waves")
    parser.add_argument("--concurrency", type=int, default=20, help="worker threads")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes at once; each kill takes one of them")
    parser.add_argument("--sweep-every", type=float, default=2.0)
    parser.add_argument("--sweep-idle", type=float, default=6.0)
    parser.add_argument("--phase-timeout", type=float, default=240.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    total = time.monotonic()
    rng = random.Random(args.seed)
    stack = common.Stack("sigkill", keep=args.keep)
    rows = []
    try:
        expected = {}
        for p in args.patterns:
            for v in common.VARIANTS[p]:
                expected[v.label] = common.snapshot(common.run_clean(
                    v, 0, repo_name=f"clean-{p}-{v.name}"))
        members = [common.Workers(stack.dir, node=f"sigkill{i or ''}",
                                  concurrency=args.concurrency,
                                  QUORUM_OFFLINE_LATENCY=args.latency)
                   for i in range(args.workers)]
        for w in members:
            stack.own(w)
        workers = members[0] if args.workers == 1 else Pool(members, random.Random(args.seed))
        for p in args.patterns:
            row = phase(p, workers, expected, args, rng)
            rows.append(row)
            print(f"  {p}: {row['runs']} runs, {row['kills']} kills, {row['wall']:.0f} s",
                  flush=True)
    finally:
        stack.close()

    print(f"\n# SIGKILL of the worker — {time.strftime('%Y-%m-%d %H:%M')}, {common.machine()}")
    print(f"# SQLite (WAL); offline model {args.latency} s/call, {args.workers} worker "
          f"process(es) × {args.concurrency} threads (each kill takes one), kill every "
          f"{args.kill_min}-{args.kill_max} s (seed {args.seed}), runs in {args.waves} waves, "
          f"sweeper every {args.sweep_every} s after {args.sweep_idle} s idle\n")
    print(common.table(
        ["pattern", "runs", "kills", "stages resumed", "requeued by sweeper", "decisions", "terminal",
         "waiting", "duplicates", "missing", "lost decisions", "other problems", "wall s"],
        [[r["pattern"], r["runs"], r["kills"], r["resumed"], r["swept"], r["decisions"],
          r["terminal"], r["waiting"], r["duplicates"], r["missing"], r["lost"], r["other"],
          f"{r['wall']:.0f}"] for r in rows]))
    failed = [a for r in rows for a in r["audits"] if not a.ok]
    for a in failed[:30]:
        print(f"\nrun {a.run_id} ({a.status}):")
        for what, items in (("duplicate", a.duplicates), ("missing", a.missing),
                            ("lost decision", a.lost_decisions), ("problem", a.other)):
            for item in items:
                print(f"  {what}: {item}")
    runs = sum(r["runs"] for r in rows)
    print(f"\n{'PASS' if not failed else 'FAIL'}: {runs - len(failed)} of {runs} runs intact, "
          f"{sum(r['kills'] for r in rows)} kills, {time.monotonic() - total:.0f} s in all.")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
