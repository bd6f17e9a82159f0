"""A finding's fingerprint: the same problem at the same code has the same fingerprint in
every review, whatever the line numbers or the model's wording.

It is made of the file path, the category, what the finding rests on (its analyzer rule ids;
else its category alone) and the code it points at with whitespace collapsed. So a push that
moves the code keeps the fingerprint, and a push that changes the code gives a new one: a
rejected finding is not raised again for the same code, and a re-run never re-posts a
comment it already posted. Without the code (a line the change did not show) the title
stands in for it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

_SPACE = re.compile(r"\s+")
MAX_LINES = 20

CodeAt = Callable[[str, int | None, int | None], str | None]


def _code_key(code: str) -> str:
    lines = [_SPACE.sub(" ", ln).strip() for ln in code.split("\n")[:MAX_LINES]]
    return "\n".join(ln for ln in lines if ln)


def fingerprint(finding: dict, code: str | None) -> str:
    rules = ",".join(sorted({str(r) for r in finding.get("rules") or ()}))
    anchor = _code_key(code) if code and code.strip() else \
        "title:" + _SPACE.sub(" ", str(finding.get("title") or "")).strip().lower()
    parts = [str(finding.get("file") or ""), str(finding.get("category") or ""), rules, anchor]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "replace")).hexdigest()[:40]


def stamp(findings: list[dict], code_at: CodeAt) -> None:
    """Give every finding its fingerprint (in place)."""
    for f in findings:
        f["fingerprint"] = fingerprint(f, code_at(f.get("file") or "", f.get("line"),
                                                  f.get("end_line")))
