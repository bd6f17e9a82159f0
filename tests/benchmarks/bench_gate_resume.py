"""Gate resume benchmark: the time from a person's approve POST to the next stage starting
in the worker (issue 17's row, target p99 ≤ 50 ms) and to the next model request reaching the
provider.

The real path: Daphne takes the POST (a signed-in session, CSRF), the view records the
decision and enqueues the continuation on Redis, the thread-pool Celery worker claims the
stage, builds the executor's prompt and calls the fake OpenAI-compatible provider through
LiteLLM's HTTP client. The clock stops when the fake has read that request. Plan-and-Execute
runs wait at their plan gate one at a time (nothing else is running), then are approved.

    .venv/bin/python tests/benchmarks/bench_gate_resume.py [--runs 40]
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import (  # noqa: E402
    child_env,
    machine,
    make_user,
    pct,
    positive,
    settings_note,
    setup_django,
    signed_in_client,
    wait_for,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive(int, 4, 1000), default=40,
                        help="runs (the first three warm up and are not counted)")
    parser.add_argument("--summary", type=Path, default=None,
                        help="also write the figures as JSON here")
    parser.error = lambda message: parser.exit(2, f"bench_gate_resume: {message}\n")
    args = parser.parse_args()

    from tests.fakeprovider import FakeProvider, fake_models
    from tests.stack import free_port

    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp, FakeProvider() as fake:
        var = Path(tmp)
        env = {"QUORUM_API_BASE": fake.url, "OPENAI_API_KEY": "sk-bench-fake"}
        setup_django(var, free_port(), **env)
        from agents_app import engine
        from agents_app.models import Event, Run
        from tests.stack import start_redis, start_web, start_worker

        owner = make_user()
        note = settings_note()
        redis = start_redis(var)
        worker = start_worker(var, node="bench", concurrency=20, QUORUM_VAR_DIR=var,
                              QUORUM_LOG_LEVEL="WARNING", **env, **child_env())
        port = free_port()
        web = start_web(var, port, QUORUM_VAR_DIR=var, QUORUM_LOG_LEVEL="WARNING", **env,
                        **child_env())
        models = fake_models("planner", "executor", "synthesizer")
        resume, post, stage = [], [], []
        try:
            client = signed_in_client(f"http://127.0.0.1:{port}")
            for i in range(args.runs + 3):  # the first three warm up imports and connections
                run = engine.create_run(owner, "plan_execute",
                                        f"Collect logs for service {i}, then find the error.",
                                        options={}, models=models)
                run = wait_for(lambda pk=run.pk: Run.objects.filter(
                    pk=pk, status="awaiting_plan_approval").first(), what="the plan gate")
                page = client.get(f"/runs/{run.pk}/").text  # the page a person approves from
                seq = re.search(r'name="seq" value="(\d+)"', page).group(1)
                # The form posts every step on the screen: approving approves exactly those.
                steps = [html.unescape(s) for s in
                         re.findall(r'<textarea name="steps"[^>]*>(.*?)</textarea>', page, re.S)]
                before = len(fake.seen)
                started = time.time()
                response = client.post(f"/runs/{run.pk}/plan/", data={"action": "approve",
                                                                       "seq": seq, "steps": steps})
                answered = time.time()
                if response.status_code >= 400:
                    errors = re.findall(r'class="error"[^>]*>([^<]*)', response.text)
                    raise RuntimeError(f"approve failed: HTTP {response.status_code}: {errors}")
                arrived = wait_for(lambda b=before: len(fake.seen) > b and fake.seen[b],
                                   what="the executor's request").at
                wait_for(lambda pk=run.pk: Run.objects.filter(pk=pk, status="completed").exists(),
                         what="the run to finish")
                # The next stage's start: the worker's stage_started event after the decision
                # (its created_at is taken in the claim's transaction, on this machine's clock).
                decided = Event.objects.get(run=run, kind="plan_decided").seq
                begun = Event.objects.filter(run=run, kind="stage_started", seq__gt=decided
                                             ).order_by("seq").values_list("created_at",
                                                                            flat=True).first()
                if i >= 3:
                    stage.append(1000 * (begun.timestamp() - started))
                    resume.append(1000 * (arrived - started))
                    post.append(1000 * (answered - started))
        finally:
            web.stop()
            worker.stop()
            redis.stop()

    print(f"# Gate resume — {machine()}; {args.runs} runs, one at a time; {note}")
    print("| measure | p50 | p95 | p99 | max |")
    print("|---|---:|---:|---:|---:|")
    for name, values in (("approve POST answered", post),
                         ("approve POST → next stage started (worker's claim)", stage),
                         ("approve POST → next model request at the provider", resume)):
        print(f"| {name} | {pct(values, 50):.0f} ms | {pct(values, 95):.0f} ms | "
              f"{pct(values, 99):.0f} ms | "
              f"{max(values):.0f} ms |")
    print(f"# load average at the end: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    if args.summary is not None:
        args.summary.write_text(json.dumps({
            "runs": len(stage), "p50_ms": pct(stage, 50), "p95_ms": pct(stage, 95),
            "p99_ms": pct(stage, 99), "provider_p99_ms": pct(resume, 99)}))
    print(f"target (issue 17, gate decision → next stage started): p99 ≤ 50 ms → "
          f"{'met' if pct(stage, 99) <= 50 else 'MISSED'}")


if __name__ == "__main__":
    main()
