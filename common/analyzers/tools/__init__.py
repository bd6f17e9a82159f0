"""The analyzers, one module each, and the registry the runner starts them from.

Each module declares a :class:`~.base.Tool`: its name, the Python package that installs its
binary (in the lock file), the kinds of file it reads (``..inputs.kind_of``: by extension,
``Dockerfile``, or a shell shebang), its command line and the parser of its JSON report
(with the table of how its results are graded). Adding an analyzer is adding a module and a
line in ``TOOLS``.
"""

from __future__ import annotations

from .base import Tool
from .docs import CODESPELL, PYMARKDOWN
from .hadolint import HADOLINT
from .oxlint import OXLINT
from .python import BANDIT, RUFF
from .secrets import DETECT_SECRETS
from .semgrep import SEMGREP
from .shellcheck import SHELLCHECK
from .yamllint import YAMLLINT
from .zizmor import ZIZMOR

TOOLS: tuple[Tool, ...] = (RUFF, BANDIT, SEMGREP, OXLINT, SHELLCHECK, HADOLINT, ZIZMOR,
                           YAMLLINT, CODESPELL, PYMARKDOWN, DETECT_SECRETS)
BY_NAME = {t.name: t for t in TOOLS}


def code_readers(kind: str) -> list[Tool]:
    """The analyzers that examine the code of a file of this kind (secrets scanners excluded)."""
    return [t for t in TOOLS if t.reads_code and kind in t.kinds]


__all__ = ["BY_NAME", "TOOLS", "Tool", "code_readers"]
