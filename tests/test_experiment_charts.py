"""The experiment charts (agents_app/experiments/charts.py): each is a well-formed SVG with a
title and a description, the same bytes for the same input (in another process too), a
missing value never drawn as a zero, untrusted labels escaped and never read as mathtext,
nothing to draw said as "No data yet", and the largest grids drawn."""

from __future__ import annotations

import subprocess
import sys
import threading
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agents_app.experiments import charts

ROOT = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert(1)</script> & co"


def cell(name: str, cost: float | None, score: float | None, *, bars: bool = True) -> dict:
    def figure(mean: float | None, width: float) -> dict:
        if mean is None:
            return {"mean": None, "low": None, "high": None}
        return {"mean": mean, "low": mean - width if bars else None,
                "high": mean + width if bars else None}
    return {"label": name, "cost": figure(cost, 0.0004), "score": figure(score, 0.08)}


def scatter_cells(n: int) -> list[dict]:
    return [cell(f"cell {i} · plan-execute · model {i}", 0.001 * (i + 1), 0.3 + 0.03 * i)
            for i in range(n)]


def grid(tasks: int, cells: int) -> tuple[list[str], list[str], list[list[float | None]]]:
    rates = [[None if (i + j) % 7 == 0 else ((i * 3 + j) % 6) / 5 for j in range(cells)]
             for i in range(tasks)]
    return ([f"task {i}" for i in range(tasks)], [f"cell {j}" for j in range(cells)], rates)


def latencies(cells: int, runs: int) -> list[tuple[str, list[float]]]:
    return [(f"cell {j}", [1.0 + ((k * 37 + j) % 50) / 10 for k in range(runs)])
            for j in range(cells)]


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def texts(svg: str) -> list[str]:
    """Every drawn text (``<text>``, matplotlib's svg.fonttype "none"), unescaped."""
    return ["".join(t.itertext()) for t in parse(svg).iter(f"{SVG}text")]


def drawn(svg: str) -> str:
    return "\n".join(texts(svg))


ALL = {
    "cost_vs_score": lambda: charts.cost_vs_score(scatter_cells(4)),
    "heatmap": lambda: charts.heatmap(*grid(6, 3)),
    "latency": lambda: charts.latency(latencies(3, 12)),
}


@pytest.mark.parametrize("name", ALL)
def test_each_chart_is_a_well_formed_svg_with_a_title_a_description_and_a_view_box(name):
    svg = ALL[name]()
    root = parse(svg)
    width, height = (float(root.get(a).removesuffix("pt")) for a in ("width", "height"))
    assert root.get("viewBox") == f"0 0 {root.get('width')[:-2]} {root.get('height')[:-2]}"
    assert 200 < width < 1500 and 100 < height < 1500
    children = [child.tag for child in root]
    assert children[:2] == [f"{SVG}title", f"{SVG}desc"]
    assert root.find(f"{SVG}title").text and root.find(f"{SVG}desc").text
    assert "<dc:date>" not in svg  # no date: the same input, the same bytes


@pytest.mark.parametrize("name", ALL)
def test_the_same_input_gives_the_same_bytes(name):
    assert ALL[name]() == ALL[name]()


def test_the_same_bytes_in_another_process_and_matplotlib_is_imported_only_to_draw():
    """The SVG's ids are salted with a constant (not a random one per process), and importing
    the module does not import matplotlib (app start-up does not pay for it)."""
    probe = (
        "import sys\n"
        "from agents_app.experiments import charts\n"
        "assert 'matplotlib' not in sys.modules, 'imported with the module'\n"
        "from tests.test_experiment_charts import ALL\n"
        "sys.stdout.write('\\x00'.join(ALL[n]() for n in sorted(ALL)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.split("\x00") == [ALL[n]() for n in sorted(ALL)]


def test_charts_drawn_in_threads_at_once_are_the_ones_drawn_one_by_one():
    expected = {name: make() for name, make in ALL.items()}
    results: list[tuple[str, str]] = []
    errors: list[BaseException] = []

    def draw(name: str) -> None:
        try:
            for _ in range(2):
                results.append((name, ALL[name]()))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=draw, args=(name,)) for name in ALL for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 12
    assert all(svg == expected[name] for name, svg in results)


def test_usual_charts_draw_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for make in ALL.values():
            make()
        charts.cost_vs_score([cell("offline", 0.0, 0.5), cell("offline too", 0.0, 0.7)])
        charts.latency([("same", [2.0, 2.0, 2.0])])


# -- missing values -------------------------------------------------------------------------

def test_a_cell_without_data_is_left_out_of_the_scatter_and_named_in_a_note():
    svg = charts.cost_vs_score([cell("has data", 0.002, 0.6), cell("never ran", None, None),
                                cell("no score", 0.001, None)])
    shown = drawn(svg)
    assert "No data for 2: never ran, no score." in shown
    assert "has data" in shown
    assert parse(svg).find(f"{SVG}desc").text.startswith("1 cell by")  # one point drawn


def test_intervals_may_be_missing_and_need_not_hold_their_mean():
    """None low/high: a point without a bar; an interval beside its mean (rounding) is drawn
    where it is."""
    no_bars = charts.cost_vs_score([cell("one run", 0.002, 0.6, bars=False)])
    with_bars = charts.cost_vs_score([cell("one run", 0.002, 0.6)])
    assert no_bars != with_bars
    odd = {"label": "odd", "cost": {"mean": 0.002, "low": 0.0025, "high": 0.003},
           "score": {"mean": 0.5, "low": 0.1, "high": 0.4}}
    parse(charts.cost_vs_score([odd]))


def test_nan_infinite_and_non_numbers_count_as_missing():
    bad = [{"label": "nan", "cost": {"mean": float("nan")}, "score": {"mean": 0.5}},
           {"label": "inf", "cost": {"mean": 0.1}, "score": {"mean": float("inf")}},
           {"label": "text", "cost": {"mean": "cheap"}, "score": {"mean": 0.5}},
           {"label": "no dicts", "cost": None}]
    svg = charts.cost_vs_score(bad)
    assert "No data yet" in drawn(svg)
    assert "No data for 4: nan, inf, text, no dicts." in drawn(svg)
    rates = [[float("nan"), 0.5]]
    assert drawn(charts.heatmap(["t"], ["a", "b"], rates)).count("%") == 1


def test_a_task_without_a_run_is_hatched_not_a_zero():
    svg = charts.heatmap(["task"], ["ran, all failed", "never ran"], [[0.0, None]])
    shown = texts(svg)
    assert shown.count("0%") == 1  # the failed cell; the empty one shows no number
    assert "Hatched grey: no run (not a zero)." in shown
    assert parse(svg).find(f".//{SVG}pattern") is not None
    assert "1 without a run" in parse(svg).find(f"{SVG}desc").text
    full = charts.heatmap(["task"], ["a", "b"], [[0.0, 1.0]])
    assert "Hatched grey" not in drawn(full)
    assert texts(full).count("0%") == 1 and texts(full).count("100%") == 1


def test_a_cell_without_runs_says_so_in_the_latency_chart():
    svg = charts.latency([("ran", [1.0, 2.5, 3.0]), ("idle", [])])
    shown = texts(svg)
    assert "no runs" in shown
    assert "ran (n=3)" in shown and "idle (n=0)" in shown


def test_the_heat_map_needs_a_rate_for_every_task_and_cell():
    with pytest.raises(ValueError, match="2 rows of 2 values"):
        charts.heatmap(["a", "b"], ["x", "y"], [[0.5, 0.5]])
    with pytest.raises(ValueError):
        charts.heatmap(["a"], ["x", "y"], [[0.5]])


# -- nothing to draw --------------------------------------------------------------------------

@pytest.mark.parametrize("svg", [
    pytest.param(lambda: charts.cost_vs_score([]), id="scatter"),
    pytest.param(lambda: charts.heatmap([], [], []), id="heatmap"),
    pytest.param(lambda: charts.heatmap(["a task"], [], [[]]), id="heatmap-no-cells"),
    pytest.param(lambda: charts.latency([]), id="latency"),
    pytest.param(lambda: charts.latency([("a", []), ("b", [])]), id="latency-no-runs"),
])
def test_nothing_to_draw_is_a_small_chart_saying_no_data_yet(svg):
    out = svg()
    assert "No data yet" in texts(out)
    assert parse(out).find(f"{SVG}desc").text.startswith("No data yet")
    assert len(out) < 8000


def test_cells_without_runs_are_named_under_no_data_yet():
    assert "No runs in 2: a, b." in drawn(charts.latency([("a", []), ("b", [])]))


# -- untrusted labels -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cost_vs_score", "heatmap", "latency"])
def test_labels_are_escaped_and_nothing_in_a_chart_runs(name):
    svg = {
        "cost_vs_score": lambda: charts.cost_vs_score([cell(HOSTILE, 0.001, 0.5)]),
        "heatmap": lambda: charts.heatmap([HOSTILE], [HOSTILE], [[0.5]]),
        "latency": lambda: charts.latency([(HOSTILE, [1.0, 2.0])]),
    }[name]()
    root = parse(svg)
    assert not [e for e in root.iter() if e.tag.lower().endswith("script")]
    assert not [e for e in root.iter() if any(a.lower().startswith("on") for a in e.attrib)]
    assert "<script" not in svg.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in svg
    assert any(HOSTILE in t for t in texts(svg))


def test_dollars_are_text_not_mathtext():
    """A task about "$5 or $6" neither fails (an unbalanced $) nor draws as math."""
    labels = ["costs $5 or $6", "a lone $ sign", r"$\frac{1}{2}$ and $x^2$"]
    svg = charts.heatmap(labels, ["$0.01 model"], [[0.5], [1.0], [None]])
    shown = texts(svg)
    assert all(text in shown for text in labels)
    assert "$0.01 model" in shown
    assert any("$5 or $6" in t for t in texts(charts.cost_vs_score([cell("$5 or $6", 1, 1)])))
    assert "a lone $ sign (n=1)" in texts(charts.latency([("a lone $ sign", [1.0])]))


def test_long_labels_are_cut_and_control_characters_dropped():
    long = "summarise " * 20
    assert charts.label(long) == "summarise summarise summarise summarise…"
    assert len(charts.label(long)) == charts.LABEL_LIMIT
    assert charts.label("a\x00b\x1b[31mc\u202ed\nnew   line\ufffe") == "ab[31mcd new line"
    assert charts.label("  \n\t ") == "(no label)"
    assert charts.label(42) == "42"
    svg = charts.heatmap([long, "bell\x07 and \x00nul"], ["c"], [[0.5], [0.5]])
    shown = texts(svg)
    assert "summarise summarise summarise summarise…" in shown
    assert "bell and nul" in shown
    assert long.strip() not in svg


# -- scale ------------------------------------------------------------------------------------

def test_a_fifty_by_eighteen_heat_map_is_drawn_without_numbers_in_its_squares():
    svg = charts.heatmap(*grid(50, 18))
    shown = texts(svg)
    assert "task 49" in shown and "cell 17" in shown
    assert not [t for t in shown if t.endswith("%")]  # too many squares to read numbers in
    assert len(svg) < 400_000
    small = texts(charts.heatmap(*grid(30, 8)))
    assert len([t for t in small if t.endswith("%")]) == sum(
        v is not None for row in grid(30, 8)[2] for v in row)


def test_eighteen_cells_are_numbered_with_a_key():
    svg = charts.cost_vs_score(scatter_cells(18))
    shown = texts(svg)
    assert {str(i) for i in range(1, 19)} <= set(shown)  # beside the points
    assert "18  cell 17 · plan-execute · model 17" in shown
    few = texts(charts.cost_vs_score(scatter_cells(3)))
    assert "cell 2 · plan-execute · model 2" in few and "1" not in few and "3" not in few


def test_many_runs_draw_a_sample_of_points_over_a_box_of_all():
    svg = charts.latency(latencies(18, 1000))
    root = parse(svg)
    markers = [e for e in root.iter(f"{SVG}use")]
    assert 1900 < len(markers) <= charts.LATENCY_POINTS + 50  # the points, and ticks' marks
    assert "18 cells with more than 111 runs" in drawn(svg)
    assert len(svg) < 400_000
    assert "cell 0 (n=1000)" in texts(svg)
    assert charts._sample(list(range(1000)), 400)[::399] == [0, 999]
    one = charts.latency([("only", [float(k) for k in range(3000)])])
    assert "1 cell with more than 2000 runs" in drawn(one)
    assert "n=1000" in drawn(charts.latency([("few", [1.0] * 1000)]))  # all drawn, no note
    assert "more than" not in drawn(charts.latency([("few", [1.0] * 1000)]))


def test_labels_of_cells_at_the_same_point_stand_one_above_the_other():
    svg = charts.cost_vs_score([cell(f"Cell {i}", 0.0, 0.5) for i in range(4)])
    root = parse(svg)
    ys = []
    for el in root.iter():
        if el.tag.endswith("text") and "".join(el.itertext()).startswith("Cell "):
            transform = el.get("transform", "")
            y = el.get("y") or transform.split(",")[-1].split(")")[0]
            ys.append(round(float(y), 1))
    assert len(ys) == 4 and len(set(ys)) == 4, ys
