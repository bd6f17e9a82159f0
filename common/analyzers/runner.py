"""Running ruff and bandit: one process of each, started together and collected against one
deadline, through :mod:`common.proc` (argument lists, no shell, a scrubbed environment, the
process group killed at the deadline). A missing, failing or slow tool is an error in the
report, never an exception."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import proc
from .evidence import from_bandit, from_ruff, merge
from .fragments import Unit, file_order, units_for
from .inputs import AnalyzerInput
from .rules import IGNORE_SUPPRESSIONS, RUFF_IGNORE, RUFF_SELECT, RUFF_TARGET

# A tool's JSON report is read into memory; past this it is cut and its results are missing.
OUTPUT_LIMIT = 50_000_000


@dataclass
class AnalyzerReport:
    evidence: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tools: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def find_tool(name: str) -> str | None:
    """The tool's executable: next to this Python first (the venv), then on PATH."""
    local = Path(sys.executable).parent / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


_VERSIONS: dict[str, str] = {}


def _ruff_cmd(exe: str, names: list[str]) -> list[str]:
    cmd = [exe, "check", "--no-cache", "--isolated", "--output-format", "json",
           "--select", RUFF_SELECT, "--ignore", RUFF_IGNORE, "--target-version", RUFF_TARGET,
           "--exit-zero"]
    if IGNORE_SUPPRESSIONS:
        cmd.append("--ignore-noqa")
    return [*cmd, "--", *names]


def _bandit_cmd(exe: str, names: list[str]) -> list[str]:
    cmd = [exe, "-f", "json", "-q"]
    if IGNORE_SUPPRESSIONS:
        cmd.append("--ignore-nosec")
    return [*cmd, *names]


@dataclass
class _Run:
    tool: str
    child: proc.Child | None = None    # until it is collected
    version: proc.Child | None = None  # ``--version``, when the package metadata cannot say
    started: bool = False
    exe: str = ""
    error: str | None = None
    stdout: str = ""


def _start(tool: str, cmd_for, names: list[str], src: Path) -> _Run:
    run = _Run(tool)
    exe = find_tool(tool)
    if not exe:
        run.error = f"{tool} is not installed (not next to {sys.executable} nor on PATH); " \
                    f"its checks were skipped."
        return run
    run.exe = exe
    try:
        # Fixed argument list, no shell; the only variable parts are generated names.
        run.child = proc.start(cmd_for(exe, names), cwd=src, limit=OUTPUT_LIMIT,
                               stop_when_full=True)
    except OSError as exc:
        run.error = f"{tool} could not be started ({exe}): {exc.strerror or exc}; " \
                    f"its checks were skipped."
        return run
    run.started = True
    if exe not in _VERSIONS and Path(exe).parent == Path(sys.executable).parent:
        # The tool of this environment: its package metadata names the version, which is
        # much cheaper than starting bandit a second time.
        with contextlib.suppress(Exception):
            _VERSIONS[exe] = importlib.metadata.version(tool)
    if exe not in _VERSIONS:
        with contextlib.suppress(OSError):
            run.version = proc.start([exe, "--version"], cwd=src, limit=4096)
    return run


def _finish(run: _Run, deadline: float, timeout: float) -> None:
    if run.child is None:
        return
    result = run.child.wait(deadline - time.monotonic())
    run.child = None
    if result.timed_out:
        if run.version is not None:
            run.version.wait(0)  # stops it
            run.version = None
        run.error = f"{run.tool} timed out after {timeout:g} s and was stopped; " \
                    f"its results are missing."
        return
    if result.truncated:
        run.error = f"{run.tool} printed more than {OUTPUT_LIMIT // 1_000_000} MB and was " \
                    f"stopped; its results are missing."
    else:
        run.stdout = result.text()
        stderr = result.text("stderr").strip()
        code = result.returncode
        bad_exit = code not in (0, 1)  # bandit exits 1 when it found something
        if bad_exit or not run.stdout.strip():
            detail = stderr.splitlines()[-1] if stderr else "no output"
            run.error = f"{run.tool} failed (exit code {code}): {detail[:300]}"
    if run.version is not None:
        answer = run.version.wait(max(1.0, deadline - time.monotonic()))
        run.version = None
        first = answer.text().strip().splitlines()
        if not answer.timed_out and first and first[0].split():
            _VERSIONS[run.exe] = first[0].split()[-1]


def _load_json(run: _Run, errors: list[str]):
    if run.error:
        errors.append(run.error)
    if not run.started or not run.stdout.strip():
        return None
    try:
        return json.loads(run.stdout)
    except ValueError:
        if not run.error:
            errors.append(f"{run.tool} printed output that is not JSON; its results are "
                          f"missing.")
        return None


def run_analyzers(inputs: list[AnalyzerInput], timeout: float = 60) -> AnalyzerReport:
    """Run one ruff and one bandit process, concurrently, over all inputs; never raises for
    a missing, failing or slow tool (see ``errors``)."""
    started = time.monotonic()
    report = AnalyzerReport()
    if not inputs:
        return report
    with tempfile.TemporaryDirectory(prefix="review-analyzers-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        units: dict[str, Unit] = {}
        for i, inp in enumerate(inputs):
            for unit in units_for(i, inp):
                units[unit.name] = unit
                (src / unit.name).write_text(unit.text, encoding="utf-8", errors="replace",
                                             newline="")
        names = sorted(units, key=file_order)
        deadline = time.monotonic() + timeout
        runs = [_start("ruff", _ruff_cmd, names, src),
                _start("bandit", _bandit_cmd, names, src)]
        try:
            for run in runs:
                _finish(run, deadline, timeout)
        finally:
            for run in runs:
                for child in (run.child, run.version):
                    if child is not None:  # not collected: an exception on the way
                        child.wait(0)
        ruff_data = _load_json(runs[0], report.errors)
        bandit_data = _load_json(runs[1], report.errors)
    ruff_ev = from_ruff(ruff_data, units, inputs) if ruff_data is not None else []
    bandit_ev = (from_bandit(bandit_data, units, inputs, report.errors)
                 if bandit_data is not None else [])
    for run, data in zip(runs, (ruff_data, bandit_data), strict=True):
        if data is not None and run.tool not in report.tools:
            report.tools[run.tool] = _VERSIONS.get(run.exe, "unknown")
    order = {inp.path: i for i, inp in reversed(list(enumerate(inputs)))}
    report.evidence = sorted(merge(ruff_ev, bandit_ev),
                             key=lambda e: (order.get(e["file"], 0), e["line"] or 0,
                                            e["rule"], e["tool"]))
    report.seconds = time.monotonic() - started
    return report
