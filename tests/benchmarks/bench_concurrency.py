"""Concurrency benchmark: N Plan-and-Execute runs started at once against a model with a
fixed latency, through the real stack (Redis, a thread-pool Celery worker, SQLite).

Prints, for each N, the makespan (first enqueue to last completion), its ratio to the
makespan of one run, and the worker's peak resident memory. Each run makes 5 model calls
(planner, 3 executors, synthesizer), so one run takes about 5 × latency.

    .venv/bin/python tests/benchmarks/bench_concurrency.py [--latency 1.0] [--n 1 50 200]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import (  # noqa: E402
    child_env,
    cpu_seconds,
    peak_rss_mb,
    setup_django,
)


def run_batch(n: int, owner) -> float:
    from agents_app import engine
    from agents_app.models import Run

    models = {r: "offline/default" for r in ("planner", "executor", "synthesizer")}
    start = time.monotonic()
    ids = [engine.create_run(owner, "plan_execute", f"Collect logs for service {i}, then find "
                             "the error, and finally write a report.",
                             options={"auto_approve": True}, models=models).pk
           for i in range(n)]
    while True:
        statuses = list(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
        if all(s in ("completed", "failed", "cancelled", "budget_exceeded") for s in statuses):
            break
        if time.monotonic() - start > 600:
            raise TimeoutError(f"{n} runs did not finish in 600 s")
        time.sleep(0.05)
    elapsed = time.monotonic() - start
    bad = [s for s in statuses if s != "completed"]
    if bad:
        raise RuntimeError(f"{len(bad)} of {n} runs did not complete: {set(bad)}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per model call")
    parser.add_argument("--n", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--concurrency", type=int, default=250, help="threads per worker")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--database-url", default="",
                        help="e.g. a Postgres URL (an empty database); default: a temporary SQLite")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp:
        var = Path(tmp)
        from tests.stack import free_port

        db = {"DATABASE_URL": args.database_url} if args.database_url else {}
        setup_django(var, free_port(), **db)
        from django.contrib.auth import get_user_model

        from tests.stack import start_redis, start_worker

        owner = get_user_model().objects.create_user("bench")
        redis = start_redis(var)
        workers = [start_worker(var, node=f"bench{i}", concurrency=args.concurrency,
                                QUORUM_OFFLINE_LATENCY=args.latency, QUORUM_LOG_LEVEL="WARNING",
                                QUORUM_VAR_DIR=var, **db, **child_env())
                   for i in range(args.workers)]
        pids = [w.popen.pid for w in workers]
        try:
            run_batch(1, owner)  # warm-up: imports, connections
            rows = []
            base = None
            for n in args.n:
                cpu_before = sum(cpu_seconds(pid) for pid in pids)
                makespan = run_batch(n, owner)
                cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
                base = base or makespan
                rows.append((n, makespan, makespan / base, cpu,
                             sum(peak_rss_mb(pid) for pid in pids)))
        finally:
            for w in workers:
                w.stop()
            redis.stop()

    print(f"# Concurrency benchmark — {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"# model latency {args.latency} s/call, 5 calls/run; {args.workers} worker "
          f"process(es) x {args.concurrency} threads; "
          f"{'Postgres' if args.database_url else 'SQLite'}; embedded Redis")
    print(f"{'N runs':>7} {'makespan s':>11} {'vs 1 run':>9} {'one by one':>11} "
          f"{'worker CPU s':>13} {'CPU ms/run':>11} {'workers peak RSS MB':>20}")
    for n, makespan, ratio, cpu, rss in rows:
        print(f"{n:>7} {makespan:>11.2f} {ratio:>8.2f}x {n * base:>10.0f}s {cpu:>13.1f} "
              f"{1000 * cpu / n:>11.0f} {rss:>20.0f}")


if __name__ == "__main__":
    main()
