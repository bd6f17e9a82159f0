"""The experiment charts (issue 34): cost against score per cell, a per-task heat map of pass
rates and the latency distributions, drawn with matplotlib on the server as SVG strings.

Plain Python, no Django. Each chart is a ``matplotlib.figure.Figure`` of its own, drawn by the
SVG canvas: pyplot and its global figures are never imported, so charts can be drawn in any
number of threads at once. matplotlib is imported on the first chart, not with this module
(importing it takes a quarter to most of a second, docs/BENCHMARKS.md: start-up should not pay
that for a page few requests ask for).

The output is deterministic, the same input giving the same bytes, so it can be cached by its
content: no date in the metadata, a fixed salt for the SVG's ids, matplotlib's own defaults
(never a ``matplotlibrc`` lying about), no random jitter. Text is SVG ``<text>``
(``svg.fonttype`` "none"): the labels stay text, escaped by matplotlib's XML writer, and the file
is under half the size it is with glyph outlines (a 20 × 9 heat map: 62 kB against 158 kB). The
browser draws the text in its own sans-serif where DejaVu Sans is missing.

Labels are untrusted (task texts from a user's dataset): characters XML cannot carry and
direction overrides are dropped, whitespace collapsed, long labels cut to ``LABEL_LIMIT``
characters, and ``$`` is never read as mathtext. A missing value is never drawn as a zero: a
cell without data is left out of the scatter and named in a note, a task without a run is a
hatched grey square in the heat map, a cell without runs says "no runs".
"""

from __future__ import annotations

import io
import math
import re
import textwrap
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

LABEL_LIMIT = 40
SCATTER_DIRECT_LABELS = 6  # more cells than this: points numbered, with a key beside the plot
HEATMAP_ANNOTATE = (30, 8)  # at most this many tasks × cells: each square shows its rate
# Points the latency chart draws in all, shared by its cells (at least 50 each): the boxes are
# of every run; each point is ~120 bytes of SVG.
LATENCY_POINTS = 2000
NAMES_IN_NOTE = 6

FONT_SIZE = 9
# The Content-Security-Policy to serve a chart with: matplotlib styles its SVG with style
# attributes and a <style> element, and the colour bar is a PNG in a data: URL. Shown with <img>,
# a browser applies no CSP of the SVG's own, but opened on its own (a new tab), the site's
# style-src 'self' would draw every shape black. Nothing in a chart runs or loads anything.
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

NO_DATA_COLOUR = "#d9d9d9"
HATCH_COLOUR = "#8c8c8c"
POINT_COLOUR = "#1f4e79"

# Not in XML 1.0 (C0 controls but tab and newlines, surrogates, U+FFFE/FFFF), and the bidi
# embeddings/overrides/isolates that would turn the rest of a label around.
_UNWANTED = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
                       "|[\u202a-\u202e\u2066-\u2069]")

_configured = False
_configure_lock = threading.Lock()


def label(text: object, limit: int = LABEL_LIMIT) -> str:
    """An untrusted label made safe to draw: no characters XML cannot hold or that turn text
    around, whitespace collapsed to single spaces, at most ``limit`` characters (the last one
    "…" when cut)."""
    cleaned = " ".join(_UNWANTED.sub("", str(text)).split())
    if not cleaned:
        return "(no label)"
    if len(cleaned) > limit:
        return cleaned[:limit - 1].rstrip() + "…"
    return cleaned


def cost_vs_score(cells: list[dict[str, Any]]) -> str:
    """Mean cost per run (USD, x) against mean score (0..1, y) of each cell, with its 95%
    intervals as error bars both ways and its label beside the point (more than
    ``SCATTER_DIRECT_LABELS`` cells: a number beside the point and a key). Each cell is
    ``{"label", "cost": {"mean", "low", "high"}, "score": {...}}``; a cell whose mean cost or
    score is missing is left out and named in a note, a missing ``low``/``high`` draws no bar
    on that side."""
    title = "Cost against score per cell"
    points: list[tuple[str, float, float, tuple[float, float] | None,
                       tuple[float, float] | None]] = []
    missing: list[str] = []
    for cell in cells:
        name = label(cell.get("label", ""))
        cost, score = _figures(cell.get("cost")), _figures(cell.get("score"))
        if cost[0] is None or score[0] is None:
            missing.append(name)
            continue
        points.append((name, cost[0], score[0], _bar(cost), _bar(score)))
    note = _named("No data for", missing)
    if not points:
        return _no_data(title, note)

    direct = len(points) <= SCATTER_DIRECT_LABELS
    width = 7.0 if direct else 10.0
    fig = _figure(width, 4.8)
    ax = fig.add_subplot()
    colours = _colours(len(points))
    xs = [x for _, x, _, _, _ in points]
    ys = [y for _, _, y, _, _ in points]
    across = [(ys[i], bar, colours[i]) for i, (*_, bar, _) in enumerate(points) if bar]
    upright = [(xs[i], bar, colours[i]) for i, (*_, bar) in enumerate(points) if bar]
    _interval_bars(ax, across, across=True)
    _interval_bars(ax, upright, across=False)
    ax.scatter(xs, ys, s=40, c=colours, edgecolors="white", linewidths=0.6, zorder=3)
    stacked: dict[tuple[float, float], int] = {}  # labels already at this very point
    for index, (name, x, y, _, _) in enumerate(points):
        spot = (round(x, 12), round(y, 12))
        above = stacked.get(spot, 0)
        stacked[spot] = above + 1
        # Cells at the same point (all offline: every cost 0) get their labels one above
        # the other, not printed over each other.
        ax.annotate(name if direct else str(index + 1), (x, y),
                    xytext=(6, 5 + above * (FONT_SIZE + 2)), textcoords="offset points",
                    fontsize=FONT_SIZE - 1, parse_math=False)
    x_ends = [0.0, *xs, *(end for _, bar, _ in across for end in bar)]
    y_ends = [0.0, 1.0, *ys, *(end for _, bar, _ in upright for end in bar)]
    x_low, x_high = min(x_ends), max(x_ends)
    if x_high - x_low <= 0:
        x_high = x_low + 1.0  # every cost zero (offline models): an axis of its own, not none
    pad = (x_high - x_low) * 0.08
    ax.set_xlim(x_low - (pad if x_low < 0 else 0), x_high + pad)
    ax.set_ylim(min(y_ends) - 0.04, max(y_ends) + 0.06)
    ax.set_xlabel("Mean cost per run (USD), 95% interval", parse_math=False)
    ax.set_ylabel("Mean score, 95% interval", parse_math=False)
    ax.set_title(title, parse_math=False)
    ax.grid(True, color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)
    _plain_ticks(ax.xaxis)
    if not direct:
        from matplotlib.lines import Line2D

        keys = [Line2D([], [], linestyle="none", marker="o", markersize=6, color=colour)
                for colour in colours]
        legend = ax.legend(keys, [f"{i + 1}  {name}" for i, (name, *_) in enumerate(points)],
                           loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                           fontsize=FONT_SIZE - 1, handletextpad=0.3, borderaxespad=0.0)
        for text in legend.get_texts():
            text.set_parse_math(False)
    if note:
        _note(fig, note, width)
    desc = (f"{_count(len(points), 'cell')} by mean cost per run and mean score"
            + (f"; {note}" if note else ""))
    return _svg(fig, title, desc)


def heatmap(tasks: list[str], cells: list[str], rates: list[list[float | None]]) -> str:
    """Pass rate of each task (rows) in each cell (columns), 0..1 on one colour scale;
    ``rates[i][j]`` is task i's rate in cell j, None when it has no run there (a hatched grey
    square, never a zero). Each square shows its rate while the grid is at most
    ``HEATMAP_ANNOTATE`` tasks × cells."""
    title = "Pass rate per task and cell"
    if len(rates) != len(tasks) or any(len(row) != len(cells) for row in rates):
        raise ValueError(f"rates must be {len(tasks)} rows of {len(cells)} values")
    if not tasks or not cells:
        return _no_data(title)

    values = [[_finite(v) for v in row] for row in rates]
    annotate = len(tasks) <= HEATMAP_ANNOTATE[0] and len(cells) <= HEATMAP_ANNOTATE[1]
    size = FONT_SIZE - (0 if len(tasks) <= 30 else 1)
    width = 3.6 + 0.55 * len(cells) + 1.0
    height = 2.6 + (0.26 if annotate else 0.2) * len(tasks)
    fig = _figure(width, height)
    ax = fig.add_subplot()
    ax.patch.set_facecolor(NO_DATA_COLOUR)  # what shows through a square without a rate
    ax.patch.set_hatch("///")
    ax.patch.set_edgecolor(HATCH_COLOUR)
    grid = [[math.nan if v is None else min(max(v, 0.0), 1.0) for v in row] for row in values]
    mesh = ax.pcolormesh(grid, cmap="viridis", vmin=0.0, vmax=1.0, edgecolors="white",
                         linewidth=0.5)
    ax.set_xlim(0, len(cells))
    ax.set_ylim(len(tasks), 0)  # the first task at the top
    ax.set_xticks([j + 0.5 for j in range(len(cells))], [label(c) for c in cells],
                  rotation=40, ha="right", rotation_mode="anchor", fontsize=size,
                  parse_math=False)
    ax.set_yticks([i + 0.5 for i in range(len(tasks))], [label(t) for t in tasks],
                  fontsize=size, parse_math=False)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if annotate:
        for i, row in enumerate(values):
            for j, value in enumerate(row):
                if value is None:
                    continue
                dark = value < 0.6  # viridis is dark below ~0.6: white text there
                ax.text(j + 0.5, i + 0.5, f"{value:.0%}", ha="center", va="center",
                        fontsize=FONT_SIZE - 1, color="white" if dark else "black",
                        parse_math=False)
    colourbar = fig.colorbar(mesh, ax=ax, shrink=min(1.0, 4.0 / height + 0.3), pad=0.02)
    colourbar.set_label("Pass rate over the repetitions", parse_math=False)
    ax.set_title(title, parse_math=False)
    empty = sum(v is None for row in values for v in row)
    note = "Hatched grey: no run (not a zero)." if empty else ""
    if note:
        _note(fig, note, width)
    desc = (f"{_count(len(tasks), 'task')} × {_count(len(cells), 'cell')}"
            + (f"; {empty} without a run" if empty else ""))
    return _svg(fig, title, desc)


def latency(cells: list[tuple[str, list[float]]]) -> str:
    """Each cell's run latencies in seconds as a box (median, quartiles, whiskers at 1.5 IQR)
    with the runs as points over it, one row per cell; a cell without runs says "no runs".
    More than its share of ``LATENCY_POINTS`` runs in a cell: its box is of all of them, its
    points an even sample by rank."""
    title = "Latency per run"
    if not cells:
        return _no_data(title)
    rows = [(label(name), [x for x in (_finite(v) for v in values) if x is not None])
            for name, values in cells]
    if not any(values for _, values in rows):
        return _no_data(title, _named("No runs in", [name for name, _ in rows]))

    width = 8.0
    fig = _figure(width, 1.6 + 0.42 * len(rows))
    ax = fig.add_subplot()
    filled = [(i, values) for i, (_, values) in enumerate(rows) if values]
    ax.boxplot([values for _, values in filled], positions=[i for i, _ in filled],
               orientation="horizontal", widths=0.55, showfliers=False, manage_ticks=False,
               medianprops={"color": "#d62728", "linewidth": 1.5},
               boxprops={"color": "#404040"}, whiskerprops={"color": "#404040"},
               capprops={"color": "#404040"})
    sampled = 0
    share = max(50, LATENCY_POINTS // len(filled))
    for i, values in filled:
        shown = _sample(sorted(values), share)
        sampled += len(shown) < len(values)
        offsets = [i + _spread(k) for k in range(len(shown))]
        ax.scatter(shown, offsets, s=9, color=POINT_COLOUR, alpha=0.45, linewidths=0,
                   zorder=3)
    for i, (_, values) in enumerate(rows):
        if not values:
            ax.text(0.01, i, "no runs", transform=ax.get_yaxis_transform(), va="center",
                    fontsize=FONT_SIZE - 1, color="#595959", style="italic", parse_math=False)
    ax.set_yticks(range(len(rows)), [f"{name} (n={len(values)})" for name, values in rows],
                  fontsize=FONT_SIZE - (0 if len(rows) <= 12 else 1), parse_math=False)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first cell at the top
    low = min(min(values) for _, values in filled)
    ax.set_xlim(left=min(0.0, low))
    ax.set_xlabel("Seconds per run", parse_math=False)
    ax.set_title(title, parse_math=False)
    ax.grid(True, axis="x", color="#e6e6e6", linewidth=0.6)
    ax.set_axisbelow(True)
    _plain_ticks(ax.xaxis)
    note = (f"{_count(sampled, 'cell')} with more than {share} runs: an even sample "
            "of the points is shown, the box is of every run." if sampled else "")
    if note:
        _note(fig, note, width)
    empty = [name for name, values in rows if not values]
    desc = (f"Latency distributions of {_count(len(filled), 'cell')}"
            + (f"; {_named('no runs in', empty)}" if empty else ""))
    return _svg(fig, title, desc)


# -- the parts the charts share -------------------------------------------------------------

def _matplotlib() -> None:
    """Import matplotlib and settle its settings, once per process: its own defaults (not a
    ``matplotlibrc`` found in the working or home folder), SVG text as text, a fixed id salt,
    no TeX and no mathtext. These are process-wide (rcParams are read as a figure is drawn and
    saved, with no per-figure equivalent); they are set once, before any chart is drawn, to the
    same constants, and nothing in Quorum changes them after."""
    global _configured
    if _configured:
        return
    with _configure_lock:
        if _configured:
            return
        import matplotlib

        matplotlib.rcdefaults()
        matplotlib.rcParams.update({
            "svg.fonttype": "none",
            "svg.hashsalt": "quorum-charts",
            "text.usetex": False,
            "text.parse_math": False,
            "font.size": FONT_SIZE,
            "axes.titlesize": FONT_SIZE + 2,
            "axes.labelsize": FONT_SIZE,
            "xtick.labelsize": FONT_SIZE,
            "ytick.labelsize": FONT_SIZE,
        })
        _configured = True


def _figure(width: float, height: float) -> Figure:
    _matplotlib()
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasSVG(fig)
    return fig


def _svg(fig: Figure, title: str, desc: str) -> str:
    """The figure as an SVG document with its ``<title>`` (matplotlib writes it from the
    metadata) and a ``<desc>`` after it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Title": title})
    text = buffer.getvalue().decode("utf-8")
    root = text.index("<svg")
    after = text.find("</title>", root)
    end = (after + len("</title>") if after != -1
           else text.index(">", root) + 1)  # the root's attributes are numbers and namespaces
    return text[:end] + f"\n <desc>{escape(desc)}</desc>" + text[end:]


def _no_data(title: str, note: str = "") -> str:
    """A small chart that says there is nothing to draw yet (and, when given, whose)."""
    width = 5.0
    fig = _figure(width, 1.4 if not note else 1.9)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.6, "No data yet", ha="center", va="center", fontsize=FONT_SIZE + 3,
            color="#595959", transform=ax.transAxes, parse_math=False)
    ax.set_title(title, parse_math=False)
    if note:
        _note(fig, note, width)
    return _svg(fig, title, "No data yet" + (f"; {note}" if note else ""))


def _note(fig: Figure, note: str, width: float) -> None:
    """A line or two of small text under the chart, wrapped to the figure's width."""
    wrapped = "\n".join(textwrap.wrap(note, width=max(30, int(width * 15))))
    fig.supxlabel(wrapped, fontsize=FONT_SIZE - 1, color="#404040", x=0.01, ha="left",
                  parse_math=False)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _named(what: str, names: Sequence[str]) -> str:
    if not names:
        return ""
    shown = ", ".join(names[:NAMES_IN_NOTE])
    more = len(names) - NAMES_IN_NOTE
    return f"{what} {len(names)}: {shown}" + (f" and {more} more" if more > 0 else "") + "."


def _finite(value: object) -> float | None:
    """A number that can be drawn, or None (missing, not a number, NaN or infinite)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]  # Decimal, int, numpy scalars too
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _figures(summary: object) -> tuple[float | None, float | None, float | None]:
    """(mean, low, high) of a cell's figure, each None where it is missing."""
    if not isinstance(summary, dict):
        return None, None, None
    return (_finite(summary.get("mean")), _finite(summary.get("low")),
            _finite(summary.get("high")))


def _bar(figures: tuple[float | None, float | None, float | None]) -> tuple[float, float] | None:
    _, low, high = figures
    return None if low is None or high is None else (low, high)


def _interval_bars(ax: Axes, bars: list[tuple[float, tuple[float, float], str]], *,
                   across: bool) -> None:
    """Interval bars, each ``(at, (low, high), colour)``, with a cap at each end: horizontal
    ones at y = ``at`` (``across``), else upright at x = ``at``. In bulk, one collection and
    one set of markers: matplotlib's ``errorbar`` per point is ~20 artists, and for 18 points
    it was a third of the chart's time."""
    if not bars:
        return
    at = [a for a, _, _ in bars]
    draw = ax.hlines if across else ax.vlines
    draw(at, [b[0] for _, b, _ in bars], [b[1] for _, b, _ in bars],
         colors=[c for _, _, c in bars], linewidth=1.2)
    ends = [end for _, b, _ in bars for end in b]
    twice = [a for a in at for _ in (0, 1)]
    ax.scatter(ends if across else twice, twice if across else ends,
               marker="|" if across else "_", s=30,
               c=[c for _, _, c in bars for _ in (0, 1)], linewidths=1.2)


def _colours(count: int) -> list[str]:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    palette = colormaps["tab10" if count <= 10 else "tab20"]
    return [to_hex(palette(i % palette.N)) for i in range(count)]


def _plain_ticks(axis: Axis) -> None:
    """Numbers as ``%g`` (0.0012, not 1.2e-3 with an offset above the axis)."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


def _sample(values: list[float], most: int) -> list[float]:
    """At most ``most`` of sorted ``values``, evenly by rank (the ends kept)."""
    if len(values) <= most:
        return values
    step = (len(values) - 1) / (most - 1)
    return [values[round(k * step)] for k in range(most)]


def _spread(k: int) -> float:
    """A point's vertical offset in its row: the golden-ratio sequence over ±0.18, so points
    with the same latency do not hide one another, with no randomness."""
    return ((k * 0.6180339887498949) % 1.0 - 0.5) * 0.36


__all__ = ["SVG_CSP", "cost_vs_score", "heatmap", "latency", "label"]
