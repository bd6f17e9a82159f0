"""What the worker's memory target would take: the figure for a design Quorum does not have.

The worker holds each run in flight in a thread of a Celery thread pool, two processes forked
from one parent (``manage.py worker``). bench_vs_langgraph measures it at ~500 MB PSS with 200
runs in flight, against LangGraph's ~257 MB for one asyncio process, and the target is 260.
This script measures the design that docs/BENCHMARKS.md names instead: **one process holding
every run as a coroutine**, its model calls awaited (``litellm.acompletion``) and its database
writes handed to a pool of a few threads. It is a model of that design, not an engine: each
"run" makes the Plan-and-Execute run's four calls to the same fake provider and appends one
event to its run row after each, with Quorum's own ``append_events``, so what is held per run
in flight is a coroutine, an HTTP request and its answer, not a pattern's stages.

Printed, all in one process of its own (a child, so that its memory is its own):
  - the floor: PSS after importing what a worker imports (``manage.py worker``'s warm-up,
    LiteLLM and its provider modules), before any run, and again after one run (warm);
  - the peak PSS and RSS with N runs in flight, and the makespan ratio N at once ÷ one run.

What the floor is made of, each in a fresh process: ``import litellm`` alone, and Django with
Celery, the tasks and every pattern without LiteLLM.

And for comparison the floor of the process that hosts runs today: one Celery worker (threads
pool, concurrency N, started on its own as ``celery -A config worker``), its PSS when ready and
after four Plan-and-Execute runs through it, none in flight. Whatever a run in flight costs, it
comes on top of that.

    .venv/bin/python tests/benchmarks/bench_memory_design.py [--n 200] [--latency 1.0]
        [--db-threads 4] [--runs 3]

DEBUG=false. Needs nothing beyond the app's own requirements.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess  # nosec B404: this repository's own script as a child
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.common import machine, positive, pss_mb, setup_django  # noqa: E402

ROLES = ("planner", "executor", "executor", "synthesizer")  # the run's four calls
TARGET_MB = 260.0


def _own_peak_rss() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class OwnPss(threading.Thread):
    """This process's largest PSS, sampled every 0.1 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.done = 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak = max(self.peak, pss_mb(os.getpid()))


def child(args) -> None:
    """One process: the worker's imports, then runs as coroutines."""
    import django

    django.setup()
    from agents_app.events import EventSpec, append_events
    from agents_app.llm.runtime import litellm as litellm_runtime
    from agents_app.management.commands.worker import PROVIDER_MODULES, preload, warm_up

    warm_up()
    litellm = litellm_runtime()
    preload(PROVIDER_MODULES)
    floor = pss_mb(os.getpid())
    run_ids = [int(x) for x in args.run_ids.split(",")]

    async def one_run(run_id: int) -> None:
        loop = asyncio.get_running_loop()
        for i, role in enumerate(ROLES):
            reply = await litellm.acompletion(
                model=f"openai/fake-{role}", api_base=args.url, api_key="sk-bench-fake",
                timeout=60, num_retries=0,
                messages=[{"role": "system", "content": f"You are the {role}."},
                          {"role": "user", "content": f"Run {run_id}, call {i + 1} of 4."}])
            text = reply.choices[0].message.content or ""
            await loop.run_in_executor(None, append_events, run_id, [
                EventSpec("model_call", f"{role} answered", {"chars": len(text)})])

    async def main() -> dict:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(args.db_threads,
                                                     thread_name_prefix="db"))
        await one_run(run_ids[0])  # warm-up: connections, LiteLLM's client cache
        warm = pss_mb(os.getpid())
        started = time.monotonic()
        await one_run(run_ids[1])
        single = time.monotonic() - started
        sampler = OwnPss()
        sampler.start()
        started = time.monotonic()
        await asyncio.gather(*(one_run(r) for r in run_ids[2:]))
        makespan = time.monotonic() - started
        sampler.done.set()
        sampler.join()
        return {"floor_pss": floor, "warm_pss": warm,
                "peak_pss": max(sampler.peak, pss_mb(os.getpid())),
                "peak_rss": _own_peak_rss(), "one": single, "makespan": makespan}

    print(json.dumps(asyncio.run(main())), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=positive(int, 1, 2000), default=200)
    parser.add_argument("--latency", type=positive(float, 0.0, 10.0), default=1.0)
    parser.add_argument("--db-threads", type=positive(int, 1, 1000), default=4)
    parser.add_argument("--runs", type=positive(int, 1, 20), default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--run-ids", help=argparse.SUPPRESS)
    parser.error = lambda message: parser.exit(2, f"bench_memory_design: {message}\n")
    args = parser.parse_args()
    if args.child and not (args.url and args.run_ids):
        parser.error("--child is this script's own: it takes --url and --run-ids")
    if args.child:
        child(args)
        return

    from tests.benchmarks.bench_vs_langgraph import FakeProcess
    from tests.stack import free_port, start_redis

    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="quorum-memory-design-") as tmp:
        var = Path(tmp)
        fake = FakeProcess(args.latency)
        try:
            setup_django(var, free_port(), DEBUG="false", QUORUM_LOG_LEVEL="ERROR",
                         QUORUM_API_BASE=fake.url, OPENAI_API_KEY="sk-bench-fake",
                         SECRET_KEY="bench-not-secret")
            from agents_app.models import Run
            from tests.benchmarks.common import make_user

            owner = make_user()
            redis = start_redis(var)  # the events are announced, as the worker's are
            for _ in range(args.runs):
                ids = [Run.objects.create(owner=owner, pattern="plan_execute",
                                          task=f"memory design {i}").pk
                       for i in range(args.n + 2)]
                out = subprocess.run(  # nosec B603: our own script, no shell
                    [sys.executable, __file__, "--child", "--url", fake.url, "--n", str(args.n),
                     "--db-threads", str(args.db_threads),
                     "--run-ids", ",".join(map(str, ids))],
                    capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(),
                    timeout=900, check=False)
                if out.returncode != 0:
                    raise RuntimeError(f"the child failed:\n{out.stderr[-3000:]}")
                got = json.loads(out.stdout.strip().splitlines()[-1])
                written = Run.objects.filter(pk__in=ids, last_event_seq=4).count()
                if written != len(ids):
                    raise RuntimeError(f"{len(ids) - written} runs lack their four events")
                rows.append(got)
                print(f"# floor {got['floor_pss']:.0f} MB PSS; {args.n} runs in flight: peak "
                      f"PSS {got['peak_pss']:.0f} MB, peak RSS {got['peak_rss']:.0f} MB; "
                      f"{got['makespan']:.1f} s ÷ one run {got['one']:.1f} s = "
                      f"{got['makespan'] / got['one']:.2f}×", flush=True)
            worker = celery_floor(var, owner, args.n, fake.url)
            parts = {what: import_pss(code) for what, code in IMPORTS.items()}
            redis.stop()
        finally:
            fake.stop()

    med = statistics.median
    print(f"\n# {machine()}; load {load:.1f}; DEBUG=false; L = {args.latency} s; "
          f"{args.db_threads} database threads; medians of {args.runs}")
    print("| process | PSS before any run | PSS after a run (warm) | peak PSS, N in flight | "
          "per run in flight | N at once ÷ one |")
    print("|---|---:|---:|---:|---:|---:|")
    floor, peak = med(r["floor_pss"] for r in rows), med(r["peak_pss"] for r in rows)
    warm = med(r["warm_pss"] for r in rows)
    print(f"| one asyncio process (the design), N = {args.n} | {floor:.1f} MB | {warm:.1f} MB | "
          f"{peak:.1f} MB ({'meets' if peak <= TARGET_MB else 'misses'} ≤ {TARGET_MB:.0f}) | "
          f"{1000 * (peak - warm) / args.n:.0f} kB | "
          f"{med(r['makespan'] / r['one'] for r in rows):.2f}× |")
    ready, after = worker
    room = TARGET_MB - after
    print(f"| one Celery worker (threads pool), as runs are hosted today | {ready:.1f} MB | "
          f"{after:.1f} MB | — | — | — |")
    for what, mb in parts.items():
        print(f"| {what} | {mb:.1f} MB | — | — | — | — |")
    print(f"# On the Celery worker's warm floor, the target leaves {room:.0f} MB for {args.n} "
          f"runs in flight: {1000 * room / args.n:.0f} kB each"
          + ("." if room <= 0 else f", against the design's {1000 * (peak - warm) / args.n:.0f} "
             "kB."))


IMPORTS = {  # what, and the code a fresh interpreter runs (PSS after minus before)
    "`import litellm` alone (in both sides' processes)": "import litellm",
    "Django, Celery, the tasks, every pattern; no LiteLLM": (
        "import django\ndjango.setup()\nimport agents_app.tasks, config.celery\n"
        "from agents_app.patterns.registry import load_all\nload_all()\n"
        "import sys\nassert 'litellm' not in sys.modules"),
}


def import_pss(code: str) -> float:
    """PSS (MB) that ``code`` adds to a fresh interpreter."""
    script = ("import os\nfrom tests.benchmarks.common import pss_mb\n"  # standard library only
              f"before = pss_mb(os.getpid())\n{code}\nprint(pss_mb(os.getpid()) - before)")
    out = subprocess.run(  # nosec B603: our own code, no shell
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
        env=os.environ.copy(), timeout=300, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def celery_floor(var: Path, owner, n: int, url: str) -> tuple[float, float]:
    """PSS of one Celery worker process (threads pool, concurrency ``n``) when ready, and after
    four Plan-and-Execute runs through it with none in flight (LiteLLM loaded, caches warm)."""
    from tests.benchmarks.bench_vs_langgraph import quorum_batch
    from tests.fakeprovider import fake_models
    from tests.stack import start_worker

    env = {"QUORUM_API_BASE": url, "OPENAI_API_KEY": "sk-bench-fake", "DEBUG": "false",
           "QUORUM_LOG_LEVEL": "ERROR", "SECRET_KEY": "bench-not-secret", "QUORUM_VAR_DIR": var}
    worker = start_worker(var, node="floor", concurrency=n, **env)
    try:
        time.sleep(2)  # settled after "ready."
        ready = pss_mb(worker.popen.pid)
        quorum_batch(owner, fake_models("planner", "executor", "synthesizer"), 4,
                     [worker.popen.pid])
        time.sleep(1)
        return ready, pss_mb(worker.popen.pid)
    finally:
        worker.stop()


if __name__ == "__main__":
    main()
