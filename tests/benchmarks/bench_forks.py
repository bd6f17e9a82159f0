"""Forks and comparisons (issue 33): what a fork saves, and what making one and comparing
runs cost.

1. **A fork calls the provider only for the stages it runs.** A Plan-and-Execute run of 8
   steps (stage 1 the plan, 2–9 the steps, 10 the answer: 10 model calls) against the fake
   OpenAI-compatible provider over real HTTP (LiteLLM's own client), then a fork of it from
   stage 7 run in this process. The fake's request log says which requests arrived while the
   fork ran; each is matched by the messages it carried to the fork's journal row, whose
   stage gives its number. Asserted: requests only for stages 7–10, none for 1–6.
2. **Making a fork** (``create_fork``, the fork not run): p50 and p95 over N forks from the
   last stage (the most records to copy) of a run of 10 calls and of a run of 200 calls
   (198 steps: the run is made by the engine on the offline model, its ``max_steps`` raised
   past the form's 30 in its state), interleaved, and their ratio.
3. **Comparing**: ``stages()`` of two runs plus ``compare()``, for two 10-call runs and two
   200-call runs; ``side_by_side`` of five 10-call runs (with their five ``stages()``).

    .venv/bin/python tests/benchmarks/bench_forks.py [--forks 30] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import (  # noqa: E402
    machine,
    make_user,
    pct,
    positive,
    settings_note,
    setup_django,
)

TARGET_P95_MS = 500.0
ROLES = ("planner", "executor", "synthesizer")


def task(parts: int) -> str:
    return ", then ".join(f"check part {i} of the service" for i in range(1, parts + 1)) + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--forks", type=positive(int, 5, 1000), default=30,
                        help="forks made of each run (after 3 left out to warm up)")
    parser.add_argument("--repeat", type=positive(int, 3, 1000), default=20,
                        help="comparisons timed of each kind")
    parser.add_argument("--big", type=positive(int, 20, 1000), default=200,
                        help="model calls of the large run")
    parser.add_argument("--latency", type=positive(float, 0.0, 5.0), default=0.05,
                        help="the fake provider's seconds per request (part 1)")
    parser.error = lambda message: parser.exit(2, f"bench_forks: {message}\n")
    args = parser.parse_args()

    from tests.fakeprovider import FakeProvider, fake_models, offline_script
    from tests.stack import free_port

    asked: list[tuple[str, list]] = []  # every request's role and messages, in arrival order
    lock = threading.Lock()

    def script(role, schema, messages):
        with lock:
            asked.append((role, messages))
        return offline_script(role, schema, messages)

    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp, \
            FakeProvider(latency=args.latency, script=script) as fake:
        var = Path(tmp)
        env = {"QUORUM_API_BASE": fake.url, "OPENAI_API_KEY": "sk-bench-fake"}
        setup_django(var, free_port(), **env)
        from tests.stack import start_redis

        redis = start_redis(var)  # the events' announcements go where a deployment sends them
        try:
            owner = make_user()
            note = settings_note()
            saved = part_one(owner, fake, asked, lock, fake_models(*ROLES))
            made, compared = parts_two_and_three(owner, args)
        finally:
            redis.stop()

    report(args, note, saved, made, compared)


# --- 1. the calls a fork makes -----------------------------------------------------------------
def part_one(owner, fake, asked, lock, models) -> dict:
    from agents_app import engine
    from agents_app.forking import lineage
    from agents_app.forking.cli import drive
    from agents_app.forking.create import create_fork
    from agents_app.models import Checkpoint, ModelCall

    def new_run(steps: int):
        return engine.create_run(owner, "plan_execute", task(steps),
                                 options={"auto_approve": True, "max_steps": steps},
                                 models=models, enqueue=False)

    # A first run of two steps loads LiteLLM and opens its connections, so the wall times
    # below compare the runs, not the process's warm-up.
    assert engine.run_inline(new_run(2).pk).status == "completed"
    warm = len(fake.seen)
    with lock:
        del asked[:]
    run = new_run(8)
    started = time.perf_counter()
    run = engine.run_inline(run.pk)
    whole = time.perf_counter() - started
    assert run.status == "completed", run.error
    seq_of = {cp.stage: cp.seq for cp in Checkpoint.objects.filter(run=run) if cp.stage}
    by_stage = sorted(seq_of[c.stage] for c in ModelCall.objects.filter(run=run))
    assert by_stage == list(range(1, 11)), by_stage  # one call in each of stages 1–10
    assert len(fake.seen) - warm == 10

    with lock:
        before = len(asked)
    seen_before = len(fake.seen)
    started = time.perf_counter()
    fork = create_fork(run, owner, seq=7, enqueue=False)
    fork = drive(fork.pk)
    forked = time.perf_counter() - started
    assert fork.status == "completed", fork.error
    with lock:
        requests = asked[before:]
    assert len(fake.seen) - seen_before == len(requests)

    fork_seq = {cp.stage: cp.seq for cp in Checkpoint.objects.filter(run=fork) if cp.stage}
    own = list(ModelCall.objects.filter(run=fork).order_by("id"))
    stages_asked = []
    for role, messages in requests:
        match = [c for c in own if c.role == role and _same(c.messages, messages)]
        assert len(match) == 1, (role, len(match))  # every request is one of the fork's calls
        stages_asked.append(fork_seq[match[0].stage])
    assert sorted(stages_asked) == [7, 8, 9, 10], stages_asked
    inherited = lineage.inherited_calls(fork)
    assert sorted(seq_of[c.stage] for c in inherited) == [1, 2, 3, 4, 5, 6]
    assert all(c.run_id == run.pk for c in inherited)
    return {"parent_requests": 10, "fork_requests": len(requests),
            "fork_stages": sorted(stages_asked), "before_7": sum(s < 7 for s in stages_asked),
            "inherited": len(inherited), "whole_s": whole, "fork_s": forked}


def _same(stored: list, sent: list) -> bool:
    """A journal row's messages are what was sent (the gateway may add the schema's message
    after them for a model without structured output)."""
    pairs = [(m.get("role"), m.get("content")) for m in stored]
    sent_pairs = [(m.get("role"), m.get("content")) for m in sent]
    return sent_pairs[:len(pairs)] == pairs and bool(pairs)


# --- 2 and 3. making forks and comparing runs --------------------------------------------------
def build(owner, steps: int):
    """A completed Plan-and-Execute run of ``steps`` steps (``steps`` + 2 calls) made by the
    engine on the offline model."""
    from agents_app import engine
    from agents_app.forking import checkpoints
    from agents_app.models import Checkpoint, ModelCall, Run

    run = engine.create_run(owner, "plan_execute", task(steps),
                            options={"auto_approve": True, "max_steps": min(steps, 30)},
                            models=dict.fromkeys(ROLES, "offline/default"),
                            max_cost_usd=Decimal("1000"), max_tokens=50_000_000, enqueue=False)
    if steps > 30:  # past the form's limit, for the measurement: in the run's state
        state = {**run.state, "options": {**run.state["options"], "max_steps": steps,
                                          "max_run_seconds": 3600}}
        Run.objects.filter(pk=run.pk).update(state=state, options=state["options"])
        Checkpoint.objects.filter(run=run, seq=0).update(state=checkpoints.pack(state))
    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    assert ModelCall.objects.filter(run=run).count() == steps + 2
    return run


def last_stage(run) -> int:
    from agents_app.models import Checkpoint

    return Checkpoint.objects.filter(run=run).exclude(stage="").order_by("-seq").first().seq


def parts_two_and_three(owner, args) -> tuple[dict, dict]:
    from agents_app.forking.cli import drive
    from agents_app.forking.create import create_fork
    from agents_app.forking.diff import compare, side_by_side
    from agents_app.forking.stages import stages
    from agents_app.models import Checkpoint, ModelCall, Run

    small = build(owner, 8)
    started = time.perf_counter()
    big = build(owner, args.big - 2)
    big_build = time.perf_counter() - started
    sizes = {}
    for name, run in (("small", small), ("big", big)):
        seq = last_stage(run)
        sizes[name] = {"calls": ModelCall.objects.filter(run=run).count(),
                       "checkpoints": Checkpoint.objects.filter(run=run).count(), "seq": seq,
                       "state_kb": len(Checkpoint.objects.get(run=run, seq=seq).state) / 1024}

    from agents_app.forking.create import COPIED

    times: dict[str, list[float]] = {"small": [], "big": []}
    for i in range(args.forks + 3):  # interleaved, so both see the same machine
        for name, run in (("small", small), ("big", big)):
            started = time.perf_counter()
            create_fork(run, owner, seq=sizes[name]["seq"], enqueue=False)
            elapsed = 1000 * (time.perf_counter() - started)
            if i >= 3:
                times[name].append(elapsed)
            if i == 0:  # the record rows a page lists, copied into the fork
                fork = Run.objects.order_by("-pk").first()
                sizes[name]["copied"] = sum(m.objects.filter(run=fork).count() for m in COPIED)
    made = {"sizes": sizes, "times": times, "big_build_s": big_build}

    # Runs to compare: each run with a fork of it run to its end (the small one from stage 7,
    # the big one from its last stage), and five small runs: the run and forks of it.
    small_fork = drive(create_fork(small, owner, seq=7, enqueue=False).pk)
    big_fork = drive(create_fork(big, owner, seq=sizes["big"]["seq"], enqueue=False).pk)
    five = [small, small_fork] + [
        drive(create_fork(small, owner, seq=s, enqueue=False,
                          models={"executor": "offline/default"}).pk) for s in (3, 5, 9)]
    assert all(r.status == "completed" for r in [small_fork, big_fork, *five])

    def timed(fn) -> list[float]:
        out = []
        for i in range(args.repeat + 2):
            started = time.perf_counter()
            fn()
            if i >= 2:
                out.append(1000 * (time.perf_counter() - started))
        return out

    def pair(a: Run, b: Run):
        return lambda: compare(stages(a), stages(b))

    diff = compare(stages(small), stages(small_fork))
    columns, _ = side_by_side([stages(r) for r in five])
    compared = {
        "two small": timed(pair(small, small_fork)),
        "two big": timed(pair(big, big_fork)),
        "five small": timed(lambda: side_by_side([stages(r) for r in five])),
        "rows": {"two small": len(diff.rows), "two big": len(compare(stages(big),
                                                                    stages(big_fork)).rows),
                 "five small": len(columns)},
        "stages_only": {"small": timed(lambda: stages(small)), "big": timed(lambda: stages(big))},
    }
    return made, compared


# --- the figures --------------------------------------------------------------------------------
def report(args, note: str, saved: dict, made: dict, compared: dict) -> None:
    def p(values, q):
        return pct(values, q)

    print(f"# Forks and comparisons — {machine()}; {note}")
    print()
    print(f"## 1. A fork of a 10-call run from stage 7 (fake provider over HTTP, "
          f"{args.latency * 1000:.0f} ms a request)")
    print("| | provider requests | stages asked for | wall time |")
    print("|---|---:|---|---:|")
    print(f"| the run | {saved['parent_requests']} | 1–10 | {saved['whole_s']:.2f} s |")
    print(f"| its fork from stage 7 | {saved['fork_requests']} | "
          f"{', '.join(map(str, saved['fork_stages']))} | {saved['fork_s']:.2f} s "
          f"({saved['fork_s'] / saved['whole_s']:.2f}×) |")
    print(f"requests for stages 1–6 during the fork: {saved['before_7']} (their "
          f"{saved['inherited']} calls are read from the run's journal) → "
          f"{'met' if saved['before_7'] == 0 else 'MISSED'}")
    print()
    s, b = made["sizes"]["small"], made["sizes"]["big"]
    ts, tb = made["times"]["small"], made["times"]["big"]
    print(f"## 2. Making a fork from the last stage, {args.forks} forks of each run "
          f"(interleaved; the {b['calls']}-call run took {made['big_build_s']:.1f} s to make)")
    print("| run | model calls | checkpoints | its state there (zlib) | rows copied | p50 | "
          "p95 | max |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, size, t in (("small", s, ts), ("large", b, tb)):
        print(f"| {name} | {size['calls']} | {size['checkpoints']} | "
              f"{size['state_kb']:.1f} kB | {size['copied']} | "
              f"{p(t, 50):.1f} ms | {p(t, 95):.1f} ms | {max(t):.1f} ms |")
    ratio50, ratio95 = p(tb, 50) / p(ts, 50), p(tb, 95) / p(ts, 95)
    print(f"large / small: p50 {ratio50:.2f}×, p95 {ratio95:.2f}×")
    worst = max(p(ts, 95), p(tb, 95))
    print(f"target: p95 under {TARGET_P95_MS:.0f} ms → "
          f"{'met' if worst < TARGET_P95_MS else 'MISSED'} ({worst:.1f} ms)")
    print()
    print(f"## 3. Comparing (median and p95 of {args.repeat})")
    print("| what | rows | p50 | p95 |")
    print("|---|---:|---:|---:|")
    rows = compared["rows"]
    for key, what in (("two small", f"stages() of two {s['calls']}-call runs + compare()"),
                      ("two big", f"stages() of two {b['calls']}-call runs + compare()"),
                      ("five small", f"stages() of five {s['calls']}-call runs + "
                                     "side_by_side()")):
        t = compared[key]
        print(f"| {what} | {rows[key]} | {statistics.median(t):.1f} ms | {p(t, 95):.1f} ms |")
    for key, size in (("small", s), ("big", b)):
        t = compared["stages_only"][key]
        print(f"| stages() alone, one {size['calls']}-call run | — | "
              f"{statistics.median(t):.1f} ms | {p(t, 95):.1f} ms |")


if __name__ == "__main__":
    main()
