"""Where a run waits on PostgreSQL (issue 37): every statement and commit of one in-process
4-call Plan-and-Execute run, timed at the driver (psycopg's ``Cursor.execute`` and
``Connection.commit``), on a throwaway cluster (tests/pg.py) with the fake provider at latency
``--latency``; then what one query costs after the thread has waited ``--idle`` seconds, on a
connection kept and on one given back to the pool before the wait (as a run waiting on its
model gives it back).

A statement sent in pipeline mode (a stage's commit, agents_app/prepared.py) returns at once:
its time is the Python that queued it, and the wait is counted in the ``COMMIT`` after it.

    .venv/bin/python tests/benchmarks/bench_pg_waits.py [--runs 12] [--latency 0] [--idle 0.02]
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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive(int, 3, 200), default=12,
                        help="runs timed (the last one's statements are listed)")
    parser.add_argument("--latency", type=positive(float, 0.0, 5.0), default=0.0,
                        help="the fake provider's latency per call, s")
    parser.add_argument("--idle", type=positive(float, 0.0, 5.0), default=0.02,
                        help="the wait before each query of the second part, s")
    parser.add_argument("--queries", type=positive(int, 10, 10000), default=100)
    return parser.parse_args(argv)


class Timed:
    """Every ``Cursor.execute`` and ``Connection.commit`` of psycopg, timed, while on."""

    def __init__(self) -> None:
        import psycopg

        self.rows: list[tuple[float, str]] = []
        self.on = False
        execute, commit = psycopg.Cursor.execute, psycopg.Connection.commit
        timed = self

        def timed_execute(cursor, query, params=None, **kwargs):
            started = time.perf_counter()
            try:
                return execute(cursor, query, params, **kwargs)
            finally:
                if timed.on:
                    text = query if isinstance(query, str) else str(query)
                    timed.rows.append((1000 * (time.perf_counter() - started),
                                       " ".join(text.split())[:90]))

        def timed_commit(conn):
            started = time.perf_counter()
            try:
                return commit(conn)
            finally:
                if timed.on:
                    timed.rows.append((1000 * (time.perf_counter() - started), "COMMIT"))

        psycopg.Cursor.execute = timed_execute
        psycopg.Connection.commit = timed_commit


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if pg.missing():
        sys.exit(f"bench_pg_waits: {pg.missing()}")
    from tests.benchmarks.bench_vs_langgraph import ROLES, TASK, FakeProcess
    from tests.stack import free_port

    with tempfile.TemporaryDirectory(prefix="quorum-pg-waits-") as tmp, \
            contextlib.ExitStack() as cleanup:
        cluster = cleanup.enter_context(pg.PgCluster(max_connections=100))
        fake = FakeProcess(args.latency)
        cleanup.callback(fake.stop)
        setup_django(Path(tmp), free_port(), DATABASE_URL=cluster.url, QUORUM_API_BASE=fake.url,
                     OPENAI_API_KEY="sk-bench-fake", QUORUM_LOG_LEVEL="ERROR")
        from django.conf import settings
        from django.db import connection

        from agents_app import engine
        from agents_app.models import Run
        from common import dbpool
        from tests.fakeprovider import fake_models

        settings.QUORUM_API_BASE = fake.url
        owner, models = make_user(), fake_models(*ROLES)
        timed = Timed()
        walls, waits = [], []
        for i in range(args.runs + 2):  # two warm-up runs
            pk = engine.create_run(owner, "plan_execute", TASK.format(i=i),
                                   options={"auto_approve": True}, models=models,
                                   enqueue=False).pk
            timed.rows.clear()
            timed.on = True
            started = time.perf_counter()
            run = engine.run_inline(pk)
            wall = 1000 * (time.perf_counter() - started)
            timed.on = False
            if run.status != "completed":
                raise RuntimeError(f"run {pk}: {run.status} {run.error}")
            if i >= 2:
                walls.append(wall)
                waits.append(sum(ms for ms, _ in timed.rows))
        print(f"# bench_pg_waits — {machine()}; fake provider L = {args.latency:g} s; "
              f"{args.runs} runs")
        print("\nThe last run's statements and commits (ms at the driver):\n")
        for ms, text in timed.rows:
            print(f"    {ms:7.3f}  {text}")
        med = statistics.median
        print(f"\n| per run (median) | figure |\n|---|---:|\n"
              f"| driver calls | {len(timed.rows)} |\n"
              f"| time in them, ms | {med(waits):.2f} |\n| the run's wall, ms | {med(walls):.1f} |")

        def query_after_idle(give_back: bool) -> float:
            times = []
            for _ in range(args.queries):
                if give_back:
                    dbpool.release()
                time.sleep(args.idle)
                started = time.perf_counter()
                Run.objects.filter(pk=pk).exists()
                times.append(1000 * (time.perf_counter() - started))
            return med(times)

        connection.ensure_connection()
        hot = []
        for _ in range(args.queries):
            started = time.perf_counter()
            Run.objects.filter(pk=pk).exists()
            hot.append(1000 * (time.perf_counter() - started))
        kept, given = query_after_idle(False), query_after_idle(True)
        print(f"\n| one query, median ms | |\n|---|---:|\n| back to back | {med(hot):.3f} |\n"
              f"| after {args.idle:g} s idle, connection kept | {kept:.3f} |\n"
              f"| after {args.idle:g} s idle, connection given back to the pool | {given:.3f} |")


if __name__ == "__main__":
    main()
