"""Fault: Redis (Celery's broker and the Channels layer) stopped and started again on the same
port while runs of every pattern are in flight and Chromium pages watch some of them.

Scenarios, one after the other on one stack (SQLite, a Celery worker, Daphne):

* ``kept``: Redis stops the way a service manager stops it (SIGTERM, its append-only file
  flushed) and starts again after ``--down`` seconds with its data: queued messages are still
  there (one the worker had just taken when the connection dropped stays in Redis's unacked
  set until the visibility timeout, an hour, so its run waits for the sweeper).
* ``lost``: the same, but Redis starts again empty (its data deleted while it was down): the
  messages waiting in it are gone (the worker has fewer threads than there are runs, so some
  wait), and only the sweeper can requeue their runs.
* ``web``: not Redis but Daphne is stopped and started again: the pages' WebSockets close
  and htmx reconnects them (with its "full-jitter" backoff: a random delay of up to 64 s
  after several failed tries, so pages get 75 s here); each page then sends the last event
  it has and the server must send what it missed.

During a Redis outage the worker keeps running the stages it holds; it cannot enqueue the
next stage or announce events. Gates are answered like a person meanwhile. Afterwards every
run must finish, nothing duplicated (the same audit as ``sigkill.py``), and every page must
show every event of its run: data-seq 1..last in its timeline, each once, without a reload.

The sweeper of the Redis scenarios: ``--sweeper fast`` (default) sweeps from this script
every 2 s for runs idle 15 s, a stand-in for the beat process; ``--sweeper beat`` runs the
real ``celery beat`` with the production schedule (every 60 s, for runs idle 120 s: expect
minutes); ``--sweeper none`` shows what is left without one.

    .venv/bin/python tests/faults/redis_restart.py [--runs 2] [--down 5] [--pages 4]

Exit status 0 when every run finishes intact and every page shows every event, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.faults import common  # noqa: E402

PASSWORD = "fault-injection-password"  # noqa: S105 - a throwaway local account
PAGE_PATTERNS = ("plan_execute", "code_review", "plan_execute_review", "debate", "team_lead",
                 "rewoo", "reflective", "react")
WATCH_JS = """() => Array.from(document.querySelectorAll('#timeline li[data-seq]'))
                    .map(e => parseInt(e.dataset.seq, 10))"""
INIT_JS = """window.__wsOpens = 0; window.__reloads = (window.__reloads || 0);
document.addEventListener('htmx:wsOpen', () => { window.__wsOpens += 1; });"""


class Browser:
    def __init__(self, base: str):
        from playwright.sync_api import sync_playwright

        from tests.conftest import CHROMIUM_ARGS

        self.base = base
        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path="/usr/bin/chromium",
                                                args=CHROMIUM_ARGS)
        self.context = self.browser.new_context(viewport={"width": 1200, "height": 900})
        self.context.add_init_script(INIT_JS)
        page = self.context.new_page()
        page.goto(base + "/accounts/login/")
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", PASSWORD)
        page.click("button.primary")
        page.wait_for_url(base + "/")
        page.close()
        self.pages: dict[int, object] = {}
        self.errors: dict[int, list[str]] = {}

    def watch(self, run) -> None:
        page = self.context.new_page()
        self.errors[run.pk] = []
        page.on("pageerror", lambda e, r=run.pk: self.errors[r].append(str(e)))
        page.goto(self.base + run.get_absolute_url())
        page.wait_for_function("() => window.__wsOpens >= 1", timeout=30_000)
        page.evaluate("() => { window.__loaded = performance.timeOrigin; }")
        self.pages[run.pk] = page

    def seqs(self, run_id: int) -> list[int]:
        return self.pages[run_id].evaluate(WATCH_JS)

    def state(self, run_id: int) -> dict:
        page = self.pages[run_id]
        return {"opens": page.evaluate("() => window.__wsOpens"),
                "same_document": page.evaluate("() => window.__loaded === performance.timeOrigin")}

    def close(self) -> None:
        try:
            self.browser.close()
        finally:
            self._pw.stop()


def page_problem(browser: Browser, run_id: int, timeout: float) -> str:
    """'' once the page shows events 1..last of the run, each once; else what is wrong."""
    from agents_app.models import Run

    last = Run.objects.values_list("last_event_seq", flat=True).get(pk=run_id)
    deadline = time.monotonic() + timeout
    seqs: list[int] = []
    while time.monotonic() < deadline:
        seqs = browser.seqs(run_id)
        if seqs == list(range(1, last + 1)):
            break
        time.sleep(0.25)
    problems = []
    if len(seqs) != len(set(seqs)):
        problems.append(f"duplicated events {sorted({s for s in seqs if seqs.count(s) > 1})}")
    missing = sorted(set(range(1, last + 1)) - set(seqs))
    if missing:
        problems.append(f"missing events {missing[:12]}{' …' if len(missing) > 12 else ''} "
                        f"of 1..{last} after {timeout:.0f} s")
    if not browser.state(run_id)["same_document"]:
        problems.append("the page was reloaded")
    if browser.errors.get(run_id):
        problems.append(f"script errors: {browser.errors[run_id][:2]}")
    return "; ".join(problems)


class Web:
    """Daphne on a fixed port, restartable."""

    def __init__(self, stack: common.Stack, port: int):
        self.stack, self.port = stack, port
        self.proc = None
        self.start()

    def start(self) -> None:
        from tests.stack import start_web

        self.proc = start_web(self.stack.dir, self.port)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        common._wait_port_closed(self.port)


def scenario(name: str, stack: common.Stack, web: Web, browser: Browser, expected: dict,
             args) -> dict:
    from agents_app import engine
    from agents_app.models import Run

    ids, kinds, decided, swept = [], {}, [], set()
    for p in args.patterns:
        for i in range(args.runs):
            v = common.VARIANTS[p][i % len(common.VARIANTS[p])]
            run_id = common.start(v, i, repo_name=f"{name}-{p}-{i}")
            ids.append(run_id)
            kinds[run_id] = v
    watched = []
    for p in PAGE_PATTERNS[:args.pages]:
        if p in args.patterns:
            run = Run.objects.filter(pk__in=ids, pattern=p).order_by("pk").first()
            browser.watch(run)
            watched.append(run.pk)
    started = time.monotonic()
    next_sweep = started

    def tick():
        nonlocal next_sweep
        common.answer_gates(ids, decided)
        if name != "web" and args.sweeper == "fast" and time.monotonic() >= next_sweep:
            swept.update(engine.sweep(idle_seconds=15.0))
            next_sweep = time.monotonic() + 2.0

    while time.monotonic() - started < args.after:
        tick()
        time.sleep(0.1)
    in_flight = Run.objects.filter(pk__in=ids).exclude(status__in=(
        "completed", "failed", "cancelled", "budget_exceeded")).count()
    if name == "web":
        web.stop()
    else:
        stack.redis.stop()
    down_at = time.monotonic()
    if name == "lost":
        shutil.rmtree(stack.redis.data)
        stack.redis.data.mkdir()
    while time.monotonic() - down_at < args.down:
        tick()
        time.sleep(0.1)
    if name == "web":
        web.start()
    else:
        stack.redis.start()
    back = time.monotonic()
    deadline = back + args.timeout
    while time.monotonic() < deadline and not common.settled(ids, decided):
        tick()
        time.sleep(0.1)
    finished = time.monotonic() - back
    audits = [common.audit(i, expected[kinds[i].label], decided) for i in ids]
    # After Daphne restarts, htmx's WebSocket extension reconnects with "full-jitter"
    # backoff: a random delay up to 2^min(retries, 6) s, so a page may wait up to 64 s.
    wait = max(args.page_timeout, 75.0) if name == "web" else args.page_timeout
    pages = {r: page_problem(browser, r, wait) for r in watched}
    statuses = list(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
    return {
        "scenario": name, "runs": len(ids), "in_flight": in_flight,
        "completed": statuses.count("completed"),
        "unfinished": sum(s not in ("completed", "failed", "cancelled", "budget_exceeded")
                          for s in statuses),
        "after": finished, "swept": len(swept), "decisions": len(decided),
        "duplicates": sum(bool(a.duplicates) for a in audits),
        "bad": [a for a in audits if not a.ok],
        "pages": len(watched), "pages_ok": sum(not v for v in pages.values()),
        "reconnects": sum(browser.state(r)["opens"] - 1 for r in watched),
        "page_problems": {r: v for r, v in pages.items() if v},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per pattern and scenario")
    parser.add_argument("--patterns", nargs="+", default=list(common.PATTERN_NAMES),
                        choices=common.PATTERN_NAMES)
    parser.add_argument("--scenarios", nargs="+", default=["kept", "lost", "web"],
                        choices=["kept", "lost", "web"])
    parser.add_argument("--pages", type=int, default=4, help="runs watched in Chromium")
    parser.add_argument("--latency", type=float, default=1.0, help="offline model s/call")
    parser.add_argument("--concurrency", type=int, default=6,
                        help="worker threads (fewer than runs, so messages wait in Redis)")
    parser.add_argument("--after", type=float, default=2.0, help="s from start to the stop")
    parser.add_argument("--down", type=float, default=5.0, help="s Redis (Daphne) is down")
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--page-timeout", type=float, default=20.0)
    parser.add_argument("--sweeper", choices=["fast", "beat", "none"], default="fast")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    from tests.stack import free_port

    total = time.monotonic()
    stack = common.Stack("redis", persistent_redis=True, keep=args.keep)
    results = []
    try:
        expected = {}
        for p in args.patterns:
            for v in common.VARIANTS[p]:
                expected[v.label] = common.snapshot(common.run_clean(
                    v, 0, repo_name=f"clean-{p}-{v.name}"))
        user = common.owner()
        user.set_password(PASSWORD)
        user.save()
        workers = stack.own(common.Workers(stack.dir, node="redis", concurrency=args.concurrency,
                                           QUORUM_OFFLINE_LATENCY=args.latency))
        workers.start()
        port = free_port()
        web = stack.own(Web(stack, port))
        if args.sweeper == "beat":
            from tests.stack import BIN, app_env

            stack.own(common.Proc("beat", [
                str(BIN / "celery"), "-A", "config", "beat", "--schedule",
                str(stack.dir / "beat-schedule"), "--loglevel", "INFO"], app_env(), stack.dir))
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # this process: playwright's loop
        browser = stack.own(Browser(f"http://127.0.0.1:{port}"))
        for name in args.scenarios:
            row = scenario(name, stack, web, browser, expected, args)
            results.append(row)
            print(f"  {name}: {row['runs']} runs, finished {row['after']:.1f} s after the "
                  "restart", flush=True)
    finally:
        stack.close()

    print(f"\n# Redis restart — {time.strftime('%Y-%m-%d %H:%M')}, {common.machine()}")
    print(f"# SQLite (WAL); offline model {args.latency} s/call, worker threads "
          f"x{args.concurrency}; Redis "
          f"(web: Daphne) stopped {args.after} s after the runs started, down {args.down} s; "
          f"sweeper: {args.sweeper}; {args.pages} Chromium page(s) per scenario\n")
    print(common.table(
        ["scenario", "runs", "in flight at stop", "completed", "unfinished",
         "done s after restart", "requeued by sweeper", "duplicates", "pages",
         "pages with every event", "page reconnects"],
        [[r["scenario"], r["runs"], r["in_flight"], r["completed"], r["unfinished"],
          f"{r['after']:.1f}", r["swept"], r["duplicates"], r["pages"], r["pages_ok"],
          r["reconnects"]] for r in results]))
    ok = True
    for r in results:
        for a in r["bad"]:
            ok = False
            print(f"\n{r['scenario']}: run {a.run_id} ({a.status}): "
                  + "; ".join(a.duplicates + a.missing + a.lost_decisions + a.other))
        for run_id, problem in r["page_problems"].items():
            ok = False
            print(f"\n{r['scenario']}: the page of run {run_id}: {problem}")
    print(f"\n{'PASS' if ok else 'FAIL'}: {time.monotonic() - total:.0f} s in all.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
