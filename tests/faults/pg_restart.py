"""Fault: PostgreSQL restarted under a real thread-pool Celery worker while runs of six
patterns are in flight: ``pg_ctl restart -m fast``, ``pg_ctl stop -m immediate`` then start
(crash recovery from the WAL; refused meanwhile), and ``terminate`` (every connection killed,
the server stays up, as a failover behind a pooler or an administrator does: reconnecting
works at once).

A throwaway cluster (tests/pg.py) on a free loopback port, migrated; embedded Redis; one
worker (tests/stack.py) with ``DATABASE_URL`` on the cluster. ``--runs`` runs (Plan-and-Execute
auto-approved and gated, Reflective, Debate, Team lead parallel and dynamic, ReWOO, ReAct; the
offline model slowed to ``--latency`` s a call) start one after another while the faults
happen every ``--every`` s; the gated plans are approved like a person (also while the
database is away: refused with a clear error, then tried again), and the script sweeps every
2 s (``engine.sweep``, runs idle ``--idle`` s; stage lease ``--lease`` s) like the beat
process.

Then it checks:

* every run has ended (completed, or failed with a readable ``Run.error``); none is left in a
  running status or at a gate;
* nothing duplicated or missing: event numbers 1..last per run; no (stage, key) model call,
  step, plan version, item or report twice; the run's call counter equal to its call rows;
  every completed run equal to a clean run of its kind (calls, steps, items, event kinds);
  every gate decision recorded once;
* the worker survived and still works: after one more restart with the worker idle, new runs
  complete without the sweeper;
* the database is consistent: ``SELECT count(*)`` on every table, no unvalidated constraint,
  no duplicated journal row, and ``pg_amcheck --heapallindexed --parent-check`` clean.

It also reports runs whose outcome shows the outage (failed by it, or a database error in
their record), and how long interrupted runs waited before they resumed (a stage whose lease
had to expire waits ``QUORUM_STAGE_LEASE_SECONDS``, 300 s in production); ``--strict`` makes
either a failure.

    .venv/bin/python tests/faults/pg_restart.py [--runs 30] [--restarts fast immediate ...]

Exit status 0 when every check passes, 1 otherwise, 2 when PostgreSQL is not installed.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import pg as pgmod  # noqa: E402

OFFLINE = "offline/default"
SCRIPT_APP = "pg_restart_script"  # this process's connections, told apart from the worker's
TERMINAL = ("completed", "failed", "cancelled", "budget_exceeded")
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "QUORUM_DEFAULT_MODEL",
                 "QUORUM_API_BASE", "QUORUM_OFFLINE_LATENCY")


@dataclass(frozen=True)
class Kind:
    label: str
    pattern: str
    task: str
    options: dict = field(hash=False, compare=False)


KINDS = [
    Kind("plan_execute/auto", "plan_execute", "Collect the logs of service {i}, then find the "
         "error, and finally write a report.", {"auto_approve": True}),
    Kind("plan_execute/gated", "plan_execute", "Collect the metrics of host {i}, then compare "
         "them, and finally write a summary.", {}),
    Kind("reflective", "reflective", "Explain attention in two paragraphs (variant {i}).",
         {"max_reflections": 3}),
    Kind("debate", "debate", "Should team {i} rewrite the monolith?", {"max_rounds": 2,
         "positions": [{"name": "Optimist", "stance": "in favour"},
                       {"name": "Skeptic", "stance": "against"},
                       {"name": "Neutral", "stance": "weigh both"}]}),
    Kind("team_lead/parallel", "team_lead", "Research three LLM frameworks for team {i}, then "
         "compare them", {"strategy": "parallel"}),
    Kind("team_lead/dynamic", "team_lead", "Research three vector databases for team {i}, then "
         "compare them", {"strategy": "dynamic"}),
    Kind("rewoo", "rewoo", "What is (3 + 4) * {i}, and what time is it?", {}),
    Kind("react", "react", "What is 6*{i}?", {"tools": ["calculator", "current_time"]}),
]


# --- the database, seen from this process ------------------------------------------------------
class Outage:
    """Counts what this process was refused while the database was away."""

    def __init__(self):
        self.refused: Counter = Counter()
        self.messages: Counter = Counter()


OUTAGE = Outage()


def db(fn, what: str, *, timeout: float = 90.0, retry: bool = True):
    """Call ``fn`` (ORM work); on a connection error drop this thread's connection (the next
    query opens a new one) and, if ``retry``, try again until ``timeout``."""
    from django.db import InterfaceError, OperationalError, connection

    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except (OperationalError, InterfaceError) as exc:
            OUTAGE.refused[what] += 1
            OUTAGE.messages[first_line(exc)] += 1
            try:
                connection.close()
            except Exception:  # noqa: S110 - a broken connection may fail to close; it is gone
                pass
            if not retry or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = re.sub(r"\d+\.\d+\.\d+\.\d+|port \d+|\b\d{4,}\b", "…", text)
    return f"{type(exc).__name__}: {text[:110]}"


def setup_django(var: Path, url: str, redis_port: int, lease: float) -> None:
    for key in PROVIDER_KEYS:
        os.environ.pop(key, None)
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "true", "SECRET_KEY": "faults",
        "QUORUM_VAR_DIR": str(var), "DATABASE_URL": url,
        "QUORUM_TEST_REDIS_PORT": str(redis_port), "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "QUORUM_ALLOW_MODEL_REQUESTS": "false", "QUORUM_LOG_LEVEL": "WARNING",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "QUORUM_LLM_RETRY_BASE_DELAY": "0",
        "QUORUM_STAGE_LEASE_SECONDS": str(lease), "CONN_MAX_AGE": "0",
    })
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def owner():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get_or_create(username="alice")[0]


def start(kind: Kind, i: int, *, enqueue: bool = True) -> int:
    from agents_app import engine
    from agents_app.patterns import get_pattern

    models = {role: OFFLINE for role in get_pattern(kind.pattern).roles}
    return engine.create_run(owner(), kind.pattern, kind.task.format(i=i + 2),
                             options=dict(kind.options), models=models,
                             max_cost_usd=Decimal("5"), max_tokens=1_000_000,
                             enqueue=enqueue).pk


def answer_gates(ids: list[int], decided: dict[int, int]) -> int:
    """Approve every open plan gate among ``ids`` as a person would (through
    ``engine.decide``); a refused decision (database away) is counted and tried again on the
    next pass."""
    from django.db import InterfaceError, OperationalError

    from agents_app import engine
    from agents_app.models import Run
    from agents_app.patterns.base import Decision

    n = 0
    try:
        waiting = list(Run.objects.filter(pk__in=ids, status__startswith="awaiting_")
                       .select_related("owner"))
    except (OperationalError, InterfaceError) as exc:
        _refused(exc, "reading gates")
        return 0
    for run in waiting:
        try:
            engine.decide(run, run.owner, run.stage_seq, Decision("approve", author="alice"))
        except engine.StaleDecision:
            continue
        except (OperationalError, InterfaceError) as exc:
            _refused(exc, "a decision")
            continue
        decided[run.pk] = decided.get(run.pk, 0) + 1
        n += 1
    return n


def _refused(exc: BaseException, what: str) -> None:
    from django.db import connection

    OUTAGE.refused[what] += 1
    OUTAGE.messages[first_line(exc)] += 1
    try:
        connection.close()
    except Exception:  # noqa: S110 - a broken connection may fail to close; it is gone
        pass


def sweep(idle: float) -> list[int]:
    from django.db import InterfaceError, OperationalError

    from agents_app import engine

    try:
        return engine.sweep(idle_seconds=idle)
    except (OperationalError, InterfaceError) as exc:
        _refused(exc, "a sweep")
        return []


def try_start(kind: Kind, i: int) -> int | None:
    from django.db import InterfaceError, OperationalError

    try:
        return start(kind, i)
    except (OperationalError, InterfaceError) as exc:
        _refused(exc, "starting a run")
        return None


# --- the audit ---------------------------------------------------------------------------------
def snapshot(run_id: int) -> dict:
    from agents_app.models import (
        AgentReport,
        Event,
        ModelCall,
        PlanVersion,
        Run,
        RunItem,
        StepResult,
    )

    run = Run.objects.get(pk=run_id)
    events = list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("seq", "kind"))
    return {
        "run": run,
        "seqs": [s for s, _ in events],
        "events": Counter(k for _, k in events if k != "stage_resumed"),
        "resumed": sum(k == "stage_resumed" for _, k in events),
        "calls": Counter(ModelCall.objects.filter(run_id=run_id).values_list("stage", "key")),
        "steps": Counter(StepResult.objects.filter(run_id=run_id)
                         .values_list("plan_version", "index")),
        "plans": Counter(PlanVersion.objects.filter(run_id=run_id)
                         .values_list("version", flat=True)),
        "items": Counter(RunItem.objects.filter(run_id=run_id).values_list("kind", "key")),
        "reports": Counter(AgentReport.objects.filter(run_id=run_id)
                           .values_list("stage", flat=True)),
    }


COMPARED = ("events", "calls", "steps", "plans", "items", "reports")


def normal(counter: Counter) -> Counter:
    return Counter({re.sub(r"run-\d+", "run-N", repr(k)): v for k, v in counter.items()})


def readable(error: str) -> bool:
    return bool(error.strip()) and "Traceback (most recent call last)" not in error \
        and len(error) < 4000


@dataclass
class Problems:
    stuck: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def all(self) -> list[str]:
        return self.stuck + self.duplicates + self.missing + self.unreadable


def audit(ids: list[int], kinds: dict[int, Kind], expected: dict[str, dict],
          decided: dict[int, int]) -> tuple[Problems, Counter, list[str]]:
    problems = Problems()
    statuses: Counter = Counter()
    failures: list[str] = []
    for run_id in ids:
        snap = snapshot(run_id)
        run = snap["run"]
        statuses[run.status] += 1
        where = f"run {run_id} ({kinds[run_id].label}, {run.status})"
        if run.status not in TERMINAL and not run.status.startswith("awaiting_"):
            problems.stuck.append(f"{where}: still {run.status} at {run.stage!r}, lease "
                                  f"{run.lease_owner or 'none'}")
        if run.status.startswith("awaiting_"):
            problems.stuck.append(f"{where}: left at its {run.gate} gate though the script "
                                  "answers every gate")
        if run.status == "failed":
            failures.append(f"run {run_id} ({kinds[run_id].label}): {run.error[:300]}")
            if not readable(run.error):
                problems.unreadable.append(f"{where}: error {run.error[:200]!r}")
        seqs = snap["seqs"]
        if seqs != list(range(1, len(seqs) + 1)) or run.last_event_seq != len(seqs):
            problems.duplicates.append(f"{where}: event numbers {seqs[:5]}… are not "
                                       f"1..{run.last_event_seq} ({len(seqs)} events)")
        for name in ("calls", "steps", "plans", "items", "reports"):
            twice = {k: n for k, n in snap[name].items() if n > 1}
            if twice:
                problems.duplicates.append(f"{where}: {name} twice: {twice}")
        if run.calls != sum(snap["calls"].values()):
            problems.duplicates.append(f"{where}: counts {run.calls} calls, has "
                                       f"{sum(snap['calls'].values())} call rows")
        if run.status == "completed":
            want = expected[kinds[run_id].label]
            for name in COMPARED:
                got, ref = normal(snap[name]), normal(want[name])
                if got - ref:
                    problems.duplicates.append(f"{where}: {name} beyond a clean run: "
                                               f"{dict(got - ref)}")
                if ref - got:
                    problems.missing.append(f"{where}: {name} missing against a clean run: "
                                            f"{dict(ref - got)}")
        if kinds[run_id].label == "plan_execute/gated" and run.status == "completed":
            from agents_app.models import Approval

            rows = Approval.objects.filter(run_id=run_id, gate="plan_approval").count()
            if rows != decided.get(run_id, 0):
                problems.missing.append(f"{where}: {decided.get(run_id, 0)} approvals given, "
                                        f"{rows} Approval row(s)")
    return problems, statuses, failures


def consistency(cluster: pgmod.PgCluster) -> tuple[list[str], str]:
    """Every table answers ``count(*)``, no constraint is left unvalidated, pg_amcheck is
    clean. Returns (problems, a one-line summary)."""
    import psycopg

    problems = []
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]
        rows = 0
        for table in tables:
            try:
                rows += conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            except psycopg.Error as exc:
                problems.append(f"SELECT count(*) FROM {table}: {exc}")
        invalid = conn.execute("SELECT conname FROM pg_constraint WHERE NOT convalidated")
        problems += [f"constraint {name} not validated" for (name,) in invalid]
        dupes = conn.execute("SELECT run_id, stage, key, count(*) FROM agents_app_modelcall "
                             "GROUP BY 1, 2, 3 HAVING count(*) > 1").fetchall()
        problems += [f"model call {d} stored {d[3]} times" for d in dupes]
    ok, out = cluster.amcheck()
    if not ok:
        problems.append(f"pg_amcheck: {out[:2000]}")
    amcheck = "pg_amcheck clean" if ok and out != "pg_amcheck not available" else out or \
        "pg_amcheck clean"
    return problems, f"{len(tables)} tables, {rows} rows counted; {amcheck}"


# --- the fault run ------------------------------------------------------------------------------
DB_ERROR_TEXT = re.compile(r"OperationalError|InterfaceError|terminating connection|connection "
                           r"is (lost|closed)|Connection refused|server closed the connection|"
                           r"connection failed|the database system is (starting up|shutting "
                           r"down)", re.IGNORECASE)


def leaks(ids: list[int]) -> dict[int, str]:
    """Runs whose record shows a database error (its error, answer, events, steps or items):
    the outage became part of the run's outcome instead of an interruption."""
    import json

    from agents_app.models import Event, Run, RunItem, StepResult

    found: dict[int, str] = {}

    def note(run_id: int, where: str, text: str) -> None:
        m = DB_ERROR_TEXT.search(text or "")
        if m and run_id not in found:
            start = max(0, m.start() - 80)
            found[run_id] = f"{where}: …{text[start:m.end() + 60]}…"

    for run_id, error, answer in Run.objects.filter(pk__in=ids).values_list("pk", "error",
                                                                              "answer"):
        note(run_id, "Run.error", error)
        note(run_id, "Run.answer", answer)
    for run_id, kind, message in Event.objects.filter(run_id__in=ids).values_list(
            "run_id", "kind", "message"):
        note(run_id, f"event {kind}", message)
    for run_id, output, problem in StepResult.objects.filter(run_id__in=ids).values_list(
            "run_id", "output", "problem"):
        note(run_id, "step", f"{output} {problem}")
    for run_id, kind, data in RunItem.objects.filter(run_id__in=ids).values_list(
            "run_id", "kind", "data"):
        note(run_id, f"item {kind}", json.dumps(data))
    return found


def stalls(ids: list[int]) -> list[tuple[float, int, str]]:
    """For every resumed stage, the seconds between the run's previous event and the
    ``stage_resumed`` event (how long the interrupted run sat before it moved again), the
    run and the stage, longest first."""
    from agents_app.models import Event

    out, last = [], {}
    for run_id, kind, at, data in Event.objects.filter(run_id__in=ids).order_by(
            "run_id", "seq").values_list("run_id", "kind", "created_at", "data"):
        if kind == "stage_resumed" and run_id in last:
            out.append(((at - last[run_id]).total_seconds(), run_id, data.get("stage", "")))
        last[run_id] = at
    return sorted(out, reverse=True)


def fault_run(cluster, var: Path, expected: dict, args) -> dict:
    from agents_app.models import Run
    from tests.stack import start_worker

    worker = start_worker(var, node="pgrestart", concurrency=args.concurrency,
                          DATABASE_URL=cluster.url, CONN_MAX_AGE=args.conn_max_age,
                          QUORUM_OFFLINE_LATENCY=args.latency, QUORUM_LOG_LEVEL="INFO",
                          QUORUM_STAGE_LEASE_SECONDS=args.lease, QUORUM_VAR_DIR=var)
    ids: list[int] = []
    kinds: dict[int, Kind] = {}
    decided: dict[int, int] = {}
    swept: set[int] = set()
    restarts: list[dict] = []
    probe: list[int] = []
    pending = [(KINDS[i % len(KINDS)], i) for i in range(args.runs)]
    window = args.every * (len(args.restarts) + 0.5) + args.down * args.restarts.count(
        "immediate")  # runs keep starting until after the last fault
    start_at = [window * k / max(1, len(pending)) for k in range(len(pending))]
    restart_at = [args.every * (k + 1) + args.down * args.restarts[:k].count("immediate")
                  for k in range(len(args.restarts))]
    modes = list(args.restarts)
    t0 = time.monotonic()
    next_sweep, next_start_try = t0, t0

    def tick() -> None:
        nonlocal next_sweep
        answer_gates(ids, decided)
        if time.monotonic() >= next_sweep:
            swept.update(sweep(args.idle))
            next_sweep = time.monotonic() + 2.0

    def start_due() -> None:
        nonlocal next_start_try
        now = time.monotonic()
        while pending and now - t0 >= start_at[0] and now >= next_start_try:
            kind, i = pending[0]
            run_id = try_start(kind, i)
            if run_id is None:  # the database is away: try again in a moment
                next_start_try = time.monotonic() + 0.5
                return
            pending.pop(0)
            start_at.pop(0)
            ids.append(run_id)
            kinds[run_id] = kind

    def running() -> int:
        return db(lambda: Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL)
                  .exclude(status__startswith="awaiting_").count(), "counting")

    def restart(mode: str) -> None:
        in_flight = running()
        t = time.monotonic()
        killed = ""
        if mode == "fast":
            cluster.restart("fast")
        elif mode == "immediate":  # no checkpoint: WAL replay on start; refused meanwhile
            cluster.stop("immediate")
            until = time.monotonic() + args.down
            while time.monotonic() < until:
                start_due()
                tick()
                time.sleep(0.05)
            cluster.start()
            cluster.wait_ready()
        else:  # every connection killed, the server stays up: reconnecting works at once
            workers = ("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND pid <> pg_backend_pid() AND "
                       f"application_name <> '{SCRIPT_APP}'")
            until = time.monotonic() + 3.0  # a moment when the worker holds connections
            while cluster.psql(workers)[0][0] == 0 and time.monotonic() < until:
                time.sleep(0.05)
            t = time.monotonic()
            killed = cluster.psql(
                f"SELECT count(*) FILTER (WHERE done AND app <> '{SCRIPT_APP}') FROM (SELECT "
                "application_name AS app, pg_terminate_backend(pid) AS done FROM "
                "pg_stat_activity WHERE datname = current_database() AND pid <> "
                "pg_backend_pid()) AS t")[0][0]
        restarts.append({"mode": mode, "seconds": time.monotonic() - t,
                         "in_flight": in_flight, "killed": killed})

    try:
        while modes or pending:
            if modes and time.monotonic() - t0 >= restart_at[0]:
                restart_at.pop(0)
                restart(modes.pop(0))
                continue
            start_due()
            tick()
            time.sleep(0.05)
        all_started = time.monotonic()
        deadline = all_started + args.timeout
        while time.monotonic() < deadline:
            tick()
            left = db(lambda: Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL)
                      .count(), "counting")
            if not left:
                break
            time.sleep(0.2)
        settled = time.monotonic() - all_started
        # One more restart with the worker idle; then new runs must complete on their own
        # (no sweeper): the worker's threads open new connections.
        cluster.restart("fast")
        probe = [db(lambda k=k: start(KINDS[0], 100 + k), "starting a probe run")
                 for k in range(args.probe)]
        t_probe = time.monotonic()
        while time.monotonic() - t_probe < args.probe_timeout:
            done = db(lambda: Run.objects.filter(pk__in=probe, status__in=TERMINAL).count(),
                      "counting")
            if done == len(probe):
                break
            time.sleep(0.2)
        probe_seconds = time.monotonic() - t_probe
        probe_alone = Run.objects.filter(pk__in=probe, status="completed").count()
        until = time.monotonic() + args.timeout  # whatever is left, with the sweeper's help
        while time.monotonic() < until and Run.objects.filter(
                pk__in=probe).exclude(status__in=TERMINAL).exists():
            tick()
            time.sleep(0.2)
        alive = worker.popen.poll() is None
    finally:
        worker.stop()
    log = worker.log()
    for run_id in probe:
        kinds[run_id] = KINDS[0]
    problems, statuses, failures = audit(ids + probe, kinds, expected, decided)
    if not alive:
        problems.stuck.append(f"the worker exited: {log[-1500:]}")
    if probe_alone < len(probe):
        problems.stuck.append(f"after a restart with the worker idle, {len(probe) - probe_alone} "
                              f"of {len(probe)} new runs did not complete in "
                              f"{args.probe_timeout:.0f} s without the sweeper")
    leaked = leaks(ids + probe)
    return {
        "runs": len(ids) + len(probe), "statuses": statuses, "failures": failures,
        "problems": problems, "restarts": restarts, "settled": settled, "swept": len(swept),
        "resumed": sum(snapshot(r)["resumed"] for r in ids), "stalls": stalls(ids),
        "decisions": sum(decided.values()), "leaks": leaked,
        "task_errors": Counter(m.group(1) for m in re.finditer(r"raised unexpected: (\w+)", log)),
        "probe": (probe_alone, len(probe), probe_seconds), "worker_alive": alive,
        "stage_crashes": len(set(re.findall(r"run (\d+): stage \S+ crashed", log))),
        "log_lines": len(log.splitlines()),
    }


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = f" ({line.split(':', 1)[1].strip()})"
                break
    except OSError:
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores{cpu}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--restarts", nargs="+", choices=["fast", "immediate", "terminate"],
                        default=["fast", "immediate", "terminate", "fast", "immediate",
                                 "terminate"])
    parser.add_argument("--every", type=float, default=2.5, help="s between restarts")
    parser.add_argument("--down", type=float, default=2.0,
                        help="s the server stays stopped after an immediate stop")
    parser.add_argument("--latency", type=float, default=0.3, help="offline model s/call")
    parser.add_argument("--lease", type=float, default=20.0, help="stage lease, s")
    parser.add_argument("--idle", type=float, default=6.0, help="sweeper: runs idle this long")
    parser.add_argument("--concurrency", type=int, default=40, help="worker threads")
    parser.add_argument("--conn-max-age", type=int, default=0, help="the worker's CONN_MAX_AGE")
    parser.add_argument("--probe", type=int, default=8, help="runs started after the last "
                        "restart, to complete without the sweeper")
    parser.add_argument("--probe-timeout", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--strict", action="store_true", help="also fail when the outage "
                        "shows in a run's outcome (failed by it, or a database error in its "
                        "record) or an interrupted stage waited for its lease to expire")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    reason = pgmod.missing()
    if reason:
        print(f"FAIL: {reason}")
        return 2
    total = time.monotonic()
    var = Path(tempfile.mkdtemp(prefix="quorum-pgrestart-"))
    cluster = pgmod.PgCluster()
    redis = None
    try:
        cluster.start()
        from tests.stack import free_port

        setup_django(var, f"{cluster.url}?application_name={SCRIPT_APP}", free_port(),
                     args.lease)
        from tests.stack import start_redis

        redis = start_redis(var)
        from agents_app import engine

        expected = {}
        for kind in KINDS:  # a clean run of each kind, in this process, on the same database
            run_id = start(kind, 0, enqueue=False)
            for _ in range(5):
                run = engine.run_inline(run_id)
                if not run.is_waiting:
                    break
                answer_gates([run_id], {})
            snap = snapshot(run_id)
            if snap["run"].status != "completed":
                raise RuntimeError(f"the clean {kind.label} run ended {snap['run'].status}: "
                                   f"{snap['run'].error}")
            expected[kind.label] = snap
        r = fault_run(cluster, var, expected, args)
        db_problems, db_summary = consistency(cluster)
        version = cluster.psql("SHOW server_version")[0][0]
    finally:
        if redis is not None:
            redis.stop()
        cluster.close()
        if args.keep:
            print(f"(kept {var})")
        else:
            shutil.rmtree(var, ignore_errors=True)

    print(f"\n# PostgreSQL restart — {time.strftime('%Y-%m-%d %H:%M')}, {machine()}, "
          f"PostgreSQL {version}")
    print(f"# {args.runs} runs ({len(KINDS)} kinds) started over the faults "
          f"{' → '.join(args.restarts)}, one every {args.every} s (immediate: down "
          f"{args.down} s; terminate: every connection killed, server up); offline model "
          f"{args.latency} s/call; worker threads x{args.concurrency}, CONN_MAX_AGE="
          f"{args.conn_max_age}; lease {args.lease:.0f} s; sweeper every 2 s for runs idle "
          f"{args.idle:.0f} s\n")
    print("| fault | runs in a running status | unavailable s | worker connections killed |")
    print("|---|---:|---:|---:|")
    for x in r["restarts"]:
        killed = "-" if x["killed"] == "" else x["killed"]
        print(f"| {x['mode']} | {x['in_flight']} | {x['seconds']:.1f} | {killed} |")
    s = r["statuses"]
    alone, n, secs = r["probe"]
    print()
    rows = [
        ("runs (incl. probe)", r["runs"]), ("completed", s["completed"]),
        ("failed", s["failed"]), ("left running or at a gate", len(r["problems"].stuck)),
        ("duplicates (calls, steps, items, events)", len(r["problems"].duplicates)),
        ("missing against a clean run", len(r["problems"].missing)),
        ("runs showing a database error in their record", len(r["leaks"])),
        ("gate decisions given", r["decisions"]),
        ("stages resumed after an interruption", r["resumed"]),
        ("runs requeued by the sweeper", r["swept"]),
        ("longest wait of an interrupted run before it resumed",
         f"{r['stalls'][0][0]:.1f} s (run {r['stalls'][0][1]}, {r['stalls'][0][2]})"
         if r["stalls"] else "-"),
        ("stages crashed on a database error (runs)", r["stage_crashes"]),
        ("tasks that raised", ", ".join(f"{k} {v}" for k, v in r["task_errors"].items())
         or "0"),
        ("settled after the last fault", f"{r['settled']:.1f} s"),
        ("new runs after a restart, no sweeper", f"{alone}/{n} completed in {secs:.1f} s"),
        ("worker alive at the end", "yes" if r["worker_alive"] else "NO"),
    ]
    print("| check | result |")
    print("|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    print(f"\nThis process was refused {sum(OUTAGE.refused.values())} time(s) "
          f"({', '.join(f'{k} {v}' for k, v in OUTAGE.refused.items()) or 'never'}):")
    for message, count in OUTAGE.messages.most_common(5):
        print(f"  {count} x {message}")
    print(f"Database after the faults: {db_summary}")
    ok = not db_problems
    for p in db_problems:
        print(f"DB: {p}")
    if r["failures"]:
        print("\nFailed runs (the reason shown to the user):")
        for f in r["failures"][:12]:
            print(f"  {f}")
    waited = [x for x in r["stalls"] if x[0] >= 0.9 * args.lease]
    if waited:
        print(f"\n{len(waited)} interrupted stage(s) waited for their lease to expire "
              f"({args.lease:.0f} s here, QUORUM_STAGE_LEASE_SECONDS=300 in production) before "
              "the sweeper gave the run back: "
              + ", ".join(f"run {run_id} {stage} {secs:.0f} s" for secs, run_id, stage
                          in waited[:8]))
        if args.strict:
            ok = False
    if r["leaks"]:
        print("\nRuns whose record shows a database error (the outage became their outcome):")
        for run_id, where in list(r["leaks"].items())[:12]:
            print(f"  run {run_id}: {where[:300]}")
        if args.strict:
            ok = False
    for p in r["problems"].all():
        ok = False
        print(f"PROBLEM: {p}")
    print(f"\n{'PASS' if ok else 'FAIL'}: {time.monotonic() - total:.0f} s in all.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
