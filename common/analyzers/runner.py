"""Running the analyzers (``tools.TOOLS``): one process of each tool that has files to read,
all started together and collected against one deadline, through :mod:`common.proc` (argument
lists, no shell, a scrubbed environment, the process group killed at the deadline). A missing,
failing, slow or turned-off tool is an error in the report and a reason in each of its files'
``not_run``, never an exception.

A tool is turned off with ``QUORUM_DISABLE_ANALYZERS`` (names, comma-separated), or with the
``disabled`` argument."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import prewarm, proc, turns
from .evidence import merge
from .fragments import Unit, file_order, units_for
from .inputs import AnalyzerInput
from .tools import TOOLS, Tool
from .tools import secrets as secrets_tool
from .tools import semgrep as semgrep_tool

# A tool's JSON report is read into memory; past this it is cut and its results are missing.
OUTPUT_LIMIT = 50_000_000
DISABLE_ENV = "QUORUM_DISABLE_ANALYZERS"


@dataclass
class AnalyzerReport:
    evidence: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tools: dict[str, str] = field(default_factory=dict)     # tool -> version, tools that ran
    seconds: float = 0.0
    # path -> tools that ran on it (secrets scanners included); path -> why a tool that reads
    # its kind did not run on it
    examined: dict[str, list[str]] = field(default_factory=dict)
    not_run: dict[str, list[str]] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)     # path -> kind (inputs.KINDS)


def find_tool(name: str) -> str | None:
    """The tool's executable: next to this Python first (the venv), then on PATH."""
    local = Path(sys.executable).parent / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


def private_dirs(home: Path) -> dict[str, str]:
    """The XDG directories of a tool given a home of its own (``Tool.private_home``)."""
    return {"XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_DATA_HOME": str(home / ".local")}


def disabled_tools() -> set[str]:
    return {n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()}


_VERSIONS: dict[str, str] = {}


@dataclass
class _Run:
    tool: Tool
    names: list[str]
    child: proc.Child | None = None    # until it is collected
    version: proc.Child | None = None  # ``--version``, when the package metadata cannot say
    started: bool = False
    exe: str = ""
    error: str | None = None
    stdout: str = ""
    data: object = None
    units: dict[str, Unit] | None = None  # the tool's own copies (``Tool.keep_line``)


def _own_copy(tool: Tool, names: list[str], mine: Path, units: dict[str, Unit],
              inputs: list[AnalyzerInput]) -> tuple[Path, dict[str, Unit]]:
    """The files as ``tool.keep_line`` wants them: only the added lines it keeps, one after
    the other, with each unit's line map to the new file."""
    own = mine / "src"
    own.mkdir()
    copies: dict[str, Unit] = {}
    for name in names:
        unit = units[name]
        changed = inputs[unit.index].changed_lines
        kept: list[str] = []
        line_map: dict[int, int] = {}
        for n, line in enumerate(unit.text.split("\n"), start=1):
            new = n if unit.line_map is None else unit.line_map.get(n)
            if (new is not None and (changed is None or new in changed)
                    and (tool.keep_line is None or tool.keep_line(line))):
                kept.append(line)
                line_map[len(kept)] = new
        text = "\n".join(kept) + "\n" if kept else ""
        copies[name] = Unit(unit.index, name, text, line_map, unit.fragment)
        (own / name).write_text(text, encoding="utf-8", errors="replace", newline="")
    return own, copies


def _start(tool: Tool, names: list[str], src: Path, work: Path, units: dict[str, Unit],
           inputs: list[AnalyzerInput]) -> _Run:
    run = _Run(tool, names)
    exe = find_tool(tool.name)
    if not exe:
        run.error = f"{tool.name} is not installed (not next to {sys.executable} nor on " \
                    f"PATH); its checks were skipped."
        return run
    run.exe = exe
    mine = work / tool.name
    env, home = dict(tool.env), None
    try:
        mine.mkdir()
        if tool.keep_line is not None:
            src, run.units = _own_copy(tool, names, mine, units, inputs)
        if tool.private_home:
            home = str(mine)
            env.update(private_dirs(mine))
        # Fixed argument list, no shell; the only variable parts are generated names.
        argv = tool.command(exe, names, mine)
        warm = prewarm.take(tool.name, exe) if tool.warm is not None else None
        program_argv = tool.warm.argv(argv) if warm is not None and tool.warm else None
        if warm is not None and program_argv is not None:
            # started while the command loaded (common/prewarm.py)
            run.child = warm.launch(program_argv, cwd=src, limit=OUTPUT_LIMIT,
                                    stop_when_full=True)
        else:
            if warm is not None:
                warm.close()
            run.child = proc.start(argv, cwd=src, env=env or None, home=home,
                                   limit=OUTPUT_LIMIT, stop_when_full=True)
    except OSError as exc:
        run.error = f"{tool.name} could not be started ({exe}): {exc.strerror or exc}; " \
                    f"its checks were skipped."
        return run
    run.started = True
    if exe not in _VERSIONS and Path(exe).parent == Path(sys.executable).parent:
        # The tool of this environment: its package metadata names the version, which is
        # much cheaper than starting it a second time.
        with contextlib.suppress(Exception):
            _VERSIONS[exe] = importlib.metadata.version(tool.package)
    if exe not in _VERSIONS:
        with contextlib.suppress(OSError):
            run.version = proc.start([exe, "--version"], cwd=src, limit=4096)
    return run


def _finish(run: _Run, deadline: float, timeout: float) -> None:
    if run.child is None:
        return
    result = run.child.wait(deadline - time.monotonic())
    run.child = None
    name = run.tool.name
    if result.timed_out:
        if run.version is not None:
            run.version.wait(0)  # stops it
            run.version = None
        run.error = f"{name} timed out after {timeout:g} s and was stopped; its results are " \
                    f"missing."
        return
    if result.truncated:
        run.error = f"{name} printed more than {OUTPUT_LIMIT // 1_000_000} MB and was " \
                    f"stopped; its results are missing."
    else:
        run.stdout = result.text()
        stderr = result.text("stderr").strip()
        code = result.returncode
        if code not in run.tool.ok_codes or not (run.stdout.strip() or run.tool.quiet_ok):
            detail = stderr.splitlines()[-1] if stderr else "no output"
            run.error = f"{name} failed (exit code {code}): {detail[:300]}"
    if run.version is not None:
        answer = run.version.wait(max(1.0, deadline - time.monotonic()))
        run.version = None
        first = answer.text().strip().splitlines()
        if not answer.timed_out and first and first[0].split():
            _VERSIONS[run.exe] = first[0].split()[-1]


def _load_json(run: _Run, errors: list[str]) -> None:
    if run.error:
        errors.append(run.error)
    if not run.started or (not run.stdout.strip() and (run.error or not run.tool.quiet_ok)):
        return
    try:
        run.data = (run.tool.decode or json.loads)(run.stdout)
    except ValueError:
        run.data = None
        if not run.error:
            run.error = f"{run.tool.name} printed output that is not JSON; its results are " \
                        f"missing."
            errors.append(run.error)


def _write_units(inputs: list[AnalyzerInput], src: Path) -> dict[str, Unit]:
    units: dict[str, Unit] = {}
    for i, inp in enumerate(inputs):
        for unit in units_for(i, inp):
            units[unit.name] = unit
            (src / unit.name).write_text(unit.text, encoding="utf-8", errors="replace",
                                         newline="")
    return units


def run_analyzers(inputs: list[AnalyzerInput], timeout: float = 60,
                  disabled: set[str] | None = None) -> AnalyzerReport:
    """Run each analyzer that has files to read, concurrently, over all inputs; never raises
    for a missing, failing or slow tool (see ``errors`` and ``not_run``). The report of a
    run ``start_ahead`` began with the same arguments is taken instead, once."""
    off = disabled_tools() if disabled is None else set(disabled)
    if inputs and (ahead := _take_ahead(_ahead_key(inputs, timeout, off))) is not None:
        return ahead.report()
    return _run(inputs, timeout, off)


def _run(inputs: list[AnalyzerInput], timeout: float, off: set[str]) -> AnalyzerReport:
    started = time.monotonic()
    report = AnalyzerReport()
    if not inputs:
        return report
    report.kinds = {inp.path: inp.kind for inp in inputs}
    runs: list[_Run] = []
    with tempfile.TemporaryDirectory(prefix="review-analyzers-") as tmp:
        src, work = Path(tmp) / "src", Path(tmp) / "work"
        src.mkdir()
        work.mkdir()
        units = _write_units(inputs, src)
        ordered = sorted(units, key=file_order)
        deadline = time.monotonic() + timeout
        skipped: list[tuple[Tool, list[str], str]] = []
        try:
            for tool in TOOLS:
                names = [n for n in ordered if inputs[units[n].index].kind in tool.kinds]
                if not names:
                    continue
                if tool.name in off:
                    skipped.append((tool, names, f"{tool.name} is turned off ({DISABLE_ENV})"))
                    continue
                runs.append(_start(tool, names, src, work, units, inputs))
            for run in runs:
                _finish(run, deadline, timeout)
        finally:
            for run in runs:
                for child in (run.child, run.version):
                    if child is not None:  # not collected: an exception on the way
                        child.wait(0)
        for run in runs:
            _load_json(run, report.errors)
    by_tool: dict[str, list[dict]] = {}
    for run in runs:
        if run.data is None:
            skipped.append((run.tool, run.names, (run.error or "").rstrip(".")
                            or f"{run.tool.name} gave no report"))
            continue
        by_tool[run.tool.name] = run.tool.parse(run.data, run.units or units, inputs,
                                                report.errors)
        report.tools[run.tool.name] = _VERSIONS.get(run.exe, "unknown")
        seen = semgrep_tool.scanned(run.data) if run.tool is semgrep_tool.SEMGREP else None
        for n in run.names:
            path = inputs[units[n].index].path
            if seen is not None and n not in seen:
                report.not_run.setdefault(path, []).append(
                    f"semgrep skipped it (too large or not parseable as {report.kinds[path]})")
                continue
            tools = report.examined.setdefault(path, [])
            if run.tool.name not in tools:
                tools.append(run.tool.name)
    for _tool, names, why in skipped:
        for path in dict.fromkeys(inputs[units[n].index].path for n in names):
            report.not_run.setdefault(path, []).append(why)
    evidence = merge(by_tool.pop("ruff", []), by_tool.pop("bandit", []))
    for name in sorted(by_tool):
        evidence += by_tool[name]
    order = {inp.path: i for i, inp in reversed(list(enumerate(inputs)))}
    report.evidence = sorted(evidence, key=lambda e: (order.get(e["file"], 0), e["line"] or 0,
                                                      e["rule"], e["tool"]))
    report.seconds = time.monotonic() - started
    return report


# --- started ahead -------------------------------------------------------------------------------
class Ahead:
    """Analyzers started before they are asked for (``start_ahead``), in a thread of their
    own; ``close()`` waits for them if nothing took their report (none keeps running)."""

    def __init__(self, key: tuple, inputs: list[AnalyzerInput], timeout: float, off: set[str]):
        self.key = key
        self._result: AnalyzerReport | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, args=(inputs, timeout, off),
                                        name="quorum-analyzers", daemon=True)
        self._thread.start()

    def _work(self, inputs: list[AnalyzerInput], timeout: float, off: set[str]) -> None:
        try:
            self._result = _run(inputs, timeout, off)
        except BaseException as exc:  # noqa: BLE001 - raised again where the report is taken
            self._error = exc

    def report(self) -> AnalyzerReport:
        with turns.waiting():  # on the analyzers' processes
            self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def close(self) -> None:
        _take_ahead(self.key, self)
        with turns.waiting():
            self._thread.join()


_ahead: dict[tuple, Ahead] = {}
_ahead_lock = threading.Lock()


def _ahead_key(inputs: list[AnalyzerInput], timeout: float, off: set[str]) -> tuple:
    """Everything a run's report depends on: the inputs as they are, the deadline, the tools
    turned off."""
    return (tuple((i.path, i.text, None if i.line_map is None else tuple(sorted(i.line_map.items())),
                   i.full, None if i.changed_lines is None else tuple(sorted(i.changed_lines)),
                   i.kind) for i in inputs), float(timeout), tuple(sorted(off)))


def _take_ahead(key: tuple, only: Ahead | None = None) -> Ahead | None:
    with _ahead_lock:
        if key in _ahead and (only is None or _ahead[key] is only):
            return _ahead.pop(key)
    return None


def start_ahead(inputs: list[AnalyzerInput], timeout: float = 60,
                disabled: set[str] | None = None) -> Ahead | None:
    """Start ``run_analyzers(inputs, timeout, disabled)`` now, in a thread, so the tools run
    while this process does other work (``manage.py review`` creates the run meanwhile); the
    first ``run_analyzers`` call of this process with the same arguments (the same inputs,
    the same tools turned off) takes that report instead of starting the tools again. None
    when there is nothing to analyze. Call ``close()`` on what it returns when done."""
    if not inputs:
        return None
    off = disabled_tools() if disabled is None else set(disabled)
    key = _ahead_key(inputs, timeout, off)
    with _ahead_lock:
        if key in _ahead:
            return _ahead[key]
        ahead = _ahead[key] = Ahead(key, list(inputs), timeout, off)
    return ahead


def with_key_formats(found: list[dict], evidence: list[dict]) -> list[dict]:
    """The analyzers' evidence joined with the key formats' (``secret_keys.scan_files``): one
    item per secret on a line (see ``secret_keys.combine`` and ``tools.secrets.dedupe``)."""
    from ..secret_keys import combine

    theirs = [e for e in evidence if e["tool"] == secrets_tool.NAME]
    rest = combine(found, [e for e in evidence if e["tool"] != secrets_tool.NAME])
    ours = [e for e in rest if e.get("category") == "security"
            and (e["tool"] == "secrets" or e.get("rule") in
                 ("B105", "B106", "B107", "S105", "S106", "S107"))]
    return rest + secrets_tool.dedupe(ours, theirs)
