"""Memory a run in flight holds (issue 37): one process, N threads each advancing a
Plan-and-Execute run in process (``engine.run_inline``) while the fake provider (a process of
its own, over HTTP) holds every model call for L seconds. The process's PSS is sampled every
0.05 s. The allocator keeps what a batch freed for the next one, so a batch's own peak over
the PSS before it says little after the first: a run in flight holds the growth of the peak
from a batch of N to a batch of 2N, ÷ N (its thread, its HTTP connection, its frames and, on
SQLite, its connection included); the first batch's (peak − before) ÷ N is printed too. So
each figure takes a fresh process: run the script again for another. On PostgreSQL the
process pools its connections (``QUORUM_DB_POOL_SIZE``) and a waiting run holds none; the
server's connections to the database are counted at the same moments.

Two probes of where it comes from: ``--stages N`` advances each run N stages only (the
Plan-and-Execute run has six: start, plan, three steps, synthesis; its calls are in the last
five), and ``--trim S`` has glibc give back its free memory (``malloc_trim(0)``) as a thread
starts to wait, at most every S seconds in the process (the time it takes is printed).

    .venv/bin/python tests/benchmarks/bench_run_memory.py [--database postgres] [--n 100]
        [--latency 3] [--stages N] [--trim S]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.bench_vs_langgraph import ROLES, TASK, FakeProcess  # noqa: E402
from tests.benchmarks.common import machine, make_user, positive, pss_mb, setup_django  # noqa: E402


def server_connections(dsn: dict | None) -> int:
    if dsn is None:
        return 0
    import psycopg

    with psycopg.connect(**dsn, autocommit=True) as c:
        return c.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                         "current_database() AND pid <> pg_backend_pid()").fetchone()[0]


MiB = 1024 * 1024
KINDS = ("thread stacks", "malloc arenas of threads", "main heap", "other anonymous", "files")


def pss_by_kind(pid: int) -> dict[str, int]:
    """The process's PSS in kB by what the mapping is (from /proc/PID/smaps): a thread's C
    stack (an anonymous mapping of RLIMIT_STACK, 8 MiB here, with its guard page), a thread
    arena of glibc's malloc (heaps aligned to 64 MiB), the main heap (``[heap]``), any other
    anonymous mapping (pymalloc's 1 MiB arenas, Python's per-thread frame stacks, large
    blocks malloc maps on their own) and files (code, shared libraries)."""
    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    out = dict.fromkeys(KINDS, 0)
    kind = "files"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            start, end = (int(x, 16) for x in head[0].split("-"))
            path = head[5] if len(head) > 5 else ""
            if path == "[heap]":
                kind = "main heap"
            elif path:
                kind = "files"
            elif stack > 0 and end - start == stack:
                kind = "thread stacks"
            elif start % (64 * MiB) == 0:
                kind = "malloc arenas of threads"
            else:
                kind = "other anonymous"
        elif head[0] == "Pss:":
            out[kind] += int(head[1])
    return out


def one_round(owner, models, fake: FakeProcess, n: int, latency: float,
              dsn: dict | None, kinds: dict | None = None,
              stages: int = 1000) -> tuple[float, int, float, float]:
    """((peak − before) ÷ n in kB, peak server connections, seconds of the batch, peak MB).
    With ``kinds``, the PSS by kind of mapping is put there while every run is in its first
    model call (0.6 L after the batch started)."""
    from django.db import connection

    from agents_app import engine

    ids = [engine.create_run(owner, "plan_execute", TASK.format(i=i), enqueue=False,
                             options={"auto_approve": True}, models=models).pk
           for i in range(n)]
    connection.close()
    fake.latency(latency)
    gc.collect()
    time.sleep(0.5)
    before = pss_mb(os.getpid())
    peak, conns, done = [before], [0], threading.Event()

    def sample():
        while not done.wait(0.05):
            peak[0] = max(peak[0], pss_mb(os.getpid()))
            if dsn is not None and int(time.monotonic() * 20) % 10 == 0:
                conns[0] = max(conns[0], server_connections(dsn))

    def advance(pk: int) -> None:
        try:
            run = engine.run_inline(pk, max_stages=stages)
            if stages >= 1000 and run.status != "completed":
                raise RuntimeError(f"run {pk}: {run.status} {run.error}")
        finally:
            connection.close()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=advance, args=(pk,)) for pk in ids]
    started = time.monotonic()
    for t in threads:
        t.start()
    if kinds is not None:
        time.sleep(max(0.0, started + 0.6 * latency - time.monotonic()))
        kinds.update(pss_by_kind(os.getpid()))
    for t in threads:
        t.join()
    took = time.monotonic() - started
    done.set()
    sampler.join()
    return 1024 * (peak[0] - before) / n, conns[0], took, peak[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--n", type=positive(int, 1, 1000), default=100)
    parser.add_argument("--latency", type=positive(float, 0.1, 30.0), default=3.0)
    parser.add_argument("--max-connections", type=positive(int, 20, 10000), default=100)
    parser.add_argument("--stages", type=positive(int, 1, 1000), default=1000,
                        help="advance each run this many stages only (a probe)")
    parser.add_argument("--trim", type=positive(float, 0.0, 60.0), default=None,
                        help="malloc_trim(0) as a thread starts to wait, at most every S s")
    args = parser.parse_args()
    from tests.fakeprovider import fake_models
    from tests.stack import free_port

    with tempfile.TemporaryDirectory(prefix="quorum-run-memory-") as tmp, \
            contextlib.ExitStack() as cleanup:
        fake = FakeProcess(0.05)
        cleanup.callback(fake.stop)
        env = {"QUORUM_API_BASE": fake.url, "OPENAI_API_KEY": "sk-bench-fake",
               "QUORUM_LOG_LEVEL": "ERROR", "SECRET_KEY": "bench-not-secret"}
        dsn = None
        if args.database == "postgres":
            from tests import pg

            if pg.missing():
                sys.exit(f"bench_run_memory: {pg.missing()}")
            cluster = cleanup.enter_context(pg.PgCluster(max_connections=args.max_connections))
            env["DATABASE_URL"] = cluster.url
            dsn = {"host": "127.0.0.1", "port": cluster.port, "user": cluster.user,
                   "dbname": cluster.database}
        setup_django(Path(tmp), free_port(), **env)
        from django.conf import settings

        settings.QUORUM_API_BASE = fake.url
        owner = make_user()
        models = fake_models(*ROLES)
        for _ in range(2):  # warm-up: imports, the pool, LiteLLM's clients, caches
            one_round(owner, models, fake, 5, 0.05, None)
        gc.collect()
        gc.freeze()
        kinds: tuple[dict, dict] = ({}, {})
        trims = trim_before_waits(args.trim) if args.trim is not None else None
        first = one_round(owner, models, fake, args.n, args.latency, dsn, kinds[0], args.stages)
        second = one_round(owner, models, fake, 2 * args.n, args.latency, dsn, kinds[1],
                           args.stages)
        rows = [(first, second, 1024 * (second[3] - first[3]) / args.n)]
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    print(f"# bench_run_memory — {machine()}; load {os.getloadavg()[0]:.1f}; "
          f"{args.database}{f', pool {pool}' if pool else ''}; batches of {args.n} then "
          f"{2 * args.n} runs in flight, L = {args.latency:g} s")
    print(f"| database | kB a run in flight holds: peak growth {args.n} → {2 * args.n}, ÷ "
          f"{args.n} | first batch's (peak − before) ÷ {args.n} | server "
          f"connections at most | batch of {2 * args.n}, s |")
    print("|---|---:|---:|---:|---:|")
    kb = [r[2] for r in rows]
    print(f"| {args.database} | {statistics.median(kb):.0f}"
          f" | {rows[0][0][0]:.0f} | {max(r[1][1] for r in rows) if dsn else '—'} | "
          f"{statistics.median(r[1][2] for r in rows):.1f} |")
    print(f"\nWhere it is: PSS by kind of mapping while all runs of each batch wait on their "
          f"first call (/proc/self/smaps), growth {args.n} → {2 * args.n} runs ÷ {args.n}, kB:")
    print("| " + " | ".join(KINDS) + " | total |")
    print("|" + "---:|" * (len(KINDS) + 1))
    growth = [(kinds[1][k] - kinds[0][k]) / args.n for k in KINDS]
    print("| " + " | ".join(f"{g:.0f}" for g in growth) + f" | {sum(growth):.0f} |")
    if args.stages < 1000:
        print(f"\n(each run advanced {args.stages} stage(s) only)")
    if trims is not None:
        print(f"\nmalloc_trim(0) before a wait, at most every {args.trim:g} s: {trims[0]} times, "
              f"{1000 * trims[1]:.1f} ms in all")


def trim_before_waits(every: float) -> list:
    """Have each wait start with ``malloc_trim(0)``, at most every ``every`` s in the process
    (glibc's, through ctypes); returns [times, seconds spent], updated as it goes."""
    import ctypes

    from common import dbpool, turns

    libc = ctypes.CDLL("libc.so.6")
    last, lock, tally = [-math.inf], threading.Lock(), [0, 0.0]

    def hook() -> None:
        dbpool.release()  # what the hook does in the app (agents_app/apps.py)
        now = time.monotonic()
        with lock:
            if now - last[0] < every:
                return
            last[0] = now
        started = time.perf_counter()
        libc.malloc_trim(0)
        tally[0] += 1
        tally[1] += time.perf_counter() - started

    turns.before_wait(hook)
    return tally


if __name__ == "__main__":
    main()
