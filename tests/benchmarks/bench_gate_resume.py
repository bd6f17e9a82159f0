"""Gate resume benchmark: the time from a person's approve POST to the next model request
reaching the provider.

The real path: Daphne takes the POST (a signed-in session, CSRF), the view records the
decision and enqueues the continuation on Redis, the thread-pool Celery worker claims the
stage, builds the executor's prompt and calls the fake OpenAI-compatible provider through
LiteLLM's HTTP client. The clock stops when the fake has read that request. Plan-and-Execute
runs wait at their plan gate one at a time (nothing else is running), then are approved.

    .venv/bin/python tests/benchmarks/bench_gate_resume.py [--runs 40]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import (  # noqa: E402
    machine,
    make_user,
    pct,
    setup_django,
    signed_in_client,
    wait_for,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()

    from tests.fakeprovider import FakeProvider, fake_models
    from tests.stack import free_port

    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp, FakeProvider() as fake:
        var = Path(tmp)
        env = {"QUORUM_API_BASE": fake.url, "OPENAI_API_KEY": "sk-bench-fake"}
        setup_django(var, free_port(), **env)
        from agents_app import engine
        from agents_app.models import Run
        from tests.stack import start_redis, start_web, start_worker

        owner = make_user()
        redis = start_redis(var)
        worker = start_worker(var, node="bench", concurrency=20, QUORUM_VAR_DIR=var,
                              QUORUM_LOG_LEVEL="WARNING", **env)
        port = free_port()
        web = start_web(var, port, QUORUM_VAR_DIR=var, QUORUM_LOG_LEVEL="WARNING", **env)
        models = fake_models("planner", "executor", "synthesizer")
        resume, post = [], []
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
                before = len(fake.seen)
                started = time.time()
                response = client.post(f"/runs/{run.pk}/plan/", data={"action": "approve",
                                                                       "seq": seq})
                answered = time.time()
                if response.status_code >= 400:
                    raise RuntimeError(f"approve failed: HTTP {response.status_code}")
                arrived = wait_for(lambda b=before: len(fake.seen) > b and fake.seen[b],
                                   what="the executor's request").at
                wait_for(lambda pk=run.pk: Run.objects.filter(pk=pk, status="completed").exists(),
                         what="the run to finish")
                if i >= 3:
                    resume.append(1000 * (arrived - started))
                    post.append(1000 * (answered - started))
        finally:
            web.stop()
            worker.stop()
            redis.stop()

    print(f"# Gate resume — {machine()}; {args.runs} runs, one at a time")
    print("| measure | p50 | p95 | max |")
    print("|---|---:|---:|---:|")
    for name, values in (("approve POST answered", post),
                         ("approve POST → next model request at the provider", resume)):
        print(f"| {name} | {pct(values, 50):.0f} ms | {pct(values, 95):.0f} ms | "
              f"{max(values):.0f} ms |")
    print(f"target: p95 ≤ 250 ms → {'met' if pct(resume, 95) <= 250 else 'MISSED'}")


if __name__ == "__main__":
    main()
