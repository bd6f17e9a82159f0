"""What every analyzer module of this package declares (:class:`Tool`), and the helpers their
parsers share: finding the generated file a result names, mapping its lines back to the new
file, and building one evidence item (see ``..evidence``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..evidence import _evidence, _mapper
from ..fragments import Unit
from ..inputs import AnalyzerInput

# parse(data, units, inputs, errors) -> evidence items; ``data`` is the tool's decoded JSON.
Parser = Callable[[Any, dict[str, Unit], list[AnalyzerInput], list[str]], list[dict]]
# command(exe, names, workdir) -> argument list; ``workdir`` holds the tool's private files
# (its HOME, config we write); ``names`` are the generated file names it reads.
Command = Callable[[str, list[str], Path], list[str]]


@dataclass(frozen=True)
class WarmStart:
    """How a Python tool is started ahead of its arguments (``common.prewarm``): the modules
    its interpreter imports meanwhile, the program it then runs (our constant text), and its
    ``sys.argv`` from the argument list ``Tool.command`` gave (None: that form of the
    command is started as usual)."""

    imports: tuple[str, ...]
    code: str
    argv: Callable[[list[str]], list[str] | None]


@dataclass(frozen=True)
class Tool:
    name: str                       # shown in the report, the coverage and the evidence
    package: str                    # the Python distribution that installs it (its version)
    kinds: frozenset[str]           # the input kinds it reads (``inputs.KINDS``)
    command: Command
    parse: Parser
    ok_codes: tuple[int, ...] = (0, 1)   # exit codes of a run that reported normally
    reads_code: bool = True         # False: a secrets scanner, which does not examine code
    private_home: bool = False      # HOME/XDG dirs in the run's temporary directory
    env: dict[str, str] = field(default_factory=dict)
    about: str = ""                 # one line for the README and the stage description
    # When set, the tool reads its own copy of each file with only the lines the change adds
    # that pass this test (with a line map back to the new file): a secrets scanner needs no
    # more, and reading every line of every file costs detect-secrets seconds.
    keep_line: Callable[[str], bool] | None = None
    warm: WarmStart | None = None   # startable ahead of its arguments (common/prewarm.py)
    # How its report is read: None for JSON, else a function of the text (a tool that prints
    # one line per result); with ``quiet_ok`` no output at all is a report of nothing found.
    decode: Callable[[str], Any] | None = None
    quiet_ok: bool = False


def unit_for(units: dict[str, Unit], filename: object) -> Unit | None:
    """The generated file a tool's result names (only the base name counts: the tools run in
    our temporary directory and see nothing else)."""
    return units.get(Path(str(filename or "")).name)


def item(unit: Unit, inputs: list[AnalyzerInput], *, tool: str, rule: str, category: str,
         severity: str, confidence: float, line: object, end: object, message: str,
         url: str | None = None, tool_fix: str | None = None) -> dict | None:
    """One evidence item with its lines mapped to the new file; None when the result sits on
    a line the fragment does not have."""
    to_new = _mapper(unit)
    first = to_new(line)
    if first is None:
        return None
    last = to_new(end) or first
    return _evidence(unit, inputs[unit.index], tool=tool, rule=rule, category=category,
                     severity=severity, confidence=confidence, line=first, end=last,
                     message=message, url=url, tool_fix=tool_fix)
