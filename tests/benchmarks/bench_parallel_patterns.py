"""Side-by-side stages of the newer patterns, at the pattern level: wall time of one stage
with N calls of fixed latency L (a function fake that sleeps, or a tool that sleeps), against
L (parallel) and N·L (sequential). No database or LiteLLM: the floor the design allows; the
engine's own cost per call is measured by bench_review.py and bench_change.py.

    .venv/bin/python tests/benchmarks/bench_parallel_patterns.py [--latency 0.5] [--n 4]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--n", type=int, default=4)
    args = parser.parse_args()
    lat, n = args.latency, args.n

    from agents_app.patterns.debate import Debate
    from agents_app.patterns.rewoo import pattern as rewoo
    from agents_app.patterns.team_lead import TeamLead
    from agents_app.patterns.testing import FunctionModel
    from agents_app.patterns.tools import toolbox

    sleeper = toolbox.AgentTool("slow", "sleeps", toolbox.CalcArgs,
                                lambda a: time.sleep(lat) or "ok")
    real = toolbox.registry
    rewoo.registry = lambda roots: {**real(roots), "slow": sleeper}
    model = FunctionModel(lambda messages, info: time.sleep(lat) or "text")

    def timed(fn) -> float:
        started = time.monotonic()
        fn()
        return time.monotonic() - started

    w = rewoo.ReWOO()
    state = {**w.initial_state("Q", {"max_parallel_work": n}), "sketches": [
        {"id": f"S{i}", "query": "q", "tool": "slow", "arguments": {"expression": "1"}}
        for i in range(n)]}
    rows = [("ReWOO work (tool calls)", timed(lambda: w.run_stage("work", state, None)), lat)]
    d = Debate()
    state = d.initial_state("Q", {"positions": [{"name": f"P{i}", "stance": "s"}
                                                for i in range(n)]})
    rows.append(("Debate round (positions)", timed(lambda: d.run_stage("round:1", state, model)),
                 lat))
    t = TeamLead()
    subtasks = [{"id": f"T{i}", "assignee": "researcher", "task": f"t{i}", "attempt": 1,
                 "status": "pending", "result": "", "error": "", "batch": 1} for i in range(n)]
    for strategy, floor in (("parallel", lat), ("sequential", n * lat)):
        state = {**t.initial_state("Q", {"strategy": strategy}), "subtasks": subtasks}
        rows.append((f"Team lead work, {strategy} (subtasks)",
                     timed(lambda s=state: t.run_stage("work:1", s, model)), floor))
    print(f"# Side-by-side stages — {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}; N = {n}, L = {lat:g} s")
    print("\n| stage | wall | / L | / N·L |\n|---|---:|---:|---:|")
    for name, wall, _ in rows:
        print(f"| {name} | {wall:.2f} s | {wall / lat:.2f}× | {wall / (n * lat):.2f}× |")


if __name__ == "__main__":
    main()
