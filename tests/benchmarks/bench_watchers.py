"""Many WebSocket clients watching one busy run, through the real stack: Daphne, Redis and a
thread-pool Celery worker on a temporary SQLite database.

For each N in ``--clients``: a Plan-and-Execute run (auto-approved, 8 steps: 10 model calls of
the offline model slowed to ``--latency`` seconds, about 34 events) is created; most clients
connect to ``/ws/runs/<id>/`` before it starts, the rest (``--late``) once it is under way,
each signed in with a session cookie and sending ``{"after": 0}`` as the run page does. Then
the run goes to the worker. Printed per N: events, messages, whether every client received
every event 1..last exactly once and in order, and the delivery latency from the event's
``created_at`` (written by the worker, inside its transaction) to its receipt, over the
clients that were connected before the run started.

    .venv/bin/python tests/benchmarks/bench_watchers.py [--clients 1 200] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.common import (  # noqa: E402
    child_env,
    cpu_seconds,
    pct,
    positive,
    settings_note,
)

TASK = ("Collect the logs, then parse them, then group the errors, then rank them, then find "
        "the root cause, then write a fix, then test the fix, and finally write a report.")
OPTIONS = {"auto_approve": True, "max_steps": 10}
MODELS = {role: "offline/default" for role in ("planner", "executor", "synthesizer")}
SEQ = re.compile(r'data-seq="(\d+)"')
FINISHED = re.compile(r'class="ev ev-run_finished" data-seq="(\d+)"')


@dataclass
class Watcher:
    """What one client saw: each event's sequence number and when it arrived (epoch seconds)."""

    late: bool
    seqs: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    messages: int = 0
    reconnects: int = 0
    last: int | None = None  # seq of run_finished, once seen
    error: str = ""

    @property
    def done(self) -> bool:
        return self.last is not None and bool(self.seqs) and self.seqs[-1] >= self.last


async def _watch(session, url: str, headers: dict, watcher: Watcher, connected: asyncio.Event,
                 timeout: float, max_reconnects: int = 10) -> None:
    """Watch like the run page: connect, say which event it has last, read messages; when the
    connection fails or drops, connect again after a pause (htmx's WebSocket extension does)
    and say the last event it has, so nothing is lost or repeated."""
    import aiohttp

    deadline = time.monotonic() + timeout
    problem = ""
    while not watcher.done:
        if time.monotonic() >= deadline:
            watcher.error = f"timed out ({problem})" if problem else "timed out"
            break
        try:
            async with session.ws_connect(url, headers=headers, heartbeat=None,
                                          max_msg_size=0) as ws:
                await ws.send_str(json.dumps({"after": watcher.seqs[-1] if watcher.seqs else 0}))
                connected.set()
                while not watcher.done:
                    msg = await ws.receive(timeout=max(0.01, deadline - time.monotonic()))
                    now = time.time()
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        raise ConnectionError(f"closed: {msg.type.name} {ws.close_code}")
                    watcher.messages += 1
                    for s in SEQ.findall(msg.data):
                        watcher.seqs.append(int(s))
                        watcher.times.append(now)
                    done = FINISHED.search(msg.data)
                    if done:
                        watcher.last = int(done.group(1))
        except (TimeoutError, ConnectionError, aiohttp.ClientError) as exc:
            problem = repr(exc)
            if watcher.done or time.monotonic() >= deadline:
                continue
            if watcher.reconnects >= max_reconnects:
                watcher.error = f"gave up after {watcher.reconnects} reconnects: {problem}"
                break
            watcher.reconnects += 1
            await asyncio.sleep(0.5)
    connected.set()


async def watch_run(base: str, cookie: str, run_id: int, start, *, clients: int, late: int,
                    late_after: float = 1.0, timeout: float = 60.0) -> list[Watcher]:
    """Connect ``clients - late`` watchers, call ``start()`` (which sets the run going), connect
    the ``late`` others ``late_after`` seconds later, and wait until each has seen the run's
    last event (or ``timeout``). No ORM here: ``start`` runs in a thread."""
    import aiohttp

    url = base.replace("http://", "ws://") + f"/ws/runs/{run_id}/"
    headers = {"Cookie": cookie, "Origin": base}
    watchers = [Watcher(late=i >= clients - late) for i in range(clients)]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        early = [w for w in watchers if not w.late]
        flags = [asyncio.Event() for _ in watchers]
        tasks = [asyncio.create_task(_watch(session, url, headers, w, f, timeout))
                 for w, f in zip(early, flags, strict=False)]
        await asyncio.gather(*(f.wait() for f in flags[:len(early)]))
        # The hello is sent; let the consumers read it before the run moves.
        await asyncio.sleep(0.5)
        await asyncio.get_running_loop().run_in_executor(None, start)
        await asyncio.sleep(late_after)
        tasks += [asyncio.create_task(_watch(session, url, headers, w, f, timeout))
                  for w, f in zip(watchers[len(early):], flags[len(early):], strict=True)]
        await asyncio.gather(*tasks)
    return watchers


def check(watchers: list[Watcher], last: int) -> list[str]:
    """Every watcher received 1..last exactly once, in order. Returns the problems."""
    want = list(range(1, last + 1))
    problems = []
    for i, w in enumerate(watchers):
        if w.error or w.seqs != want:
            problems.append(f"client {i}{' (late)' if w.late else ''}: {w.error or 'seqs'} "
                            f"{w.seqs[:5]}…{w.seqs[-5:]} ({len(w.seqs)} of {last})")
    return problems


def latencies(watchers: list[Watcher], created: dict[int, float], skip_first: bool = True):
    """Delivery latency (s) of each event to each client connected before the run started."""
    out = []
    for w in watchers:
        if w.late:
            continue
        for s, t in zip(w.seqs, w.times, strict=True):
            if skip_first and s == 1:  # run_created: written before the client connected
                continue
            out.append(t - created[s])
    return out


def one_round(base: str, cookie: str, owner, web_pid: int, clients: int, late: int,
              timeout: float) -> dict:
    from agents_app import engine
    from agents_app.models import Event, Run
    from agents_app.tasks import advance_run

    run = engine.create_run(owner, "plan_execute", TASK, options=OPTIONS, models=MODELS,
                            enqueue=False)
    started = {}

    def start():
        started["t"], started["epoch"] = time.monotonic(), time.time()
        started["cpu"] = cpu_seconds(web_pid)
        advance_run.delay(run.pk)

    watchers = asyncio.run(watch_run(base, cookie, run.pk, start, clients=clients, late=late,
                                     timeout=timeout))
    wall = time.monotonic() - started["t"]
    web_cpu = cpu_seconds(web_pid) - started["cpu"]
    run.refresh_from_db()
    created = {s: c.timestamp() for s, c in
               Event.objects.filter(run=run).values_list("seq", "created_at")}
    last = run.last_event_seq
    finished = Run.objects.filter(pk=run.pk).values_list("finished_at", flat=True).get()
    lat = latencies(watchers, created)
    return {"clients": clients, "late": late, "status": run.status, "events": last,
            "messages": sum(w.messages for w in watchers), "problems": check(watchers, last),
            "reconnects": sum(w.reconnects for w in watchers),
            "p50": 1000 * pct(lat, 50), "p95": 1000 * pct(lat, 95), "max": 1000 * max(lat or [0]),
            "run_s": (finished.timestamp() - started["epoch"]) if finished else float("nan"),
            "wall": wall, "web_cpu": web_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=positive(int, 1, 2000), nargs="+", default=[1, 200])
    parser.add_argument("--late", type=positive(float, 0.0, 1.0), default=0.25,
                        help="share of the clients that connect once the run is under way")
    parser.add_argument("--latency", type=positive(float, 0.0, 10.0), default=0.2,
                        help="seconds per model call")
    parser.add_argument("--timeout", type=positive(float, 1.0, 3600.0), default=120.0,
                        help="seconds per round")
    parser.add_argument("--conn-max-age", type=positive(int, 0, 86400), default=None,
                        help="CONN_MAX_AGE for Daphne and the worker (default: the project's, 0)")
    parser.add_argument("--summary", type=Path, default=None,
                        help="also write the largest round's figures as JSON here")
    parser.error = lambda message: parser.exit(2, f"bench_watchers: {message}\n")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="quorum-bench-watchers-") as tmp:
        var = Path(tmp)
        from tests.benchmarks.common import setup_django
        from tests.stack import free_port

        setup_django(var, free_port())
        from django.contrib.auth import get_user_model
        from django.test import Client

        from tests.stack import start_redis, start_web, start_worker

        owner = get_user_model().objects.create_user("alice")
        client = Client()
        client.force_login(owner)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        redis = start_redis(var)
        worker = web = None
        extra = {} if args.conn_max_age is None else {"CONN_MAX_AGE": args.conn_max_age}
        try:
            worker = start_worker(var, node="watchers", concurrency=8, QUORUM_VAR_DIR=var,
                                  QUORUM_OFFLINE_LATENCY=args.latency, **child_env(),
                                  QUORUM_LOG_LEVEL="WARNING", **extra)
            port = free_port()
            web = start_web(var, port, QUORUM_VAR_DIR=var, **child_env(),
                            QUORUM_LOG_LEVEL="WARNING", **extra)
            base = f"http://127.0.0.1:{port}"
            note = settings_note(args.conn_max_age)
            one_round(base, cookie, owner, web.popen.pid, 1, 0, args.timeout)  # warm-up
            rows = [one_round(base, cookie, owner, web.popen.pid, n, int(n * args.late),
                              args.timeout) for n in args.clients]
            web_log = web.log()
        finally:
            for proc in (web, worker, redis):
                if proc is not None:
                    proc.stop()

    print(f"# Watchers benchmark — {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"# one Plan-and-Execute run (8 steps, 10 calls at {args.latency} s); Daphne, Redis, "
          f"Celery worker (threads x8), {note}; latency over "
          "the clients connected before the start")
    print()
    print("| clients (late) | events | messages | every client saw 1..last once, in order | "
          "reconnects | delivery p50 | p95 | max | run | last delivery | Daphne CPU |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ok = "yes" if not r["problems"] else f"**no** ({len(r['problems'])} clients)"
        print(f"| {r['clients']} ({r['late']}) | {r['events']} | {r['messages']:,} | {ok} | "
              f"{r['reconnects']} | "
              f"{r['p50']:.0f} ms | {r['p95']:.0f} ms | {r['max']:.0f} ms | {r['run_s']:.1f} s | "
              f"{r['wall']:.1f} s | {r['web_cpu']:.1f} s |")
    bad = [p for r in rows for p in r["problems"]]
    if args.summary is not None:
        big = max(rows, key=lambda r: r["clients"])
        args.summary.write_text(json.dumps({
            "clients": big["clients"], "p50_ms": big["p50"], "p95_ms": big["p95"],
            "exactly_once_in_order": not big["problems"], "status": big["status"]}))
    for p in bad[:10]:
        print(f"# {p}")
    if bad:
        notes = [line for line in web_log.splitlines()
                 if re.search(r"(?i)timeout|timed out|error|traceback|exception", line)]
        print("# Daphne's log, lines about errors and timeouts:", *notes[-15:], sep="\n# ")
    if bad or any(r["status"] != "completed" for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
