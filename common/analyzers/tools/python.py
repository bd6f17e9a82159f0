"""ruff and bandit, the Python analyzers (their rule policy is in ``..rules``, their JSON is
read by ``..evidence``)."""

from __future__ import annotations

from pathlib import Path

from ..evidence import from_bandit, from_ruff
from ..rules import IGNORE_SUPPRESSIONS, RUFF_IGNORE, RUFF_SELECT, RUFF_TARGET
from .base import Tool, WarmStart


def _ruff_cmd(exe: str, names: list[str], work: Path) -> list[str]:
    cmd = [exe, "check", "--no-cache", "--isolated", "--output-format", "json",
           "--select", RUFF_SELECT, "--ignore", RUFF_IGNORE, "--target-version", RUFF_TARGET,
           "--exit-zero"]
    if IGNORE_SUPPRESSIONS:
        cmd.append("--ignore-noqa")
    return [*cmd, "--", *names]


def _bandit_cmd(exe: str, names: list[str], work: Path) -> list[str]:
    cmd = [exe, "-f", "json", "-q"]
    if IGNORE_SUPPRESSIONS:
        cmd.append("--ignore-nosec")
    return [*cmd, *names]


RUFF = Tool(name="ruff", package="ruff", kinds=frozenset({"python"}), command=_ruff_cmd,
            parse=lambda data, units, inputs, errors: from_ruff(data, units, inputs),
            about="Python: pyflakes, bugbear, flake8-bandit and style rules")
BANDIT = Tool(name="bandit", package="bandit", kinds=frozenset({"python"}),
              command=_bandit_cmd, parse=from_bandit,
              about="Python: security checks",
              # its console script: ``sys.argv`` is the command as it is
              warm=WarmStart(("bandit.cli.main",),
                             "import sys\nfrom bandit.cli.main import main\nsys.exit(main())\n",
                             list))
