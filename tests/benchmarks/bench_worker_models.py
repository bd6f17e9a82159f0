"""Worker process models side by side: N Plan-and-Execute runs at once (four calls each, the
fake provider over HTTP at latency L) through Celery thread-pool workers in different shapes,
e.g. one process of 200 threads against two of 100 (one per core). Models are interleaved
round by round, each started fresh and warmed up, so load from elsewhere hits them alike.
DEBUG=false.

    .venv/bin/python tests/benchmarks/bench_worker_models.py [--models 1x200 2x100] [--runs 3]
        [--n 200] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.bench_vs_langgraph import (  # noqa: E402
    ROLES,
    FakeProcess,
    cpu_model,
    positive,
    quorum_batch,
)
from tests.benchmarks.common import machine, make_user, peak_rss_mb, setup_django  # noqa: E402


def shape(text: str) -> tuple[int, int]:
    try:
        processes, threads = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not PROCESSESxTHREADS, e.g. 2x100") from None
    if not (1 <= processes <= 16 and 1 <= threads <= 1000):
        raise argparse.ArgumentTypeError(f"{text}: 1–16 processes of 1–1000 threads")
    return processes, threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=shape, nargs="+", default=[(1, 200), (2, 100)])
    parser.add_argument("--runs", type=positive(int, 1, 20), default=3)
    parser.add_argument("--n", type=positive(int, 1, 1000), default=200)
    parser.add_argument("--latency", type=positive(float, 0.0, 10.0), default=1.0)
    parser.error = lambda message: parser.exit(2, f"bench_worker_models: {message}\n")
    args = parser.parse_args()
    load = os.getloadavg()[0]

    from tests.fakeprovider import fake_models
    from tests.stack import free_port, start_redis, start_worker

    rows: dict[tuple[int, int], list[tuple[float, float, float]]] = {m: [] for m in args.models}
    with tempfile.TemporaryDirectory(prefix="quorum-worker-models-") as tmp:
        var = Path(tmp)
        fake = FakeProcess(args.latency)
        env = {"QUORUM_API_BASE": fake.url, "OPENAI_API_KEY": "sk-bench-fake", "DEBUG": "false",
               "QUORUM_LOG_LEVEL": "ERROR", "SECRET_KEY": "bench-not-secret"}
        try:
            setup_django(var, free_port(), **env)
            owner = make_user()
            models = fake_models(*ROLES)
            redis = start_redis(var)
            try:
                for _ in range(args.runs):
                    for processes, threads in args.models:
                        workers = [start_worker(var, node=f"w{processes}x{threads}-{i}",
                                                concurrency=threads, QUORUM_VAR_DIR=var, **env)
                                   for i in range(processes)]
                        pids = [w.popen.pid for w in workers]
                        try:
                            quorum_batch(owner, models, 2 * processes, pids)  # warm-up
                            one, _ = quorum_batch(owner, models, 1, pids)
                            makespan, cpu = quorum_batch(owner, models, args.n, pids)
                            rss = sum(peak_rss_mb(pid) for pid in pids)
                        finally:
                            for w in workers:
                                w.stop()
                        rows[(processes, threads)].append((makespan / one, 1000 * cpu / args.n,
                                                           rss))
                        print(f"# {processes} × {threads}: {makespan:.1f} s, one run {one:.1f} s "
                              f"({makespan / one:.2f}×), {1000 * cpu / args.n:.0f} ms CPU per "
                              f"run, {rss:.0f} MB; load {os.getloadavg()[0]:.1f}", flush=True)
            finally:
                redis.stop()
        finally:
            fake.stop()

    med = statistics.median
    print(f"# Worker process models — {machine()}{cpu_model()}")
    print(f"# DEBUG=false; {args.n} four-call Plan-and-Execute runs at once, fake provider over "
          f"HTTP at L = {args.latency:g} s; SQLite, embedded Redis; medians of {args.runs} "
          f"interleaved rounds; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("| processes × threads | makespan ÷ one run | worker CPU per run | peak RSS (all) |")
    print("|---|---:|---:|---:|")
    for (processes, threads), got in rows.items():
        print(f"| {processes} × {threads} | {med(r for r, _, _ in got):.2f}× "
              f"({min(r for r, _, _ in got):.2f}–{max(r for r, _, _ in got):.2f}) | "
              f"{med(c for _, c, _ in got):.0f} ms | {max(m for _, _, m in got):.0f} MB |")


if __name__ == "__main__":
    main()
