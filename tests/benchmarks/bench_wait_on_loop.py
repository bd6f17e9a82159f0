"""Where a waiting run's memory goes, by how its model call waits (issue 37's memory target,
≤ 100 kB a run in flight). A probe for the next design step, not the engine: the engine is
not changed by it.

Four ways to hold N model calls in flight in one process, each measured in a fresh child
(the allocator keeps what a batch freed, so a second batch in the same process says little):
  - **thread**: N threads, each making its call with ``litellm.completion`` (today's worker:
    a run's thread makes the HTTP request and blocks in ``recv``);
  - **greenlet**: the same code in a child that gevent has patched first (the benchmark
    requirements install it), so each "thread" is a greenlet and its ``recv`` waits on
    gevent's hub (what Celery's ``--pool gevent`` would do to a run's thread);
  - **thread, call on a loop**: N threads, each handing its call to one shared asyncio loop
    (``litellm.acompletion``) and blocking on the future (the engine's threads and sync
    pattern code kept, the HTTP waits moved off them);
  - **coroutine**: N coroutines on that loop, no thread each (the asyncio design measured in
    ``bench_memory_design.py``).
Each child runs a batch of N, then one of 2N, against the fake provider (its own process,
answering after ``--latency`` s), samples its PSS every 0.05 s, and reports the growth of the
peak from N to 2N, ÷ N: kB a call in flight holds. With ``--live`` another child per way
counts instead, with ``tracemalloc``, the Python objects alive (the same growth from N to 2N
calls, ÷ N): what the call itself keeps, before any allocator's overhead.

    .venv/bin/python tests/benchmarks/bench_wait_on_loop.py [--n 100] [--latency 2] [--rounds 2]
        [--live]
"""

from __future__ import annotations

import sys

if sys.argv[1:3] == ["--child", "greenlet"]:  # patched before anything imports socket or threads
    from gevent import monkey

    monkey.patch_all()

import argparse
import asyncio
import json
import os
import statistics
import subprocess  # nosec B404: this repository's own script as a child
import threading
import time
from concurrent.futures import Future
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import machine, positive, pss_mb  # noqa: E402

WAYS = ("thread", "greenlet", "thread, call on a loop", "coroutine")
ON_LOOP = ("thread, call on a loop", "coroutine")  # the ways whose calls the asyncio loop makes
MESSAGES = [{"role": "user", "content": "Collect the logs, then find the error."}]


def _call_kwargs(url: str) -> dict:
    return {"model": "openai/fake-executor", "api_base": url, "api_key": "sk-bench-fake",
            "messages": MESSAGES, "timeout": 60, "num_retries": 0}


def child(way: str, n: int, url: str, live: bool = False) -> dict[str, float]:
    """Batches of ``n`` then ``2n`` calls; the peak PSS's growth ÷ n (kB), or with ``live``
    the peak of the objects ``tracemalloc`` counts alive, grown the same way."""
    import tracemalloc

    import litellm

    kwargs = _call_kwargs(url)
    loop = asyncio.new_event_loop()
    if way in ON_LOOP:  # never started in a greenlet child
        threading.Thread(target=loop.run_forever, daemon=True).start()

    def measure() -> float:
        return tracemalloc.get_traced_memory()[0] / 1024 / 1024 if live else pss_mb(os.getpid())

    def on_loop() -> object:
        future: Future = asyncio.run_coroutine_threadsafe(litellm.acompletion(**kwargs), loop)
        return future.result()

    def batch(size: int) -> float:
        """The peak of ``measure()`` (MB) while ``size`` calls are in flight."""
        peak, done = [measure()], threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], measure())
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            if way == "coroutine":
                async def many() -> None:
                    await asyncio.gather(*(litellm.acompletion(**kwargs) for _ in range(size)))

                asyncio.run_coroutine_threadsafe(many(), loop).result()
            else:
                target = on_loop if way == "thread, call on a loop" else (
                    lambda: litellm.completion(**kwargs))  # a greenlet's "thread" too
                threads = [threading.Thread(target=target) for _ in range(size)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        finally:
            done.set()
            sampler.join()
        return peak[0]

    on_loop() if way in ON_LOOP else litellm.completion(**kwargs)  # warm: imports, pools
    if live:
        tracemalloc.start()
    first = batch(n)
    second = batch(2 * n)
    return {"kb": 1024 * (second - first) / n, "first_peak_mb": first}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=positive(int, 10, 1000), default=100)
    parser.add_argument("--latency", type=positive(float, 0.5, 30.0), default=2.0)
    parser.add_argument("--rounds", type=positive(int, 1, 10), default=2,
                        help="fresh children per way")
    parser.add_argument("--live", action="store_true",
                        help="also count the live Python objects a call holds (tracemalloc)")
    parser.add_argument("--child", choices=WAYS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.n, args.url, args.live)))
        return
    from tests.benchmarks.bench_vs_langgraph import FakeProcess

    fake = FakeProcess(args.latency)
    kinds = ("pss", "live") if args.live else ("pss",)
    results: dict[tuple[str, str], list[float]] = {(k, w): [] for k in kinds for w in WAYS}
    try:
        for _ in range(args.rounds):
            for kind in kinds:
                for way in WAYS:
                    out = subprocess.run(  # nosec B603: this script, fixed arguments
                        [sys.executable, __file__, "--child", way, "--n", str(args.n), "--url",
                         fake.url, *(["--live"] if kind == "live" else [])],
                        capture_output=True, text=True, check=True,
                        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
                    results[kind, way].append(
                        json.loads(out.stdout.strip().splitlines()[-1])["kb"])
    finally:
        fake.stop()
    print(f"# bench_wait_on_loop — {machine()}; fake provider L = {args.latency:g} s; "
          f"batches of {args.n} then {2 * args.n} calls in flight; {args.rounds} fresh "
          "children per way")
    heads = {"pss": "kB a call in flight holds (PSS; each child)",
             "live": "of which live Python objects (tracemalloc; each child)"}
    print("| how a call waits | " + " | median | ".join(heads[k] for k in kinds) + " | median |")
    print("|---|" + "---|---:|" * len(kinds))
    for way in WAYS:
        cells = [f"{', '.join(f'{kb:.0f}' for kb in results[k, way])} | "
                 f"{statistics.median(results[k, way]):.0f}" for k in kinds]
        print(f"| {way} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
