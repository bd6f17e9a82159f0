"""CPU per model call through LiteLLM: bare ``litellm.completion``, the kwargs Quorum's gateway
built before issue 17's LiteLLM diet, each candidate change on top of them, and the gateway
itself, against the same fake OpenAI-compatible provider over HTTP (tests/fakeprovider.py in
a process of its own, so its CPU is nobody's).

Each variant makes N calls per round (after a warm-up); CPU is ``time.process_time`` over
the round (LiteLLM's logging threads count: a short sleep ends each round). Rounds are
interleaved, the order rotating; the output gives ms per call (median of the rounds, and
range) and the median of each round's own ratio to "before", with the load average. No
Django here (DEBUG=false is set for anything that reads it).

    .venv/bin/python tests/benchmarks/bench_litellm_call.py [--calls 5] [--rounds 200]
        [--model fake|priced] [--schema] [--variants bare,before,gateway]

``--instructions`` counts instead of timing: each variant in a process of its own under
Valgrind's callgrind, instrumentation switched on after the warm-up for the N calls only
(``callgrind_control``), instructions per call; a count does not move with the machine's
load (about 1 min per variant).

``--engine`` measures a whole run instead: CPU per four-call Plan-and-Execute run in process
(``engine.run_inline`` on SQLite with Redis, DEBUG=false, as bench_vs_langgraph's in-process
part), in a fresh process per checkout and round (``--tree``, repeatable; default this one),
checkouts interleaved: the way to compare a change with the tree before it (with
``--instructions``: instructions per run, the runs alone under callgrind).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# An --engine child runs in the checkout it measures: that tree first on the path.
if len(sys.argv) > 2 and sys.argv[1] == "--engine-child":
    sys.path.insert(0, sys.argv[2])
else:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import machine, positive  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["DEBUG"] = "false"
KEY = "sk-bench-fake"  # the fake provider's key: it checks none
MODELS = {"fake": "openai/fake-planner",  # not in LiteLLM's price map; no native JSON schema
          "priced": "openai/gpt-4o-mini"}  # priced; native JSON schema (response_format)
TASK = "Collect the logs of service 7, then write a report on the errors."
SETTLE = 0.01  # s at the end of a round for LiteLLM's logging threads (sleeping costs no CPU)

Call = Callable[[], Any]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=positive(int, 1, 100_000), default=5,
                        help="calls per variant per round (few: the load moves slower than a "
                             "round, so each round's ratios compare like with like)")
    parser.add_argument("--rounds", type=positive(int, 1, 10_000), default=200)
    parser.add_argument("--warmup", type=positive(int, 1, 10_000), default=30,
                        help="calls per variant before the first round")
    parser.add_argument("--latency", type=positive(float, 0.0, 5.0), default=0.0,
                        help="the fake provider's latency per call, s")
    parser.add_argument("--model", choices=sorted(MODELS), default="fake",
                        help="fake: a model LiteLLM cannot price (the benchmarks' fake-<role>); "
                             "priced: gpt-4o-mini sent to the fake")
    parser.add_argument("--schema", action="store_true",
                        help="structured calls (PlanDraft) as the gateway makes them")
    parser.add_argument("--instructions", action="store_true",
                        help="instructions per call under callgrind, instead of CPU time")
    parser.add_argument("--engine", action="store_true",
                        help="CPU per 4-call Plan-and-Execute run in process, per checkout")
    parser.add_argument("--tree", action="append", default=[],
                        help="a checkout to measure with --engine (repeatable; default: this one)")
    parser.add_argument("--runs", type=positive(int, 1, 1000), default=8,
                        help="--engine: measured runs per process (after 3 warm-up runs)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, from: {', '.join(VARIANTS)}")
    parser.error = lambda message: parser.exit(2, f"bench_litellm_call: {message}\n")
    args = parser.parse_args(argv)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown or not args.variants:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    return args


class Bench:
    """What every variant shares: the fake's URL, the model, the messages."""

    def __init__(self, url: str, model: str, schema: bool) -> None:
        from agents_app.llm import gateway
        from agents_app.patterns.plan_execute.pattern import PlanDraft

        self.url, self.model = url, model
        self.schema = PlanDraft if schema else None
        self.messages = [{"role": "system", "content": "You are the planner."},
                         {"role": "user", "content": TASK}]
        self.response_format = None
        if schema and gateway._supports_schema(model):
            self.response_format = {"type": "json_schema", "json_schema": {
                "name": "PlanDraft", "schema": gateway.json_schema(PlanDraft), "strict": False}}
        elif schema:
            self.messages = [*self.messages, {"role": "user",
                                              "content": gateway.schema_instructions(PlanDraft)}]

    def before_kwargs(self) -> dict[str, Any]:
        """``gateway._invoke``'s kwargs before the diet: the key from OPENAI_API_KEY."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": self.messages,
                                  "timeout": 120.0, "num_retries": 0, "api_base": self.url}
        if self.response_format is not None:
            kwargs["response_format"] = self.response_format
        return kwargs


def _bare(b: Bench) -> Call:
    import litellm

    return lambda: litellm.completion(model=b.model, api_base=b.url, api_key=KEY,
                                      messages=b.messages, timeout=60, num_retries=0)


def _before(b: Bench) -> Call:
    import litellm

    kwargs = b.before_kwargs()
    return lambda: litellm.completion(**kwargs)


def _with_client(b: Bench) -> Call:
    import litellm
    import openai

    client = openai.OpenAI(api_key=KEY, base_url=b.url, max_retries=0)
    kwargs = {**b.before_kwargs(), "client": client}
    return lambda: litellm.completion(**kwargs)


def _with_key(b: Bench) -> Call:
    import litellm

    kwargs = {**b.before_kwargs(), "api_key": KEY}
    return lambda: litellm.completion(**kwargs)


def _custom_price(b: Bench) -> Call:
    """Prices per call: LiteLLM registers the model with them (on a name of its own, then)."""
    import litellm

    kwargs = {**b.before_kwargs(), "input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
              "model": b.model + "-custom"}
    return lambda: litellm.completion(**kwargs)


def _zero_priced(b: Bench) -> Call:
    """A model registered with LiteLLM at a price of 0 (its own name: registering is global)."""
    import litellm

    model = b.model + "-zero"
    if model not in litellm.model_cost:
        litellm.register_model({model: {"litellm_provider": model.split("/", 1)[0],
                                        "mode": "chat", "input_cost_per_token": 0.0,
                                        "output_cost_per_token": 0.0}})
    kwargs = {**b.before_kwargs(), "model": model}
    return lambda: litellm.completion(**kwargs)


def _gateway(b: Bench) -> Call:
    """The gateway, on a model name of its own when LiteLLM cannot price it: the gateway
    registers such a model with LiteLLM (pricing._register_unpriced), which would speed up
    the other variants' calls of the same name in this process."""
    from agents_app.llm.gateway import Gateway, GatewayConfig

    model = b.model if b.model == MODELS["priced"] else b.model + "-gw"
    gw = Gateway(GatewayConfig(routes={"planner": model}, api_base=b.url, timeout=120.0,
                               max_retries=0))
    if b.schema is None:
        return lambda: gw.complete("planner", b.messages)
    return lambda: gw.complete("planner", b.messages[:2], schema=b.schema)


@contextmanager
def _no_setting() -> Iterator[None]:
    yield


def _setting(name: str, value: Any) -> Callable[[], Any]:
    """A global LiteLLM setting, on only while its variant runs."""
    @contextmanager
    def scope() -> Iterator[None]:
        import litellm

        old = getattr(litellm, name)
        setattr(litellm, name, value)
        try:
            yield
        finally:
            setattr(litellm, name, old)
    return scope


# name → (make the call, the scope it runs in, what it is)
VARIANTS: dict[str, tuple[Callable[[Bench], Call], Callable[[], Any], str]] = {
    "bare": (_bare, _no_setting, "litellm.completion with its defaults (as bench_vs_langgraph)"),
    "before": (_before, _no_setting, "the gateway's kwargs before the diet (the ratio's base)"),
    "client": (_with_client, _no_setting, "before + client=openai.OpenAI(...) made once"),
    "key": (_with_key, _no_setting, "before + api_key passed (not read from the environment)"),
    "nomsglog": (_before, _setting("turn_off_message_logging", True),
                 "before + litellm.turn_off_message_logging = True"),
    "custom": (_custom_price, _no_setting, "before + input/output_cost_per_token=0 per call"),
    "zero": (_zero_priced, _no_setting, "before, the model registered with LiteLLM at a price of 0"),
    "gateway": (_gateway, _no_setting, "Gateway.complete as it is now (NullJournal; redaction, "
                                       "pricing, the call log)"),
}


def measure(args: argparse.Namespace, url: str) -> dict[str, list[float]]:
    bench = Bench(url, MODELS[args.model], args.schema)
    calls = {name: VARIANTS[name][0](bench) for name in args.variants}
    for name, call in calls.items():
        with VARIANTS[name][1]():
            for _ in range(args.warmup):
                call()
    time.sleep(SETTLE)
    out: dict[str, list[float]] = {name: [] for name in args.variants}
    names = list(args.variants)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            call = calls[name]
            with VARIANTS[name][1]():
                cpu = time.process_time()
                for _ in range(args.calls):
                    call()
                time.sleep(SETTLE)
                out[name].append(1000 * (time.process_time() - cpu) / args.calls)
    return out


def callgrind_child(url: str, variant: str, model: str, calls: int, schema: bool) -> None:
    """Under callgrind: warm up, then count the instructions of ``calls`` calls only."""
    bench = Bench(url, MODELS[model], schema)
    call = VARIANTS[variant][0](bench)
    pid = str(os.getpid())
    with VARIANTS[variant][1]():
        for _ in range(10):
            call()
        time.sleep(SETTLE)
        subprocess.run(["callgrind_control", "--instr=on", pid], capture_output=True, check=True)
        for _ in range(calls):
            call()
        time.sleep(10 * SETTLE)  # LiteLLM's logging threads finish inside the count
        subprocess.run(["callgrind_control", "--instr=off", pid], capture_output=True, check=True)


def instruction_counts(args: argparse.Namespace, url: str) -> dict[str, list[float]]:
    """Millions of instructions per call, per variant (a list of one, as ``measure``'s rows)."""
    out: dict[str, list[float]] = {}
    for variant in args.variants:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             "--callgrind-out-file=/dev/null", sys.executable, str(Path(__file__).resolve()),
             "--callgrind-child", url, variant, args.model, str(args.calls),
             *(["schema"] if args.schema else [])],
            capture_output=True, text=True, timeout=1800, check=False)
        found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
        if done.returncode != 0 or not found:
            raise RuntimeError(f"callgrind of {variant} failed:\n{done.stderr[-3000:]}")
        out[variant] = [int(found.group(1)) / args.calls / 1e6]
    return out


def report(args: argparse.Namespace, rows: dict[str, list[float]], load: tuple) -> None:
    from importlib.metadata import version

    how = (f"{args.calls} calls per variant under callgrind" if args.instructions else
           f"{args.rounds} rounds × {args.calls} calls, interleaved")
    structured = ", structured (PlanDraft)" if args.schema else ""
    print(f"# {machine()}, LiteLLM {version('litellm')}, openai {version('openai')}; "
          f"model {MODELS[args.model]} ({args.model}){structured}; fake latency {args.latency} s; "
          f"{how}; no Django (DEBUG=false)")
    print(f"# load average before {load[0]:.2f}, after {load[1]:.2f}")
    if args.instructions:
        print("# figures: millions of instructions per call (callgrind), not ms")
    # The ratio is the median over rounds of each round's own ratio (the same moment's load).
    base = rows.get("before")
    unit = "M instr" if args.instructions else "ms/call"
    print(f"{'variant':<10} {unit:>8} {'min':>6} {'max':>6} {'÷ before':>9}  what")
    for name, values in rows.items():
        ratio = (f"{statistics.median(v / b for v, b in zip(values, base)):.3f}"
                 if base else "—")
        print(f"{name:<10} {statistics.median(values):8.3f} {min(values):6.2f} {max(values):6.2f} "
              f"{ratio:>9}  {VARIANTS[name][2]}")


def engine_child(tree: str, url: str, runs: int) -> None:
    """In a fresh process of the checkout ``tree``: CPU per run (ms) of ``runs`` in-process
    Plan-and-Execute runs after 3 warm-up runs, as JSON on the last line."""
    from tests.benchmarks.common import make_user, setup_django
    from tests.fakeprovider import fake_models
    from tests.stack import free_port

    with tempfile.TemporaryDirectory(prefix="quorum-litellm-call-") as tmp:
        var = Path(tmp)
        setup_django(var, free_port(), QUORUM_API_BASE=url, OPENAI_API_KEY=KEY,
                     QUORUM_LOG_LEVEL="ERROR", SECRET_KEY="bench-not-secret")
        from django.conf import settings

        from agents_app import engine
        from tests.stack import start_redis

        assert not settings.DEBUG, "the benchmark runs with DEBUG=false"
        redis = start_redis(var)
        try:
            owner = make_user()
            models = fake_models("planner", "executor", "synthesizer")
            cpu_ms = []
            counting = os.environ.get("BENCH_CALLGRIND") == "1"  # --instructions: under callgrind
            for i in range(3 + runs):
                pk = engine.create_run(owner, "plan_execute", TASK, models=models,
                                       options={"auto_approve": True}, enqueue=False).pk
                if counting and i >= 3:
                    _instrument("on")
                cpu = time.process_time()
                run = engine.run_inline(pk)
                spent = 1000 * (time.process_time() - cpu)
                if counting and i >= 3:
                    _instrument("off")
                if run.status != "completed":
                    raise RuntimeError(f"run {pk}: {run.status} {run.error}")
                if i >= 3:
                    cpu_ms.append(spent)
        finally:
            redis.stop()
    print(json.dumps({"tree": tree, "cpu_ms": cpu_ms}))


def _instrument(state: str) -> None:
    subprocess.run(["callgrind_control", f"--instr={state}", str(os.getpid())],
                   capture_output=True, check=True)


def engine_rounds(args: argparse.Namespace, url: str) -> dict[str, list[float]]:
    trees = [str(Path(t).resolve()) for t in args.tree] or [str(Path(__file__).resolve()
                                                                .parents[2])]
    out: dict[str, list[float]] = {tree: [] for tree in trees}
    for r in range(args.rounds):
        for tree in trees[r % len(trees):] + trees[:r % len(trees)]:
            valgrind = (["valgrind", "--tool=callgrind", "--instr-atstart=no",
                         "--callgrind-out-file=/dev/null"] if args.instructions else [])
            done = subprocess.run(
                [*valgrind, sys.executable, str(Path(__file__).resolve()), "--engine-child",
                 tree, url, str(args.runs)], capture_output=True, text=True, cwd=tree,
                timeout=3600, check=False, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "",
                                                "BENCH_CALLGRIND": "1" if valgrind else ""})
            if done.returncode != 0:
                raise RuntimeError(f"--engine in {tree} failed:\n{done.stderr[-3000:]}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
            out[tree].append(int(found.group(1)) / args.runs / 1e6 if valgrind and found else
                             statistics.median(got["cpu_ms"]))
    return out


def engine_report(args: argparse.Namespace, rows: dict[str, list[float]], load: tuple) -> None:
    unit = "M instructions" if args.instructions else "ms"
    print(f"# {machine()}; {'instructions (callgrind)' if args.instructions else 'CPU'} "
          f"per 4-call Plan-and-Execute run in process (engine.run_inline, "
          f"SQLite, Redis, DEBUG=false), fake provider over HTTP at {args.latency} s; "
          f"{args.rounds} rounds × (3 warm-up + {args.runs} runs) per checkout, interleaved; "
          f"a round's figure is its median")
    print(f"# load average before {load[0]:.2f}, after {load[1]:.2f}")
    first = next(iter(rows.values()))
    for tree, values in rows.items():
        ratio = statistics.median(v / b for v, b in zip(values, first))
        print(f"{statistics.median(values):7.1f} {unit} per run (rounds {min(values):.1f}–"
              f"{max(values):.1f}), ÷ first {ratio:.3f}  {tree}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--engine-child"]:
        engine_child(argv[1], argv[2], int(argv[3]))
        return
    if argv[:1] == ["--callgrind-child"]:
        callgrind_child(argv[1], argv[2], argv[3], int(argv[4]), argv[5:] == ["schema"])
        return
    args = parse_args(argv)
    from tests.benchmarks.bench_vs_langgraph import FakeProcess

    os.environ["OPENAI_API_KEY"] = KEY  # what the gateway's calls find in the environment
    fake = FakeProcess(args.latency)
    try:
        load_before = os.getloadavg()[0]
        rows = (engine_rounds(args, fake.url) if args.engine else instruction_counts(
            args, fake.url) if args.instructions else measure(args, fake.url))
        load_after = os.getloadavg()[0]
    finally:
        fake.stop()
    (engine_report if args.engine else report)(args, rows, (load_before, load_after))


if __name__ == "__main__":
    main()
