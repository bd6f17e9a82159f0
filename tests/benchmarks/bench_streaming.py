"""Streaming benchmark: the time from an event being written by the worker to it appearing in
Chromium's page.

The real path: the worker writes the event row (its ``created_at`` is the start), commits and
announces it on Redis; Daphne's consumer renders it and sends it over the WebSocket; htmx
swaps it into the timeline, where a MutationObserver notes the time it appeared. Each run
page is open before its run starts; Plan-and-Execute runs with the offline model at 0.1 s a
call write about a dozen events each.

    .venv/bin/python tests/benchmarks/bench_streaming.py [--runs 8] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import (  # noqa: E402
    PASSWORD,
    TERMINAL,
    child_env,
    machine,
    make_user,
    pct,
    setup_django,
    wait_for,
)

OBSERVER = """
window.__seen = {};
new MutationObserver(records => {
  const now = performance.timeOrigin + performance.now();
  for (const r of records) for (const node of r.addedNodes) {
    if (node.nodeType !== 1) continue;
    const found = node.matches('[data-seq]') ? [node] : node.querySelectorAll('[data-seq]');
    for (const el of found) if (!(el.dataset.seq in window.__seen)) window.__seen[el.dataset.seq] = now;
  }
}).observe(document, {childList: true, subtree: true});
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.1)
    args = parser.parse_args()

    import os

    from playwright.sync_api import sync_playwright

    from tests.stack import free_port

    # Playwright's sync API keeps an event loop in this thread; the ORM calls stay synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp:
        var = Path(tmp)
        setup_django(var, free_port())
        from agents_app import engine
        from agents_app.models import Event, Run
        from tests.stack import start_redis, start_web, start_worker

        owner = make_user()
        redis = start_redis(var)
        worker = start_worker(var, node="bench", concurrency=20, QUORUM_VAR_DIR=var,
                              QUORUM_LOG_LEVEL="WARNING", QUORUM_OFFLINE_LATENCY=args.latency,
                              **child_env())
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        web = start_web(var, port, QUORUM_VAR_DIR=var, QUORUM_LOG_LEVEL="WARNING", **child_env())
        models = {r: "offline/default" for r in ("planner", "executor", "synthesizer")}
        delays, missing = [], 0
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                            args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page()
                page.add_init_script(OBSERVER)
                page.goto(base + "/accounts/login/")
                page.fill("input[name=username]", "bench")
                page.fill("input[name=password]", PASSWORD)
                page.click("button.primary")
                page.wait_for_url(base + "/")
                for i in range(args.runs + 1):  # the first run warms up
                    run = engine.create_run(owner, "plan_execute",
                                            f"Collect logs for service {i}, then find the "
                                            "error, and finally write a report.",
                                            options={"auto_approve": True}, models=models,
                                            enqueue=False)
                    page.goto(f"{base}/runs/{run.pk}/")
                    page.wait_for_selector(".run-page")
                    page.wait_for_timeout(300)  # the WebSocket is open and has said hello
                    shown = run.last_event_seq
                    engine.scheduling.schedule(run.pk)
                    wait_for(lambda pk=run.pk: Run.objects.filter(pk=pk, status__in=TERMINAL)
                             .exists(), what="the run to finish")
                    last = Run.objects.get(pk=run.pk).last_event_seq
                    page.wait_for_function(f"() => '{last}' in window.__seen", timeout=10_000)
                    seen = page.evaluate("window.__seen")
                    if i == 0:
                        continue
                    for e in Event.objects.filter(run_id=run.pk, seq__gt=shown):
                        if str(e.seq) not in seen:
                            missing += 1
                            continue
                        delays.append(seen[str(e.seq)] - 1000 * e.created_at.timestamp())
                browser.close()
        finally:
            web.stop()
            worker.stop()
            redis.stop()

    print(f"# Streaming — {machine()}; {args.runs} runs, {len(delays)} events, offline model "
          f"at {args.latency} s a call")
    print("| measure | p50 | p95 | max | events missing |")
    print("|---|---:|---:|---:|---:|")
    print(f"| event written → shown in Chromium | {pct(delays, 50):.0f} ms | "
          f"{pct(delays, 95):.0f} ms | {max(delays):.0f} ms | {missing} |")
    print(f"target: p95 ≤ 200 ms → {'met' if pct(delays, 95) <= 200 else 'MISSED'}")


if __name__ == "__main__":
    main()
