"""Quorum against LangGraph: the same four-call Plan-and-Execute run (start, plan, two steps,
synthesize: planner, two executor calls, synthesizer), the same fake OpenAI-compatible
provider over HTTP (a process of its own, latency L per call), LiteLLM on both sides, rounds
interleaved (Quorum, LangGraph, Quorum, ...). DEBUG=false on the Quorum side.

In process: LiteLLM alone (four ``litellm.completion`` calls in a loop), Quorum's
``engine.run_inline`` and LangGraph's ``invoke`` (with its default durability, "async",
and again with "sync", which commits each step's checkpoint before the next, as Quorum
commits each stage), each timed and its CPU counted; Quorum's SQL
statements are counted in runs of their own. Concurrent: N runs at once through Redis and the
Celery worker(s) for Quorum, ``asyncio.gather`` of ``ainvoke`` in a process of its own for
LangGraph; the makespan over one run's, the CPU per run and the peak RSS of the process(es)
doing the work.

Each side on the same kind of database: by default Quorum on SQLite and LangGraph checkpointing
to SQLite files (``SqliteSaver`` in process, ``AsyncSqliteSaver`` for the batches); with
``--database postgres`` both on the one throwaway PostgreSQL cluster (tests/pg.py), Quorum in
its database and LangGraph in a second one, ``langgraph`` (langgraph-checkpoint-postgres:
``PostgresSaver`` on one connection in process, ``AsyncPostgresSaver`` on a connection pool of
at most 20 for the batches).

    .venv/bin/python tests/benchmarks/bench_vs_langgraph.py [--runs 3] [--quick]
        [--latency 0.5] [--workers 2] [--concurrency 100] [--database postgres]

LangGraph and its checkpointers are benchmark-only dependencies (requirements-bench.lock):
``make bench`` installs them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import (  # noqa: E402
    ROOT,
    TERMINAL,
    cpu_seconds,
    machine,
    make_user,
    peak_rss_mb,
    positive,
    pss_mb,
    setup_django,
)

LANGGRAPH_DB = "langgraph"  # with --database postgres: LangGraph's database on the cluster
CALLS = 4  # planner, two executor calls, synthesizer
TASK = "Collect the logs of service {i}, then write a report on the errors."
ROLES = ("planner", "executor", "synthesizer")
TARGETS = {"overhead": 3.0, "cpu_inline": 35.0, "cpu_worker": 35.0, "sql": 35,
           "ratio_large": 2.0, "ratio_small": 1.5, "rss": 260.0, "tail": 3.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    cores = max(1, min(os.cpu_count() or 1, 4))  # devstack's default: one per core, at most 4
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive(int, 1, 50), default=3,
                        help="concurrent rounds (the in-process part makes 3× as many)")
    parser.add_argument("--latency", type=positive(float, 0.0, 10.0), default=0.5,
                        help="L for the in-process figures and the 50-run batch (s per call)")
    parser.add_argument("--large-latency", type=positive(float, 0.0, 10.0), default=1.0,
                        help="L for the 200-run batch")
    parser.add_argument("--large", type=positive(int, 1, 1000), default=200)
    parser.add_argument("--small", type=positive(int, 1, 1000), default=50)
    parser.add_argument("--workers", type=positive(int, 1, 64),
                        default=int(os.environ.get("QUORUM_WORKER_PROCESSES") or cores),
                        help="Celery worker processes (default: QUORUM_WORKER_PROCESSES or one per "
                             "core, at most four, as make dev)")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite",
                        help="the database: SQLite (make dev's default) or a throwaway "
                             "PostgreSQL cluster (tests/pg.py; production's), Quorum's and "
                             "LangGraph's checkpoints (a database of its own on the same "
                             "cluster) alike")
    parser.add_argument("--max-connections", type=positive(int, 20, 10000), default=100,
                        help="with --database postgres: the cluster's max_connections (default "
                             "100, PostgreSQL's own default and compose.yaml's); each process "
                             "pools at most QUORUM_DB_POOL_SIZE connections (issue 37)")
    parser.add_argument("--process-model", choices=("forked", "separate"), default="forked",
                        help="forked: `manage.py worker`, the workers forked from one warm "
                             "process (make dev, compose); separate: a `celery worker` "
                             "process each, started on its own")
    parser.add_argument("--concurrency", type=positive(int, 1, 1000), default=None,
                        help="threads per worker (default: QUORUM_WORKER_CONCURRENCY or "
                             "enough for the large batch)")
    parser.add_argument("--no-others", action="store_true",
                        help="skip the Quorum-only rows measured by the sibling benchmarks (gate "
                             "resume, 200 watchers, manage.py review)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: 1 round, 20 and 10 runs, L = 0.05 s and 0.1 s")
    parser.error = lambda message: parser.exit(2, f"bench_vs_langgraph: {message}\n")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.latency, args.large_latency, args.large, args.small = 1, 0.05, 0.1, 20, 10
    if args.concurrency is None:
        env = os.environ.get("QUORUM_WORKER_CONCURRENCY")
        args.concurrency = int(env) if env else math.ceil(args.large / args.workers)
    return args


# Quorum-only rows of issue 17's table, measured by the sibling benchmarks (each a fresh stack
# of its own), which write their figures as JSON to the file given with --summary.
OTHERS = (
    ("bench_gate_resume.py", ["--runs", "40"], ["--runs", "5"], "p99_ms",
     "gate decision → next stage started, over HTTP, p99, ms", 50.0, "{:.0f}"),
    ("bench_watchers.py", ["--clients", "200"], ["--clients", "20"], "p95_ms",
     "event → page, {clients} watchers of one run, p95, ms", 250.0, "{:.0f}"),
    ("bench_cli_review.py", ["--runs", "5", "--no-breakdown", "--lang", "python"],
     ["--runs", "1", "--no-breakdown", "--lang", "python"], "p50_s",
     "`manage.py review` of a 10-line diff, offline, wall p50, s", 1.5, "{:.2f}"),
)


def other_rows(args) -> list[tuple[str, float | None, float, str]]:
    """(name, figure or None when it failed, target, format) per sibling benchmark."""
    rows = []
    for script, full, quick, key, name, target, fmt in OTHERS:
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            done = subprocess.run(
                [sys.executable, str(Path(__file__).with_name(script)), *(quick if args.quick
                 else full), "--summary", out.name], capture_output=True, text=True, cwd=ROOT,
                timeout=1800, check=False)
            try:
                got = json.loads(Path(out.name).read_text())
            except (OSError, ValueError):
                got = {}
        if done.returncode != 0 or key not in got:
            sys.stderr.write(f"bench_vs_langgraph: {script} failed:\n{done.stderr[-2000:]}\n")
        rows.append((name.format(**got), got.get(key), target, fmt))
    return rows


def require_langgraph(database: str = "sqlite") -> None:
    needed = ["langgraph", "langgraph.checkpoint.sqlite", "aiosqlite"]
    if database == "postgres":
        needed += ["langgraph.checkpoint.postgres", "psycopg_pool"]
    missing = [m for m in needed if not _installed(m)]
    if missing:
        sys.stderr.write(f"bench_vs_langgraph: {', '.join(missing)} not installed; "
                         "make bench installs it (requirements-bench.lock)\n")
        sys.exit(2)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class SqlCounter:
    """Statements Django's cursor runs on this thread's connection while counting; ``BEGIN``
    counted apart, as transactions (as tests/test_engine_statements.py counts them), and
    ``SET LOCAL`` (a transaction's own setting: a call record's ``synchronous_commit`` on
    PostgreSQL, README "Production") apart too, in ``sets``. An
    execute wrapper: while it is installed the engine's prepared statements run on Django's
    cursor instead of the driver's (agents_app/prepared.py), the same statements, so the
    timed runs are not counted and the counted runs are not timed."""

    def __init__(self) -> None:
        self.count = self.begins = self.sets = 0

    def __call__(self, execute, sql, params, many, context):
        if sql.lstrip()[:5].upper() == "BEGIN":
            self.begins += 1
        elif sql.lstrip()[:9].upper() == "SET LOCAL":
            self.sets += 1
        else:
            self.count += 1
        return execute(sql, params, many, context)

    def take(self) -> tuple[int, int]:
        """(statements, transactions) since the last take."""
        got, self.count, self.begins = (self.count, self.begins), 0, 0
        return got


class FakeProcess:
    """tests/fakeprovider.py in a process of its own, so its CPU is nobody's."""

    def __init__(self, latency: float) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "fakeprovider.py"), "--port", "0",
             "--latency", str(latency)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        self.url = self.popen.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError("the fake provider did not start")

    def latency(self, seconds: float) -> None:
        import httpx

        httpx.post(self.url.removesuffix("/v1") + "/_fake/config",
                   json={"latency": seconds}).raise_for_status()

    def stop(self) -> None:
        self.popen.terminate()
        self.popen.wait(timeout=10)


def langgraph_batch(url: str, n: int, db: Path, pg: str | None = None) -> dict[str, float]:
    """N LangGraph runs at once in a process of their own (langgraph_side.py), checkpointed to
    the SQLite file ``db`` or, given ``pg``, to that PostgreSQL database."""
    where = ["--pg", pg] if pg else ["--db", str(db)]
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("langgraph_side.py")), "--url", url,
         "--n", str(n), *where], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, timeout=1200, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the LangGraph batch failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class PssPeak(threading.Thread):
    """The largest PSS of ``pids`` together, sampled every 0.2 s until stopped: with forked
    workers RSS counts the pages they share once per process, PSS by each one's share."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids, self.peak, self.done = pids, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.peak = max(self.peak, sum(pss_mb(pid) for pid in self.pids))

    def stop(self) -> float:
        self.done.set()
        self.join()
        self.peak = max(self.peak, sum(pss_mb(pid) for pid in self.pids))
        return self.peak


class Batch(NamedTuple):
    makespan: float  # s from the first run's creation to the last one's end (worker's clock)
    cpu: float  # s of the workers' CPU
    created: float  # s from the first run's creation to the last's (one after another)
    tail: float = 0.0  # the slowest run's time (created → finished) ÷ the median run's


def quorum_batch(owner, models: dict, n: int, pids: list[int],
                 memory: PssPeak | None = None) -> Batch:
    """N runs enqueued at once, created one after another as fast as this process can."""
    from agents_app import engine
    from agents_app.models import Run

    if memory:
        memory.start()
    cpu0 = sum(cpu_seconds(pid) for pid in pids)
    started = time.time()
    ids = [engine.create_run(owner, "plan_execute", TASK.format(i=i),
                             options={"auto_approve": True}, models=models).pk
           for i in range(n)]
    created = time.time() - started
    while True:
        rows = list(Run.objects.filter(pk__in=ids).values_list("status", "finished_at",
                                                                "created_at"))
        if all(status in TERMINAL for status, _, _ in rows):
            break
        if time.time() - started > 900:
            raise TimeoutError(f"{n} runs did not finish in 900 s")
        time.sleep(0.05)
    cpu = sum(cpu_seconds(pid) for pid in pids) - cpu0
    if memory:
        memory.stop()
    bad = [status for status, _, _ in rows if status != "completed"]
    if bad:
        raise RuntimeError(f"{len(bad)} of {n} Quorum runs did not complete: {set(bad)}")
    times = [(f - c).total_seconds() for _, f, c in rows]
    return Batch(max(f for _, f, _ in rows).timestamp() - started, cpu, created,
                 max(times) / statistics.median(times))


def in_process_rounds(args, fake: FakeProcess, owner, models, sql: SqlCounter, var: Path,
                      lg_pg: str | None):
    import litellm
    from django.conf import settings
    from django.db import connection

    from agents_app import engine
    from tests.benchmarks.langgraph_side import SyncRunner

    lg = SyncRunner(fake.url, var / "langgraph-sync.sqlite3", pg=lg_pg)
    rows = {"direct": [], "quorum": [], "langgraph": [], "langgraph_sync": []}
    statements, creating = [], []
    messages = [{"role": "user", "content": TASK.format(i=0)}]
    rounds = 3 * args.runs
    ahead = settings.QUORUM_COMMIT_AHEAD
    try:
        for i in range(2 + rounds):  # two warm-up rounds: imports, connections, caches
            keep = i >= 2
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(CALLS):
                litellm.completion(model="openai/fake-executor", api_base=fake.url,
                                   api_key="sk-bench-fake", messages=messages, timeout=60,
                                   num_retries=0)
            direct = (time.perf_counter() - wall, time.process_time() - cpu)

            pk = engine.create_run(owner, "plan_execute", TASK.format(i=i),
                                   options={"auto_approve": True}, models=models,
                                   enqueue=False).pk
            cpu, wall = time.process_time(), time.perf_counter()
            run = engine.run_inline(pk)
            quorum = (time.perf_counter() - wall, time.process_time() - cpu)
            if run.status != "completed":
                raise RuntimeError(f"Quorum run {pk}: {run.status} {run.error}")

            cpu, wall = time.process_time(), time.perf_counter()
            lg.run(i)
            langgraph = (time.perf_counter() - wall, time.process_time() - cpu)
            # LangGraph's default durability ("async") writes a step's checkpoint while the next
            # step runs; "sync" commits it before, as Quorum commits each stage.
            cpu, wall = time.process_time(), time.perf_counter()
            lg.run(i, durability="sync")
            langgraph_sync = (time.perf_counter() - wall, time.process_time() - cpu)
            if keep:
                rows["direct"].append(direct)
                rows["quorum"].append(quorum)
                rows["langgraph"].append(langgraph)
                rows["langgraph_sync"].append(langgraph_sync)
        # Counted, not timed (see SqlCounter), with every commit in this thread: a commit made
        # ahead (agents_app/engine/ahead.py) runs the same statements on a committer thread's
        # connection, which this thread's wrapper does not see.
        settings.QUORUM_COMMIT_AHEAD = False
        for i in range(3):
            with connection.execute_wrapper(sql):
                pk = engine.create_run(owner, "plan_execute", TASK.format(i=i),
                                       options={"auto_approve": True}, models=models,
                                       enqueue=False).pk
                creating.append(sql.take())
                if engine.run_inline(pk).status != "completed":
                    raise RuntimeError(f"Quorum run {pk} did not complete")
                statements.append(sql.take())
    finally:
        settings.QUORUM_COMMIT_AHEAD = ahead
        lg.close()
    return rows, statements, creating


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    require_langgraph(args.database)
    args.load_before = os.getloadavg()[0]
    from tests.fakeprovider import fake_models
    from tests.stack import free_port

    with tempfile.TemporaryDirectory(prefix="quorum-vs-langgraph-") as tmp, \
            contextlib.ExitStack() as cleanup:
        var = Path(tmp)
        fake = FakeProcess(args.latency)
        env = {"QUORUM_API_BASE": fake.url, "OPENAI_API_KEY": "sk-bench-fake", "DEBUG": "false",
               "QUORUM_LOG_LEVEL": "ERROR",
               "SECRET_KEY": "bench-not-secret"}
        lg_pg = None  # LangGraph's PostgreSQL database (None: its SQLite files under var)
        if args.database == "postgres":
            from tests import pg

            if pg.missing():
                sys.exit(f"bench_vs_langgraph: {pg.missing()}")
            # PostgreSQL's stock limit (issue 37): each process pools its connections and a
            # run waiting on its model holds none (common/dbpool.py).
            cluster = cleanup.enter_context(pg.PgCluster(max_connections=args.max_connections))
            env["DATABASE_URL"] = cluster.url
            # LangGraph's checkpoints on the same server, in a database of their own.
            cluster.psql(f'CREATE DATABASE "{LANGGRAPH_DB}"', database="postgres")
            lg_pg = cluster.dsn(LANGGRAPH_DB)
        try:
            setup_django(var, free_port(), **env)
            from django.conf import settings

            from tests.stack import child_pids, start_redis, start_worker, start_workers

            assert not settings.DEBUG, "the benchmark runs with DEBUG=false"
            settings.QUORUM_API_BASE = fake.url
            owner = make_user()
            models = fake_models(*ROLES)
            sql = SqlCounter()
            redis = start_redis(var)
            if args.process_model == "forked":
                workers = [start_workers(var, node="bench", processes=args.workers,
                                         concurrency=args.concurrency, QUORUM_VAR_DIR=var,
                                         **env)]
                pids = [workers[0].popen.pid, *child_pids(workers[0].popen.pid)]
            else:
                workers = [start_worker(var, node=f"bench{i}", concurrency=args.concurrency,
                                        QUORUM_VAR_DIR=var, **env)
                           for i in range(args.workers)]
                pids = [w.popen.pid for w in workers]
            try:
                inline, statements, creating = in_process_rounds(args, fake, owner, models,
                                                                 sql, var, lg_pg)
                args.sql_sets = sql.sets  # over the 3 counted runs
                conc = concurrent_rounds(args, fake, owner, models, pids, var, lg_pg)
                if args.database == "postgres":  # LangGraph's checkpoints did land there
                    args.lg_rows = cluster.psql(
                        "SELECT count(DISTINCT thread_id), count(*) FROM checkpoints",
                        database=LANGGRAPH_DB)[0]
                rss = sum(peak_rss_mb(pid) for pid in pids)
                pss = max(conc["q_pss"])
            finally:
                for w in workers:
                    w.stop()
                redis.stop()
        finally:
            fake.stop()
    others = [] if args.no_others else other_rows(args)
    report(args, inline, statements, creating, conc, (rss, pss), others)


def concurrent_rounds(args, fake: FakeProcess, owner, models, pids, var: Path,
                      lg_pg: str | None) -> dict:
    out: dict[str, list] = {k: [] for k in (
        "q_large", "q_small", "q_cpu", "lg_large", "lg_small", "lg_cpu", "lg_rss", "q_pss",
        "q_large_created", "q_small_created", "q_large_tail", "q_small_tail")}
    fake.latency(args.large_latency)
    quorum_batch(owner, models, 2 * args.workers, pids)  # warm-up: every worker, connections
    for r in range(args.runs):
        for latency, n, key in ((args.large_latency, args.large, "large"),
                                (args.latency, args.small, "small")):
            fake.latency(latency)
            one = quorum_batch(owner, models, 1, pids).makespan
            memory = PssPeak(pids) if key == "large" else None
            makespan, cpu, created, tail = quorum_batch(owner, models, n, pids, memory)
            out[f"q_{key}_tail"].append(tail)
            out[f"q_{key}"].append(makespan / one)
            out[f"q_{key}_created"].append(created / one)
            if memory:
                out["q_cpu"].append(1000 * cpu / n)
                out["q_pss"].append(memory.peak)
            got = langgraph_batch(fake.url, n, var / f"langgraph-{key}-{r}.sqlite3", lg_pg)
            out[f"lg_{key}"].append(got["makespan"] / got["one"])
            if key == "large":
                out["lg_cpu"].append(1000 * got["cpu"] / n)
                out["lg_rss"].append(got["rss_mb"])
    return out


def report(args, inline, statements, creating, conc, memory, others) -> None:
    rss, pss = memory
    med = statistics.median
    L = args.latency
    direct_wall = med(w for w, _ in inline["direct"])
    over = {k: 1000 * (med(w for w, _ in inline[k]) - direct_wall) / CALLS
            for k in ("quorum", "langgraph", "langgraph_sync")}
    cpu = {k: 1000 * med(c for _, c in inline[k]) for k in ("direct", "quorum", "langgraph")}
    n_sql = med(n for n, _ in statements)
    n_begin = med(b for _, b in statements)
    mode = (f"{args.workers} worker process(es) × {args.concurrency} threads (Celery threads "
            "pool), " + ("forked from one warm parent (`manage.py worker`, as make dev)"
                         if args.process_model == "forked" else "each started on its own"))
    print(f"# Quorum vs LangGraph — {machine()}{cpu_model()}")
    print(f"# DEBUG=false; fake OpenAI-compatible provider over HTTP in its own process; "
          f"LiteLLM on both sides; rounds interleaved; medians of {3 * args.runs} in-process "
          f"rounds and {args.runs} concurrent rounds{' (--quick smoke test)' if args.quick else ''}")
    print(f"# load average (1 min) {args.load_before:.1f} before, {os.getloadavg()[0]:.1f} "
          f"after, on {os.cpu_count()} cores: other work on the machine shows as overhead")
    if args.database == "postgres":
        from tests.benchmarks.langgraph_side import PG_POOL_MAX

        print(f"# PostgreSQL max_connections = {args.max_connections}; each Quorum process's "
              f"pool at most QUORUM_DB_POOL_SIZE = "
              f"{os.environ.get('QUORUM_DB_POOL_SIZE') or 10} connections; LangGraph's batch "
              f"process's pool at most {PG_POOL_MAX}, its in-process saver 1")
        threads, checkpoints = args.lg_rows
        print(f"# LangGraph's database `{LANGGRAPH_DB}` afterwards: {checkpoints} checkpoints "
              f"of {threads} runs (threads)")
        checkpointers = (
            f"checkpointing to the same PostgreSQL cluster (database `{LANGGRAPH_DB}`; "
            f"langgraph-checkpoint-postgres {_version('langgraph-checkpoint-postgres')}): "
            f"PostgresSaver on one connection in process, AsyncPostgresSaver on an "
            f"AsyncConnectionPool (max_size {PG_POOL_MAX})")
    else:
        checkpointers = (
            f"checkpointing to SQLite files (langgraph-checkpoint-sqlite "
            f"{_version('langgraph-checkpoint-sqlite')}): SqliteSaver in process, "
            f"AsyncSqliteSaver")
    print(f"# Quorum: {'PostgreSQL' if args.database == 'postgres' else 'SQLite'}, embedded "
          f"Redis, {mode}. LangGraph {_version('langgraph')}, {checkpointers} + "
          f"asyncio.gather of ainvoke in a process of its own")
    print("| figure | Quorum | LangGraph | Quorum ÷ LangGraph | target | |")
    print("|---|---:|---:|---:|---|---|")

    def row(name, q, lg, target, met, fmt="{:.1f}"):
        qs, ls = fmt.format(q), ("—" if lg is None else fmt.format(lg))
        ratio = "—" if lg is None or not lg else f"{q / lg:.2f}"
        print(f"| {name} | {qs} | {ls} | {ratio} | {target} | {'met' if met else 'MISSED'} |")

    row(f"framework time per model call beyond LiteLLM's (L = {L:g} s), ms", over["quorum"],
        over["langgraph"], f"≤ {TARGETS['overhead']:g} ms", over["quorum"] <= TARGETS["overhead"])
    row("the same, LangGraph with `durability=\"sync\"` (each step's checkpoint committed "
        "before the next step starts, as Quorum commits each stage; its default, \"async\", "
        "writes it while the next step runs), ms", over["quorum"], over["langgraph_sync"],
        f"≤ {TARGETS['overhead']:g} ms", over["quorum"] <= TARGETS["overhead"])
    row(f"CPU per {CALLS}-call run in process, ms (LiteLLM alone {cpu['direct']:.0f})",
        cpu["quorum"], cpu["langgraph"], f"≤ {TARGETS['cpu_inline']:g} ms",
        cpu["quorum"] <= TARGETS["cpu_inline"])
    q_cpu, lg_cpu = med(conc["q_cpu"]), med(conc["lg_cpu"])
    row(f"CPU per run in the worker, {args.large} runs at once, ms", q_cpu, lg_cpu,
        f"≤ {TARGETS['cpu_worker']:g} ms", q_cpu <= TARGETS["cpu_worker"])
    sets = f"; SET LOCAL apart: {args.sql_sets / 3:g} a run" if args.sql_sets else ""
    row(f"SQL statements per run ({CALLS} calls, 5 stages; BEGIN counted apart: {n_begin:g} "
        f"transactions{sets}; creating it: {med(n for n, _ in creating):g} more; per call: "
        f"tests/test_engine_statements.py)", n_sql, None, f"≤ {TARGETS['sql']}",
        n_sql <= TARGETS["sql"], fmt="{:g}")
    ql, ll = med(conc["q_large"]), med(conc["lg_large"])
    row(f"makespan, {args.large} runs at once ÷ one run, L = {args.large_latency:g} s", ql, ll,
        f"≤ {TARGETS['ratio_large']:g}×", ql <= TARGETS["ratio_large"], fmt="{:.2f}×")
    tail = max(conc["q_large_tail"])
    row(f"slowest of {args.large} runs at once ÷ their median (each run created → finished; the "
        f"worst of {args.runs} batches; issue 37)", tail, None, f"≤ {TARGETS['tail']:g}×",
        tail <= TARGETS["tail"], fmt="{:.2f}×")
    qs, ls = med(conc["q_small"]), med(conc["lg_small"])
    row(f"makespan, {args.small} runs at once ÷ one run, L = {L:g} s", qs, ls,
        f"≤ {TARGETS['ratio_small']:g}×", qs <= TARGETS["ratio_small"], fmt="{:.2f}×")
    lg_rss = max(conc["lg_rss"])
    row(f"worker peak memory, {args.large} runs at once, MB (Quorum: the PSS of every worker "
        f"process together, the forked ones sharing pages; their peak RSS summed, shared pages "
        f"once per process: {rss:.0f}; LangGraph: one process's peak RSS)", pss, lg_rss,
        f"≤ {TARGETS['rss']:g} MB", pss <= TARGETS["rss"], fmt="{:.0f}")
    for name, value, target, fmt in others:
        if value is None:
            print(f"| {name} | failed | — | — | ≤ {target:g} | MISSED |")
        else:
            row(name, value, None, f"≤ {target:g}", value <= target, fmt=fmt)
    print(f"# Quorum's batches are created one run after another by this process while the "
          f"workers run the first ones: the last of {args.large} was created "
          f"{med(conc['q_large_created']):.2f}× one run's time after the first, the last of "
          f"{args.small} {med(conc['q_small_created']):.2f}× (medians)")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return ", " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
