"""Allowlisted commands in a workspace: checked argument lists, run through :mod:`common.proc`
(no shell, a scrubbed environment with a throwaway ``HOME``, a time limit that kills the whole
process group, output capped to its head and tail)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import proc

from .paths import ToolError, has_dotdot, looks_absolute


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: int | None  # None when the command was stopped for taking too long
    output: str  # stdout and stderr merged; head and tail only when ``truncated``
    timed_out: bool
    seconds: float
    truncated: bool


def check_command(argv: list[str], allowlist: list[list[str]]) -> list[str]:
    """Validate ``argv`` against ``allowlist`` (exact prefixes); returns the argv. Arguments
    after the prefix may not be absolute paths or contain ``..``."""
    if not isinstance(argv, list | tuple) or not argv:
        raise ToolError("The command must be a non-empty list of strings")
    for arg in argv:
        if not isinstance(arg, str):
            raise ToolError("Every command argument must be a string")
        if "\0" in arg:
            raise ToolError("Refused: a command argument contains a NUL byte")
    argv = list(argv)
    allowed = ["[" + ", ".join(repr(a) for a in prefix) + "]" for prefix in allowlist]
    prefix = next((p for p in allowlist
                   if p and len(argv) >= len(p) and argv[: len(p)] == list(p)), None)
    if prefix is None:
        raise ToolError(f"Command not allowed: {argv!r}. Allowed: {', '.join(allowed) or 'none'}"
                        " (optionally followed by more arguments)")
    for arg in argv[len(prefix):]:
        values = [arg]
        if arg.startswith("-") and "=" in arg:
            values.append(arg.split("=", 1)[1])
        for value in values:
            if looks_absolute(value) or has_dotdot(value):
                raise ToolError(f"Refused: argument {arg!r} points outside the repository "
                                "(absolute paths and '..' are not allowed)")
    return argv


def _output(result: proc.Result, total: int) -> str:
    """The output as text: all of it, or its head and tail around a note of what was left
    out (``total`` bytes were printed)."""
    head, tail = result.stdout, result.stdout_tail
    if not result.truncated:
        return (head + tail).decode("utf-8", "replace")
    omitted = total - len(head) - len(tail)
    return (f"{head.decode('utf-8', 'replace')}\n[... {omitted} bytes of output omitted ...]\n"
            f"{tail.decode('utf-8', 'replace')}")


def run_command(root: Path, argv: list[str], *, allowlist: list[list[str]],
                timeout: float = 120, max_output: int = 20_000,
                env: dict | None = None) -> CommandResult:
    """Run an allowlisted command in ``root`` without a shell; stdout and stderr are merged
    and only the first and last ``max_output // 2`` bytes are kept."""
    argv = check_command(argv, allowlist)
    half = max(max_output // 2, 1)
    home = tempfile.mkdtemp(prefix="quorum-home-")
    try:
        try:
            child = proc.start(argv, cwd=root, env=env, home=home, merge_stderr=True,
                               limit=half, tail=half)
        except FileNotFoundError:
            raise ToolError(f"Command not found: {argv[0]!r}") from None
        except PermissionError:
            raise ToolError(f"Command is not executable: {argv[0]!r}") from None
        result = child.wait(timeout)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return CommandResult(argv=argv, exit_code=result.returncode, output=_output(result, child.out.total),
                         timed_out=result.timed_out, seconds=result.seconds,
                         truncated=result.truncated)
