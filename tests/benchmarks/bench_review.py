"""Review fan-out benchmark: a code review's wall time against the critical path of three
model latencies (reviewers in parallel, reflections in parallel, synthesis) and against
the sequential seven.

Two measurements, each the median of ``--repeat`` reviews of the same diff:

* ``engine``: the real path — ``services.start_review`` on SQLite, then the engine's stages
  in this process, every call through the gateway and LiteLLM to the offline model slowed
  to L seconds a call, each call journaled in the database. The static-analysis stage
  (ruff + bandit, no model call) is timed apart.
* ``pattern``: the pattern alone with a function fake sleeping L (no database, no LiteLLM):
  the floor the design allows.

The sequential baseline runs the same review with ``max_parallel_calls=1``.

    .venv/bin/python tests/benchmarks/bench_review.py [--latency 0.5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.common import setup_django  # noqa: E402

DIFF = '''diff --git a/app/accounts.py b/app/accounts.py
new file mode 100644
--- /dev/null
+++ b/app/accounts.py
@@ -0,0 +1,16 @@
+import subprocess
+
+PASSWORD = "hunter2"
+
+
+def lookup(db, uid):
+    return db.execute("select * from users where id = %s" % uid)
+
+
+def archive(name):
+    try:
+        subprocess.call("tar czf /tmp/%s.tgz /srv/data" % name, shell=True)
+    except Exception:
+        pass
+    if name == None:
+        return eval(name)
'''


def engine_review(owner, parallel: int) -> dict:
    from agents_app import engine
    from agents_app.models import ModelCall, Run
    from reviews_app import services

    inp = services.from_text(DIFF)
    run = services.start_review(owner, inp, services.prepare(inp), enqueue=False,
                                options={"max_parallel_calls": parallel})
    stages: dict[str, float] = {}
    while True:
        run = Run.objects.get(pk=run.pk)
        if run.status == "awaiting_triage" or run.is_terminal:
            break
        t0 = time.monotonic()
        engine.advance(run.pk, enqueue=False)
        stages[run.stage] = stages.get(run.stage, 0.0) + time.monotonic() - t0
    if run.status != "awaiting_triage":
        raise RuntimeError(f"review ended as {run.status}: {run.error}")
    calls = ModelCall.objects.filter(run=run).count()
    model_path = sum(v for k, v in stages.items() if k != "analyze")
    return {"analyze": stages.get("analyze", 0.0), "model": model_path, "calls": calls}


def pattern_review(latency: float, parallel: int) -> dict:
    from agents_app.patterns.testing import FunctionModel
    from reviews_app.pipeline import diffs
    from reviews_app.pipeline.pattern import CodeReview
    from tests.test_review_pipeline import Script, finding

    found = {
        "security": {"findings": [finding("security", "high", 7, "SQL built with %",
                                          file="app/accounts.py")]},
        "architecture": {"findings": [finding("architecture", "medium", 13,
                                              "Exception swallowed", file="app/accounts.py")]},
        "style": {"findings": [finding("style", "low", 15, "Compare to None with is",
                                       file="app/accounts.py", suggestion="if name is None:")]},
    }
    script = Script(found=found)

    def slow(messages, info):
        time.sleep(latency)
        return script(messages, info)

    pattern = CodeReview()
    prepared = diffs.prepare(DIFF)
    state = pattern.initial_state("bench", {"input": {
        "label": "bench", "files": prepared.files, "coverage": prepared.coverage,
        "total_files": prepared.total_files}, "max_parallel_calls": parallel})
    model = FunctionModel(slow)
    t0 = time.monotonic()
    stage = "review"
    while stage != "close":
        result = pattern.run_stage(stage, state, model)
        state, stage = result.state, result.next_stage
    return {"model": time.monotonic() - t0, "calls": len(model.history)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    L = args.latency

    with tempfile.TemporaryDirectory(prefix="quorum-bench-review-") as tmp:
        from tests.stack import free_port, start_redis

        os.environ["QUORUM_REVIEW_DAILY_LIMIT"] = "100000"
        setup_django(Path(tmp), free_port())
        redis = start_redis(Path(tmp))  # events are announced as in production
        from django.contrib.auth import get_user_model

        from agents_app.llm.gateway import set_offline_latency

        try:
            owner = get_user_model().objects.create_user("bench")
            engine_review(owner, 24)  # warm-up: imports, analyzers, connections
            set_offline_latency(L)
            results = {}
            for label, parallel in (("parallel", 24), ("sequential", 1)):
                eng = [engine_review(owner, parallel) for _ in range(args.repeat)]
                pat = [pattern_review(L, parallel) for _ in range(args.repeat)]
                results[label] = {
                    "engine": statistics.median(r["model"] for r in eng),
                    "analyze": statistics.median(r["analyze"] for r in eng),
                    "engine_calls": eng[0]["calls"],
                    "pattern": statistics.median(r["model"] for r in pat),
                    "pattern_calls": pat[0]["calls"],
                }
        finally:
            redis.stop()

    print(f"# Review fan-out — {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"# fake model latency L = {L} s/call; median of {args.repeat}; critical path 3L = "
          f"{3 * L:.2f} s, sequential 7L = {7 * L:.2f} s")
    print(f"{'mode':<11} {'path':<8} {'calls':>5} {'model stages s':>15} {'/ 3L':>6} "
          f"{'/ 7L':>6} {'analyze s':>10}")
    for label, r in results.items():
        print(f"{label:<11} {'engine':<8} {r['engine_calls']:>5} {r['engine']:>15.2f} "
              f"{r['engine'] / (3 * L):>6.2f} {r['engine'] / (7 * L):>6.2f} "
              f"{r['analyze']:>10.2f}")
        print(f"{label:<11} {'pattern':<8} {r['pattern_calls']:>5} {r['pattern']:>15.2f} "
              f"{r['pattern'] / (3 * L):>6.2f} {r['pattern'] / (7 * L):>6.2f} {'—':>10}")


if __name__ == "__main__":
    main()
