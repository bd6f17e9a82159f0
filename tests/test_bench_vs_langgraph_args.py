"""bench_vs_langgraph's command line: bad flags are one line and exit 2, --quick is a smoke
test, and without LangGraph it says how to install it (exit 2) instead of a traceback."""

import pytest

from tests.benchmarks import bench_vs_langgraph as bench


@pytest.mark.parametrize("argv", [
    ["--runs", "0"], ["--runs", "x"], ["--runs", "51"], ["--latency", "-1"],
    ["--latency", "nan"], ["--latency", "inf"], ["--large", "0"], ["--workers", "0"],
    ["--concurrency", "100000"], ["--no-such-flag"], ["--latency", "1\x00"],
])
def test_bad_flags_are_one_line_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("bench_vs_langgraph: ") and err.count("\n") == 1


def test_defaults_fill_the_large_batch_across_the_workers(monkeypatch):
    monkeypatch.delenv("QUORUM_WORKER_CONCURRENCY", raising=False)
    args = bench.parse_args(["--workers", "2"])
    assert (args.runs, args.latency, args.large_latency) == (3, 0.5, 1.0)
    assert (args.large, args.small, args.concurrency) == (200, 50, 100)
    assert bench.parse_args(["--workers", "3"]).concurrency == 67


def test_quick_is_a_small_smoke_test():
    args = bench.parse_args(["--quick", "--runs", "9"])
    assert (args.runs, args.large, args.small) == (1, 20, 10)
    assert args.latency < 0.5 and args.large_latency < 1.0


def test_without_langgraph_it_says_make_bench_installs_it(monkeypatch, capsys):
    monkeypatch.setattr(bench, "_installed", lambda module: module != "langgraph")
    with pytest.raises(SystemExit) as exit_:
        bench.require_langgraph()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "make bench installs it" in err and err.count("\n") == 1


def test_on_postgres_it_needs_the_postgres_checkpointer_too(monkeypatch, capsys):
    """--database postgres checkpoints LangGraph to PostgreSQL: without
    langgraph-checkpoint-postgres it says so; the SQLite default does not need it."""
    monkeypatch.setattr(bench, "_installed",
                        lambda module: module != "langgraph.checkpoint.postgres")
    bench.require_langgraph("sqlite")
    with pytest.raises(SystemExit) as exit_:
        bench.require_langgraph("postgres")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "langgraph.checkpoint.postgres" in err and err.count("\n") == 1


def test_langgraph_stays_out_of_the_app():
    """Only the benchmark imports LangGraph: no module of the app names it."""
    import re
    from pathlib import Path

    imports = re.compile(r"^\s*(import|from)\s+langgraph\b", re.MULTILINE)
    root = Path(__file__).resolve().parents[1]
    offenders = [str(p.relative_to(root)) for d in ("agents_app", "reviews_app", "common",
                                                    "config")
                 for p in (root / d).rglob("*.py") if imports.search(p.read_text())]
    assert offenders == []
    assert imports.search((root / "tests/benchmarks/langgraph_side.py").read_text())


@pytest.mark.parametrize(("script", "argv"), [
    ("bench_gate_resume", ["--runs", "0"]), ("bench_gate_resume", ["--runs", "nan"]),
    ("bench_watchers", ["--clients", "-1"]), ("bench_watchers", ["--late", "2"]),
    ("bench_watchers", ["--latency", "inf"]), ("bench_cli_review", ["--runs", "0"]),
    ("bench_worker_models", ["--models", "0x5"]), ("bench_worker_models", ["--n", "nan"]),
    ("bench_worker_models", ["--models", "2x100f/tx"]),
    ("bench_worker_models", ["--models", "2x100f/t-1"]),
    ("bench_worker_models", ["--models", "2x100f/t1001"]),
    ("bench_memory_design", ["--n", "0"]), ("bench_memory_design", ["--latency", "nan"]),
    ("bench_memory_design", ["--db-threads", "-1"]), ("bench_memory_design", ["--child"]),
])
def test_the_rows_siblings_refuse_bad_flags_in_one_line(script, argv):
    """The benchmarks whose figures fill the table's Quorum-only rows (and the worker shapes)
    refuse a bad number before starting anything: one line, exit 2."""
    import subprocess
    import sys
    from pathlib import Path

    path = Path(bench.__file__).with_name(f"{script}.py")
    out = subprocess.run([sys.executable, str(path), *argv], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"{script}: ") and out.stderr.count("\n") == 1, out.stderr


def test_a_worker_shape_may_name_its_turns():
    from tests.benchmarks.bench_worker_models import label, shape

    assert shape("2x100f/t0") == (2, 100, True, 0)
    assert shape("2x100") == (2, 100, False, None)
    assert label(shape("2x100f/t0")) == "2 × 100 forked from one parent, unlimited turns"
    assert label(shape("1x200/t2")) == "1 × 200, 2 turns"
