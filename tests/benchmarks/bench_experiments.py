"""An experiment grid (issue 34), offline on this machine: 3 patterns × 3 model assignments ×
20 tasks × 5 repetitions = 900 runs by default, driven in this process one run at a time the
way ``manage.py experiment run --here`` does (each run's end scores it and starts the next),
with two evaluators. Printed: the wall time and runs per second; that every slot has exactly
one run (none lost, none doubled); and, on the finished grid, the results page's server time,
the CSV and JSON exports' and each chart's (p50 of N requests through Django's test client,
DEBUG=false).

    .venv/bin/python tests/benchmarks/bench_experiments.py [--tasks 20] [--repetitions 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import (  # noqa: E402
    machine,
    make_user,
    positive,
    settings_note,
    setup_django,
)

PATTERNS = ("plan_execute", "reflective", "debate")
TASKS = ("Name the largest planet, then say why.", "List three prime numbers.",
         "Explain a queue in one line.", "Compare tabs and spaces briefly.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=positive(int, 1, 500), default=20)
    parser.add_argument("--repetitions", type=positive(int, 1, 50), default=5)
    parser.add_argument("--requests", type=positive(int, 1, 100), default=5,
                        help="requests timed of each page, export and chart")
    parser.add_argument("--no-share", action="store_true",
                        help="every cell runs every stage (no forks of a shared start)")
    parser.error = lambda message: parser.exit(2, f"bench_experiments: {message}\n")
    args = parser.parse_args()
    from tests.stack import free_port, start_redis

    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp:
        var = Path(tmp)
        setup_django(var, free_port())
        redis = start_redis(var)
        try:
            owner = make_user()
            note = settings_note()
            grid = run_grid(owner, args)
            pages = time_pages(owner, grid["experiment"], args.requests)
        finally:
            redis.stop()
    print(f"bench_experiments · {machine()} · {note}")
    print(f"grid: {grid['cells']} cells × {args.tasks} tasks × {args.repetitions} repetitions "
          f"= {grid['planned']} runs, offline, in one process")
    print(f"  wall time {grid['seconds']:.1f} s · {grid['planned'] / grid['seconds']:.1f} runs/s"
          f" · status {grid['status']} · runs {grid['runs']} · distinct slots {grid['slots']}"
          f" · lost {grid['planned'] - grid['slots']} · doubled {grid['runs'] - grid['slots']}")
    print(f"  model calls made {grid['calls']:,} · runs that are forks of another cell's run "
          f"{grid['forks']} ({'sharing off' if args.no_share else 'sharing on'})")
    print(f"  evaluations {grid['evaluations']} (2 per completed run: "
          f"{2 * grid['completed']})")
    for name, ms in pages.items():
        print(f"  {name}: p50 {ms:.0f} ms")


def run_grid(owner, args) -> dict:
    from agents_app import engine
    from agents_app.engine import experiment_hooks as hooks
    from agents_app.experiments import service
    from agents_app.experiments.datasets import Row
    from agents_app.experiments.spec import parse_spec
    from agents_app.models import Evaluation

    engine.scheduling.schedule = lambda *a, **k: None  # this process runs every run
    hooks.ANNOUNCE = False
    rows = [Row(key=f"t{i}", task=TASKS[i % len(TASKS)] + f" (case {i})",
                reference=TASKS[i % len(TASKS)]) for i in range(args.tasks)]
    dataset = service.save_dataset(owner, "bench", rows)
    spec = parse_spec({
        "name": "bench grid", "repetitions": args.repetitions, "concurrency": 1,
        "patterns": [{"name": p, "options": {"max_rounds": 2} if p == "debate" else {}}
                     for p in PATTERNS],
        "assignments": [{"models": {"*": "offline/default"}},
                        {"label": "brief", "models": {"*": "offline/brief"}},
                        {"label": "mixed", "models": {"*": "offline/default",
                                                      "executor": "offline/brief",
                                                      "critic": "offline/brief",
                                                      "judge": "offline/brief"}}],
        "evaluators": [{"kind": "regex", "pattern": r"\w+"}, {"kind": "exact"}],
        "gates": {"plan_approval": "approve"}, "share_stages": not args.no_share})
    started = time.perf_counter()
    experiment = service.launch(owner, dataset, spec, enqueue=False)
    service.run_here(experiment)
    seconds = time.perf_counter() - started
    experiment.refresh_from_db()
    runs = experiment.runs.count()
    slots = experiment.runs.values("cell_id", "item_id", "repetition").distinct().count()
    from agents_app.models import ModelCall

    return {"experiment": experiment, "cells": experiment.cells.count(),
            "calls": ModelCall.objects.filter(run__experiment=experiment).count(),
            "forks": experiment.runs.filter(forked_from__isnull=False).count(),
            "planned": experiment.planned_runs, "seconds": seconds,
            "status": experiment.status, "runs": runs, "slots": slots,
            "completed": experiment.runs.filter(status="completed").count(),
            "evaluations": Evaluation.objects.filter(run__experiment=experiment).count()}


def time_pages(owner, experiment, n: int) -> dict[str, float]:
    from django.test import Client
    from django.urls import reverse

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(owner)
    urls = {"results page": experiment.get_absolute_url(),
            "CSV export": reverse("experiment_csv", args=[experiment.pk]),
            "JSON export": reverse("experiment_json", args=[experiment.pk])}
    for chart in ("cost_vs_score", "heatmap", "latency"):
        urls[f"chart {chart}"] = reverse("experiment_chart", args=[experiment.pk, chart])
    out = {}
    for name, url in urls.items():
        times = []
        for _ in range(n):
            t = time.perf_counter()
            response = client.get(url)
            body = b"".join(response.streaming_content) if response.streaming else \
                response.content
            times.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200 and body, (name, response.status_code)
        out[name] = statistics.median(times)
    return out


if __name__ == "__main__":
    main()
