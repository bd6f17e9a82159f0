"""Analyzers started while a command loads (``manage.py review``). bandit and detect-secrets
each spend a quarter to a third of a second on their interpreter and imports before they read
a file, and that start was the end of the review's critical path. ``start`` runs each tool
that can be started ahead (``Tool.warm``) as a ``proc.Warm``, in the environment the runner
would give it; the runner takes it with ``take`` instead of starting the tool; whatever was not
taken is stopped at exit. ``manage.py`` calls this before Django loads (the analyzers import
no Django)."""

from __future__ import annotations

import atexit
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from . import proc

_started: dict[str, proc.Warm] = {}
_homes: list[str] = []
_lock = threading.Lock()
_registered = False


def _ours(exe: str | None) -> bool:
    """The tool of this environment (another installation on PATH starts as usual)."""
    return exe is not None and Path(exe).parent == Path(sys.executable).parent


def start(*names: str) -> None:
    """Start each named tool ahead, unless it is turned off, cannot be, or is not installed
    next to this Python."""
    global _registered
    from .analyzers.runner import disabled_tools, find_tool, private_dirs
    from .analyzers.tools import TOOLS

    with _lock:
        if not _registered:
            atexit.register(close)
            _registered = True
    off = disabled_tools()
    for tool in TOOLS:
        if tool.name not in names or tool.warm is None or tool.name in off:
            continue
        if not _ours(find_tool(tool.name)):
            continue
        with _lock:
            if tool.name in _started:
                continue
            env, home = dict(tool.env), None
            if tool.private_home:  # a directory of its own, as the runner gives it one
                home = tempfile.mkdtemp(prefix=f"quorum-{tool.name}-")
                _homes.append(home)
                env.update(private_dirs(Path(home)))
            try:
                _started[tool.name] = proc.Warm(tool.warm.imports, tool.warm.code, env=env or None,
                                                home=home, owns=home or "")
            except OSError:
                continue


# A file's new name in a diff's headers: ``+++ b/path`` or ``diff --git a/… b/path``.
_DIFF_NAME = re.compile(rb"^(?:\+\+\+ (?:b/)?|diff --git \S+ b/)(\S+)", re.MULTILINE)
PEEK_LIMIT = 20_000_000  # a larger diff file is not read twice: both tools start


def for_review(args: list[str]) -> None:
    """Start what ``manage.py review args`` will run: detect-secrets reads every file, bandit
    only Python files, so bandit starts only when the diff file given names one (starting it
    for nothing costs a change of other languages a tenth of a second on two cores). When the
    change is no file here (stdin, a git range, a pull request) both start."""
    from .analyzers.inputs import kind_of

    names: set[str] = set()
    given = False
    for arg in args:
        path = Path(arg)
        if arg.startswith("-") or not path.is_file():
            continue
        try:
            if path.stat().st_size > PEEK_LIMIT:
                return start("bandit", "detect-secrets")
            found = _DIFF_NAME.findall(path.read_bytes())
        except OSError:
            continue
        if found:
            given = True
            names.update(n.decode("utf-8", "replace") for n in found)
    python = not given or any(kind_of(name) == "python" for name in names)
    start(*(["bandit"] if python else []), "detect-secrets")


def take(name: str, exe: str) -> proc.Warm | None:
    """The tool ``name`` started ahead, for a run of ``exe``; None when there is none."""
    if not _ours(exe):
        return None
    with _lock:
        return _started.pop(name, None)


def close() -> None:
    """Stop what was never taken and remove the directories given to private-home tools."""
    with _lock:
        left = list(_started.values())
        _started.clear()
        homes = list(_homes)
        _homes.clear()
    for warm in left:
        warm.close()
    for home in homes:
        shutil.rmtree(home, ignore_errors=True)
