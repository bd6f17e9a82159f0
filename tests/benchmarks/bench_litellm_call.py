"""CPU per model call through LiteLLM: bare ``litellm.completion``, the kwargs Quorum's gateway
built before issue 17's LiteLLM diet, each candidate change on top of them, and the gateway
itself, against the same fake OpenAI-compatible provider over HTTP (tests/fakeprovider.py in
a process of its own, so its CPU is nobody's).

Each variant makes N calls per round (after a warm-up); CPU is ``time.process_time`` over
the round, so LiteLLM's logging threads count, and every round ends with a short sleep for
them to finish their work inside it. Rounds are interleaved (the order rotates each round),
and the output gives ms per call (median of the rounds, with the range) and the ratio to the
"before" variant, with the load average before and after. No Django here (DEBUG=false is
set for anything that reads it).

    .venv/bin/python tests/benchmarks/bench_litellm_call.py [--calls 60] [--rounds 15]
        [--model fake|priced] [--schema] [--variants bare,before,gateway]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import machine, positive  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["DEBUG"] = "false"
KEY = "sk-bench-fake"  # the fake provider's key: it checks none
MODELS = {"fake": "openai/fake-planner",  # not in LiteLLM's price map; no native JSON schema
          "priced": "openai/gpt-4o-mini"}  # priced; native JSON schema (response_format)
TASK = "Collect the logs of service 7, then write a report on the errors."
SETTLE = 0.05  # s at the end of a round for LiteLLM's logging threads (sleeping costs no CPU)

Call = Callable[[], Any]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=positive(int, 1, 100_000), default=60,
                        help="calls per variant per round")
    parser.add_argument("--rounds", type=positive(int, 1, 1000), default=15)
    parser.add_argument("--warmup", type=positive(int, 1, 10_000), default=30,
                        help="calls per variant before the first round")
    parser.add_argument("--latency", type=positive(float, 0.0, 5.0), default=0.0,
                        help="the fake provider's latency per call, s")
    parser.add_argument("--model", choices=sorted(MODELS), default="fake",
                        help="fake: a model LiteLLM cannot price (the benchmarks' fake-<role>); "
                             "priced: gpt-4o-mini sent to the fake")
    parser.add_argument("--schema", action="store_true",
                        help="structured calls (PlanDraft) as the gateway makes them")
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
        from agents_app.patterns.plan_execute.pattern import PlanDraft

        from agents_app.llm import gateway

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
    from agents_app.llm.gateway import Gateway, GatewayConfig

    gw = Gateway(GatewayConfig(routes={"planner": b.model}, api_base=b.url, timeout=120.0,
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


def report(args: argparse.Namespace, rows: dict[str, list[float]], load: tuple) -> None:
    import litellm  # noqa: F401 - its version, below
    from importlib.metadata import version

    print(f"# {machine()}, LiteLLM {version('litellm')}, openai {version('openai')}; "
          f"model {MODELS[args.model]} ({args.model}){', structured (PlanDraft)' if args.schema else ''}; "
          f"fake latency {args.latency} s; {args.rounds} rounds × {args.calls} calls, interleaved; "
          f"no Django (DEBUG=false)")
    print(f"# load average before {load[0]:.2f}, after {load[1]:.2f}")
    # The ratio is the median over rounds of each round's own ratio (the same moment's load).
    base = rows.get("before")
    print(f"{'variant':<10} {'ms/call':>8} {'min':>6} {'max':>6} {'÷ before':>9}  what")
    for name, values in rows.items():
        ratio = (f"{statistics.median(v / b for v, b in zip(values, base)):.3f}"
                 if base else "—")
        print(f"{name:<10} {statistics.median(values):8.3f} {min(values):6.2f} {max(values):6.2f} "
              f"{ratio:>9}  {VARIANTS[name][2]}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from tests.benchmarks.bench_vs_langgraph import FakeProcess

    os.environ["OPENAI_API_KEY"] = KEY  # what the gateway's calls find in the environment
    fake = FakeProcess(args.latency)
    try:
        load_before = os.getloadavg()[0]
        rows = measure(args, fake.url)
        load_after = os.getloadavg()[0]
    finally:
        fake.stop()
    report(args, rows, (load_before, load_after))


if __name__ == "__main__":
    main()
