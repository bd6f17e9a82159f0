"""Fault: an experiment's grid while its Celery worker is killed with SIGKILL (issue 34).

A grid (default 2 patterns × 2 model assignments × 10 tasks × 3 repetitions = 120 runs, the
second assignment differing only in the executor, so half the runs are forks) runs on a real
worker (thread pool, offline model slowed to ``--latency`` s a call); every ``--kill-every``
seconds (seeded jitter) the worker's process group gets SIGKILL and a new worker with the same
node name starts, as a service manager restarts it. A stand-in for the beat sweeps every
``--sweep-every`` s: the engine's sweep (runs with no lease and no progress) and the
experiments' (runs ended but not scored, grids not topped up). Plan gates are approved by the
experiment's policy.

At the end: the experiment completed; every (cell, task, repetition) has exactly one run —
none lost, none doubled; every run completed; every completed run has exactly one evaluation
per evaluator; the forked cell's planner made no call.

    .venv/bin/python tests/faults/experiment_kill.py [--tasks 10] [--kills 3]

Exit status 0 when all of it holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.faults import common  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--kill-every", type=float, default=5.0)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--sweep-every", type=float, default=2.0)
    parser.add_argument("--sweep-idle", type=float, default=3.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args()
    rng = random.Random(args.seed)  # noqa: S311 - when to kill, not a secret

    stack = common.Stack("experiment-kill", persistent_redis=True,
                         QUORUM_OFFLINE_LATENCY=str(args.latency))
    try:
        workers = stack.own(common.Workers(stack.dir, node="grid", concurrency=20))
        workers.start()
        return run(args, rng, workers)
    finally:
        stack.close()


def run(args, rng: random.Random, workers) -> int:
    from django.contrib.auth import get_user_model

    from agents_app import engine
    from agents_app.experiments import service
    from agents_app.experiments.datasets import Row
    from agents_app.experiments.spec import parse_spec
    from agents_app.models import ModelCall, Run

    owner = get_user_model().objects.create_user("faults")
    rows = [Row(key=f"t{i}", task=f"Check part {i} of the service, then write a report.",
                reference="report") for i in range(args.tasks)]
    dataset = service.save_dataset(owner, "faults", rows)
    spec = parse_spec({
        "name": "killed grid", "repetitions": args.repetitions, "concurrency": 12,
        "patterns": [{"name": "plan_execute"}, {"name": "reflective"}],
        "assignments": [{"models": {"*": "offline/default"}},
                        {"label": "brief executor",
                         "models": {"*": "offline/default", "executor": "offline/brief"}}],
        "evaluators": [{"kind": "regex", "pattern": r"\w+"}, {"kind": "exact"}],
        "gates": {"plan_approval": "approve"}})
    started = time.monotonic()
    experiment = service.launch(owner, dataset, spec)
    kills, next_kill = 0, started + args.kill_every * rng.uniform(0.5, 1.5)
    next_sweep = started + args.sweep_every
    while time.monotonic() - started < args.timeout:
        experiment.refresh_from_db()
        if experiment.is_finished:
            break
        now = time.monotonic()
        if kills < args.kills and now >= next_kill:
            ended = experiment.runs.filter(status="completed").count()
            print(f"kill {kills + 1} at {now - started:.1f} s ({ended} runs ended)")
            workers.kill()
            workers.start()
            kills += 1
            next_kill = now + args.kill_every * rng.uniform(0.5, 1.5)
        if now >= next_sweep:
            engine.sweep(idle_seconds=args.sweep_idle)
            service.sweep_experiments()
            next_sweep = time.monotonic() + args.sweep_every
        time.sleep(0.2)
    seconds = time.monotonic() - started
    experiment.refresh_from_db()
    runs = Run.objects.filter(experiment=experiment)
    slots = runs.values("cell_id", "item_id", "repetition").distinct().count()
    completed = runs.filter(status="completed").count()
    evaluations = sum(r.evaluations.count() for r in runs)
    twice = [r.pk for r in runs if r.evaluations.values("evaluator").distinct().count()
             != r.evaluations.count()]
    brief = experiment.cells.filter(label__contains="brief executor", pattern="plan_execute")
    forked_planner = ModelCall.objects.filter(run__cell__in=brief, role="planner").count()
    print(f"common: {common.machine()}")
    print(f"grid {experiment.planned_runs} runs · {kills} kills · {seconds:.1f} s · status "
          f"{experiment.status} · runs {runs.count()} · slots {slots} · completed {completed}"
          f" · evaluations {evaluations} (want {2 * completed}) · scored twice {len(twice)}"
          f" · forks {runs.filter(forked_from__isnull=False).count()} · planner calls in "
          f"forked cells {forked_planner}")
    ok = (experiment.status == "completed" and runs.count() == slots == experiment.planned_runs
          == completed and evaluations == 2 * completed and not twice
          and forked_planner == 0 and kills >= min(1, args.kills))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
