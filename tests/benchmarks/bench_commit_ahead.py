"""A stage's commit made while the next stage's first call is out (issue 37,
agents_app/engine/ahead.py), against the commit in the stage's own thread: one process, the
4-call Plan-and-Execute run in process (``engine.run_inline``), the fake provider (a process
of its own, over HTTP) answering each call after ``--latency`` seconds, the two ways
interleaved round by round with four direct LiteLLM calls, so the machine's noise falls on
both; the commit made ahead once more with Redis out of reach, so that the worker reads the
run for a cancel at each stage instead of asking Redis (agents_app/engine/cancels.py).
Framework time per call: (the run's wall − the four direct calls' wall) ÷ 4, as
``bench_vs_langgraph.py`` counts it. On a throwaway PostgreSQL cluster (tests/pg.py) with
``--database postgres``, else on SQLite.

    .venv/bin/python tests/benchmarks/bench_commit_ahead.py [--database postgres]
        [--rounds 12] [--latency 0.5]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests import pg  # noqa: E402
from tests.benchmarks.common import machine, make_user, positive, setup_django  # noqa: E402

CALLS = 4


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--rounds", type=positive(int, 2, 500), default=12,
                        help="rounds counted (each: direct calls, one run each way)")
    parser.add_argument("--latency", type=positive(float, 0.0, 10.0), default=0.5,
                        help="seconds the fake provider takes to answer a call")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.database == "postgres" and pg.missing():
        sys.exit(f"bench_commit_ahead: {pg.missing()}")
    from tests.benchmarks.bench_vs_langgraph import ROLES, TASK, FakeProcess
    from tests.stack import free_port

    with tempfile.TemporaryDirectory(prefix="quorum-ahead-") as tmp, \
            contextlib.ExitStack() as cleanup:
        extra = {}
        if args.database == "postgres":
            cluster = cleanup.enter_context(pg.PgCluster(max_connections=100))
            extra["DATABASE_URL"] = cluster.url
        fake = FakeProcess(args.latency)
        cleanup.callback(fake.stop)
        setup_django(Path(tmp), free_port(), QUORUM_API_BASE=fake.url,
                     OPENAI_API_KEY="sk-bench-fake", QUORUM_LOG_LEVEL="ERROR", **extra)
        import litellm
        from django.conf import settings

        from agents_app import engine
        from agents_app.engine import cancels
        from tests.fakeprovider import fake_models
        from tests.stack import start_redis

        cleanup.callback(start_redis(Path(tmp)).stop)
        redis_url, away = settings.REDIS_URL, f"redis://127.0.0.1:{free_port()}/0"

        settings.QUORUM_API_BASE = fake.url
        owner, models = make_user(), fake_models(*ROLES)
        messages = [{"role": "user", "content": TASK.format(i=0)}]
        ways = {"in the stage's thread": (False, redis_url), "ahead": (True, redis_url),
                "ahead, Redis out of reach": (True, away)}
        walls: dict[str, list[float]] = {"direct": [], **{way: [] for way in ways}}
        for i in range(args.rounds + 2):  # two warm-up rounds
            started = time.perf_counter()
            for _ in range(CALLS):
                litellm.completion(model="openai/fake-executor", api_base=fake.url,
                                   api_key="sk-bench-fake", messages=messages, timeout=60,
                                   num_retries=0)
            direct = time.perf_counter() - started
            # The order rotates, so that no way always runs on a warmer cache.
            order = list(ways)[i % 3:] + list(ways)[:i % 3]
            for way in order:
                settings.QUORUM_COMMIT_AHEAD, settings.REDIS_URL = ways[way]
                cancels._client, cancels._unanswered_until = None, 0.0
                pk = engine.create_run(owner, "plan_execute", TASK.format(i=i),
                                       options={"auto_approve": True}, models=models,
                                       enqueue=False).pk
                started = time.perf_counter()
                run = engine.run_inline(pk)
                if i >= 2:
                    walls[way].append(time.perf_counter() - started)
                if run.status != "completed":
                    raise RuntimeError(f"run {pk}: {run.status} {run.error}")
            if i >= 2:
                walls["direct"].append(direct)
        med = statistics.median
        base = med(walls["direct"])
        print(f"# bench_commit_ahead — {machine()}; "
              f"{'PostgreSQL (max_connections 100)' if args.database == 'postgres' else 'SQLite'}"
              f"; fake provider L = {args.latency:g} s; {args.rounds} interleaved rounds")
        print("| the stage's commit | run wall, ms (median) | framework time per call, ms |")
        print("|---|---:|---:|")
        for way in ways:
            print(f"| {way} | {1000 * med(walls[way]):.1f} | "
                  f"{1000 * (med(walls[way]) - base) / CALLS:.2f} |")
        print(f"| (four direct LiteLLM calls) | {1000 * base:.1f} | |")


if __name__ == "__main__":
    main()
