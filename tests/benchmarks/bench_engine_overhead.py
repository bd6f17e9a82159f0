"""Engine overhead per model call: a run's wall time minus the provider's time, per call,
against LiteLLM called directly in a loop on the same fake provider.

Both sides send the same kind of request over HTTP to the fake OpenAI-compatible provider,
which answers after a fixed latency L. "direct" is ``litellm.completion`` in a loop. "engine,
in process" is a whole auto-approved Plan-and-Execute run driven by ``engine.run_inline``:
claims, prompts, the call journal, events announced on Redis, stage commits on SQLite.
"engine, worker" is the same run through Redis and the Celery worker, from enqueue to the
end the worker records (``finished_at``), so polling for it costs nothing. Overhead per call = (wall − calls × L) / calls.

    .venv/bin/python tests/benchmarks/bench_engine_overhead.py [--latency 0.05] [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import (  # noqa: E402
    TERMINAL,
    child_env,
    machine,
    make_user,
    setup_django,
    wait_for,
)

TASK = "Collect logs for service {i}, then find the error, and finally write a report."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=6,
                        help="rounds left out: the first call on each worker thread is slow")
    args = parser.parse_args()
    L = args.latency

    from tests.fakeprovider import FakeProvider, fake_models
    from tests.stack import free_port

    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp, \
            FakeProvider(latency=L) as fake:
        var = Path(tmp)
        env = {"QUORUM_API_BASE": fake.url, "OPENAI_API_KEY": "sk-bench-fake"}
        setup_django(var, free_port(), **env)
        import litellm
        from django.conf import settings

        from agents_app import engine
        from agents_app.models import ModelCall, Run
        from tests.stack import start_redis, start_worker

        settings.QUORUM_API_BASE = fake.url
        owner = make_user()
        redis = start_redis(var)
        worker = start_worker(var, node="bench", concurrency=4, QUORUM_VAR_DIR=var,
                              QUORUM_LOG_LEVEL="WARNING", **env, **child_env())
        models = fake_models("planner", "executor", "synthesizer")
        direct, inline, queued = [], [], []
        try:
            def new_run(i: int) -> int:
                return engine.create_run(owner, "plan_execute", TASK.format(i=i),
                                         options={"auto_approve": True}, models=models,
                                         enqueue=False).pk

            def per_call(wall: float, pk: int | None = None, n: int = 5) -> float:
                """ms per call beyond the provider's latency; a run's calls from its journal."""
                if pk is not None:
                    n = sum(ModelCall.objects.filter(run_id=pk).values_list("attempts",
                                                                            flat=True))
                return 1000 * (wall - n * L) / n

            for i in range(args.warmup + args.repeat):
                measured = i >= args.warmup
                started = time.perf_counter()
                for _ in range(5):
                    litellm.completion(model="openai/fake-executor", api_base=fake.url,
                                       messages=[{"role": "user", "content": TASK.format(i=i)}],
                                       timeout=30, num_retries=0)
                wall = time.perf_counter() - started
                if measured:
                    direct.append(per_call(wall))

                pk = new_run(i)
                started = time.perf_counter()
                run = engine.run_inline(pk)
                wall = time.perf_counter() - started
                assert run.status == "completed", run.error
                if measured:
                    inline.append(per_call(wall, pk))

                pk = new_run(i)
                started = time.time()
                engine.scheduling.schedule(pk)
                finished = wait_for(lambda pk=pk: Run.objects.filter(
                    pk=pk, status__in=TERMINAL).values_list("finished_at", flat=True).first(),
                    interval=0.05, what="the run to finish")
                if measured:  # the worker's own clock of the end
                    queued.append(per_call(finished.timestamp() - started, pk))
        finally:
            worker.stop()
            redis.stop()

    med = statistics.median
    print(f"# Engine overhead per model call — {machine()}; fake provider over HTTP, "
          f"L = {L * 1000:.0f} ms; median of {args.repeat}; Plan-and-Execute runs of 5 calls")
    print("| path | overhead per call | minus direct |")
    print("|---|---:|---:|")
    print(f"| LiteLLM directly, in a loop | {med(direct):.1f} ms | — |")
    print(f"| engine, in process | {med(inline):.1f} ms | {med(inline) - med(direct):.1f} ms |")
    print(f"| engine, through Redis and the worker | {med(queued):.1f} ms | "
          f"{med(queued) - med(direct):.1f} ms |")
    worst = med(queued) - med(direct)
    print(f"target: ≤ 15 ms per call → {'met' if worst <= 15 else 'MISSED'} ({worst:.1f} ms)")


if __name__ == "__main__":
    main()
