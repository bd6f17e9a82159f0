"""Worker process models side by side: N Plan-and-Execute runs at once (four calls each, the
fake provider over HTTP at latency L) through Celery thread-pool workers in different shapes,
e.g. one process of 200 threads against two of 100 (one per core) each started on its own,
and two of 100 forked from one warm parent (``2x100f``: ``manage.py worker``, what ``make dev``
runs; the imported modules shared copy-on-write). Memory is printed both as the summed peak RSS and as the summed
PSS, which counts a page shared by two processes half in each. Models are interleaved
round by round, each started fresh and warmed up, so load from elsewhere hits them alike.
DEBUG=false.

    .venv/bin/python tests/benchmarks/bench_worker_models.py [--models 1x200 2x100 2x100f] [--runs 3]
        [--n 200] [--latency 1.0]

``2x100f/t0`` is make dev's shape with turns off (``QUORUM_WORKER_TURNS=0``, common/turns.py).
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
    quorum_batch,
)
from tests.benchmarks.common import (  # noqa: E402
    machine,
    make_user,
    peak_rss_mb,
    positive,
    pss_mb,
    setup_django,
)


def shape(text: str) -> tuple[int, int, bool, int | None]:
    """PROCESSESxTHREADS, with a trailing ``f``: forked from one parent after the imports; and
    ``/tN``: N turns per process (``QUORUM_WORKER_TURNS``; default: the setting's)."""
    body, _, turns = text.lower().partition("/t")
    forked = body.endswith("f")
    try:
        processes, threads = (int(x) for x in body.removesuffix("f").split("x"))
        turn_count = int(turns) if turns else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not PROCESSESxTHREADS, e.g. 2x100, "
                                         "2x100f or 2x100f/t0") from None
    if not (1 <= processes <= 16 and 1 <= threads <= 1000):
        raise argparse.ArgumentTypeError(f"{text}: 1–16 processes of 1–1000 threads")
    if turn_count is not None and not 0 <= turn_count <= 1000:
        raise argparse.ArgumentTypeError(f"{text}: 0–1000 turns")
    return processes, threads, forked, turn_count


def label(model: tuple[int, int, bool, int | None]) -> str:
    processes, threads, forked, turn_count = model
    return (f"{processes} × {threads}" + (" forked from one parent" if forked else "")
            + ("" if turn_count is None else
               f", {turn_count or 'unlimited'} turn{'' if turn_count == 1 else 's'}"))


def start_forked(var: Path, processes: int, threads: int, env: dict):
    """``manage.py worker``: one parent, ``processes`` workers forked from it."""
    from tests.stack import child_pids, start_workers

    proc = start_workers(var, node=f"f{processes}x{threads}", processes=processes,
                         concurrency=threads, QUORUM_VAR_DIR=var, **env)
    return [proc], [proc.popen.pid, *child_pids(proc.popen.pid)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=shape, nargs="+",
                        default=[(1, 200, False, None), (2, 100, False, None),
                                 (2, 100, True, None)])
    parser.add_argument("--runs", type=positive(int, 1, 20), default=3)
    parser.add_argument("--n", type=positive(int, 1, 1000), default=200)
    parser.add_argument("--latency", type=positive(float, 0.0, 10.0), default=1.0)
    parser.error = lambda message: parser.exit(2, f"bench_worker_models: {message}\n")
    args = parser.parse_args()
    load = os.getloadavg()[0]

    from tests.fakeprovider import fake_models
    from tests.stack import free_port, start_redis, start_worker

    rows: dict[tuple[int, int, bool, int | None], list[tuple[float, float, float, float]]] = {
        m: [] for m in args.models}
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
                    for model in args.models:
                        processes, threads, forked, turn_count = model
                        shaped = env if turn_count is None else {
                            **env, "QUORUM_WORKER_TURNS": str(turn_count)}
                        if forked:
                            workers, pids = start_forked(var, processes, threads, shaped)
                        else:
                            workers = [start_worker(var, node=f"w{processes}x{threads}-{i}",
                                                    concurrency=threads, QUORUM_VAR_DIR=var,
                                                    **shaped)
                                       for i in range(processes)]
                            pids = [w.popen.pid for w in workers]
                        try:
                            quorum_batch(owner, models, 2 * processes, pids)  # warm-up
                            one = quorum_batch(owner, models, 1, pids).makespan
                            makespan, cpu, created = quorum_batch(owner, models, args.n, pids)
                            rss = sum(peak_rss_mb(pid) for pid in pids)
                            pss = sum(pss_mb(pid) for pid in pids)
                        finally:
                            for w in workers:
                                w.stop()
                        rows[model].append((makespan / one, 1000 * cpu / args.n, rss, pss))
                        print(f"# {label(model)}: {makespan:.1f} s (the last run created "
                              f"after {created:.1f} s), one run {one:.1f} s "
                              f"({makespan / one:.2f}×), {1000 * cpu / args.n:.0f} ms CPU per "
                              f"run, peak RSS {rss:.0f} MB, PSS {pss:.0f} MB; load "
                              f"{os.getloadavg()[0]:.1f}", flush=True)
            finally:
                redis.stop()
        finally:
            fake.stop()

    med = statistics.median
    print(f"# Worker process models — {machine()}{cpu_model()}")
    print(f"# DEBUG=false; {args.n} four-call Plan-and-Execute runs at once, fake provider over "
          f"HTTP at L = {args.latency:g} s; SQLite, embedded Redis; medians of {args.runs} "
          f"interleaved rounds; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("# peak RSS: each process's peak, summed (shared pages counted in each); PSS: the "
          "memory they take together, after the batch")
    print("| processes × threads | makespan ÷ one run | worker CPU per run | peak RSS (sum) | "
          "PSS (sum) |")
    print("|---|---:|---:|---:|---:|")
    for model, got in rows.items():
        ratios = [g[0] for g in got]
        print(f"| {label(model)} | {med(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}) | "
              f"{med(g[1] for g in got):.0f} ms | {max(g[2] for g in got):.0f} MB | "
              f"{max(g[3] for g in got):.0f} MB |")


if __name__ == "__main__":
    main()
