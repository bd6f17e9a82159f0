"""The experiment charts (issue 34): time to draw each chart as SVG, and its size.

1. **The first chart in a fresh process**: importing matplotlib (and its font list) and
   drawing one scatter, in a new Python process, as a page's first chart after a restart
   pays it; then matplotlib's import alone in another fresh process.
2. **Each chart, warm**: median and p95 of ``--repeat`` draws (after one left out) of
   - cost against score for 3, 9 and 18 cells,
   - the heat map for 20 and 50 tasks × 3, 9 and 18 cells (its squares numbered up to
     30 tasks × 8 cells),
   - latency for 3, 9 and 18 cells of 100 runs (20 tasks × 5 repetitions) and 18 cells of
     250 runs (50 tasks × 5),
   and the SVG's size.
3. **One results page's three charts** for issue 34's 900-run grid (9 cells × 20 tasks × 5).

No Django and no database: the charts are plain Python.

    .venv/bin/python tests/benchmarks/bench_charts.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.common import ROOT, machine, pct, positive  # noqa: E402

PATTERNS = ("plan-execute", "debate", "vote", "react", "rewoo", "team-lead")
MODELS = ("gpt-4o-mini", "claude-haiku-4-5", "gemini-2.5-flash")
REPS = 5

COLD = """
import time
t0 = time.perf_counter()
from agents_app.experiments import charts
svg = charts.cost_vs_score([{"label": "a", "cost": {"mean": 0.01, "low": 0.008, "high": 0.012},
                            "score": {"mean": 0.5, "low": 0.4, "high": 0.6}}])
t1 = time.perf_counter()
svg = charts.cost_vs_score([{"label": "b", "cost": {"mean": 0.01, "low": 0.008, "high": 0.012},
                            "score": {"mean": 0.5, "low": 0.4, "high": 0.6}}])
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""
IMPORT = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"


def cell_names(n: int) -> list[str]:
    return [f"{PATTERNS[i % len(PATTERNS)]} · {MODELS[i % len(MODELS)]} #{i + 1}"
            for i in range(n)]


def task_texts(n: int) -> list[str]:
    return [f"Task {i + 1}: summarise the incident report and list the three causes that "
            f"cost us $5,000 & more" for i in range(n)]


def scatter_input(n: int, rng: random.Random) -> list[dict]:
    cells = []
    for name in cell_names(n):
        cost, score = rng.uniform(0.001, 0.05), rng.uniform(0.3, 0.95)
        cells.append({"label": name,
                      "cost": {"mean": cost, "low": cost * 0.85, "high": cost * 1.2},
                      "score": {"mean": score, "low": score - 0.08, "high": min(1, score + 0.07)}})
    return cells


def heatmap_input(tasks: int, cells: int, rng: random.Random) -> tuple:
    rates = [[None if rng.random() < 0.05 else rng.randint(0, REPS) / REPS for _ in range(cells)]
             for _ in range(tasks)]
    return task_texts(tasks), cell_names(cells), rates


def latency_input(cells: int, runs: int, rng: random.Random) -> list[tuple[str, list[float]]]:
    return [(name, [rng.lognormvariate(1.5 + 0.1 * j, 0.45) for _ in range(runs)])
            for j, name in enumerate(cell_names(cells))]


def timed(draw: Callable[[], str], repeat: int) -> tuple[float, float, float, int]:
    """(median ms, p95 ms, median CPU ms, SVG bytes) of ``repeat`` draws after one left out.
    CPU time as well as wall time: on a shared machine the wall time also counts the waits for
    a core."""
    svg = draw()
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        draw()
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return statistics.median(times), pct(times, 95), statistics.median(cpu), len(svg.encode())


def fresh(code: str) -> list[float]:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=True)
    return [float(x) for x in out.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=positive(int, 3, 1000), default=10,
                        help="draws timed of each chart (after one left out)")
    parser.add_argument("--fresh", type=positive(int, 1, 20), default=3,
                        help="fresh processes for the first chart")
    parser.error = lambda message: parser.exit(2, f"bench_charts: {message}\n")
    args = parser.parse_args()

    print(f"bench_charts: {machine()}, matplotlib {version('matplotlib')}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\n1. The first chart in a fresh process (median of {args.fresh})")
    firsts = [fresh(COLD) for _ in range(args.fresh)]
    imports = [fresh(IMPORT.format(module="matplotlib.figure"))[0] for _ in range(args.fresh)]
    module = [fresh(IMPORT.format(module="agents_app.experiments.charts"))[0]
              for _ in range(args.fresh)]
    print(f"   import of charts.py alone:              {statistics.median(module) * 1000:7.1f} ms")
    print(f"   import of matplotlib.figure alone:      {statistics.median(imports) * 1000:7.1f} ms")
    print(f"   import + first chart (3-cell scatter):  "
          f"{statistics.median(f[0] for f in firsts) * 1000:7.1f} ms")
    print(f"   the second chart in that process:       "
          f"{statistics.median(f[1] for f in firsts) * 1000:7.1f} ms")

    from agents_app.experiments import charts

    rng = random.Random(34)
    rows: list[tuple[str, str, Callable[[], str]]] = []
    for n in (3, 9, 18):
        data = scatter_input(n, rng)
        rows.append(("cost_vs_score", f"{n} cells", lambda d=data: charts.cost_vs_score(d)))
    for tasks in (20, 50):
        for n in (3, 9, 18):
            data = heatmap_input(tasks, n, rng)
            rows.append(("heatmap", f"{tasks} tasks × {n} cells",
                         lambda d=data: charts.heatmap(*d)))
    for n, runs in ((3, 100), (9, 100), (18, 100), (18, 250)):
        data = latency_input(n, runs, rng)
        rows.append(("latency", f"{n} cells × {runs} runs", lambda d=data: charts.latency(d)))

    print(f"\n2. Each chart, warm (median and p95 of {args.repeat} draws)")
    print(f"   {'chart':<14} {'input':<22} {'p50 ms':>8} {'p95 ms':>8} {'CPU ms':>8} {'SVG kB':>8}")
    for chart, what, draw in rows:
        p50, p95, cpu, size = timed(draw, args.repeat)
        print(f"   {chart:<14} {what:<22} {p50:8.1f} {p95:8.1f} {cpu:8.1f} {size / 1000:8.1f}")

    scatter = scatter_input(9, rng)
    heat = heatmap_input(20, 9, rng)
    runs = latency_input(9, 20 * REPS, rng)
    p50, p95, cpu, size = timed(lambda: charts.cost_vs_score(scatter) + charts.heatmap(*heat)
                                + charts.latency(runs), args.repeat)
    print("\n3. One results page's three charts, 9 cells × 20 tasks × 5 repetitions (900 runs)")
    print(f"   p50 {p50:.1f} ms, p95 {p95:.1f} ms, CPU {cpu:.1f} ms, {size / 1000:.1f} kB of SVG")
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
