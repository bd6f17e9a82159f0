"""Fixes proven before they are offered (issue 16), part 1: turning a finding's suggestion into
a patched file and a unified diff, and applying such a diff again later.

A finding's suggestion is a fix only when it is code that replaces the finding's lines
(``line``..``end_line`` of the new file): one fenced block, or text whose every line looks like
code (:func:`reviews_app.hosting.render.suggestion_code`, the same test the pull-request
suggestion blocks use). Prose stays prose: no fix is offered for it.

Everything here is plain text work, no Django, no process: the suggestion is model output
(untrusted) and is only ever written into a file's text, never run. The checks that need
processes (analyzers, the test command) are in :mod:`.check` and :mod:`.testrun`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from common.secret_keys import mask

from ..hosting.render import suggestion_code

MAX_FIX_CHARS = 20_000       # a longer "fix" is not a fix of a few lines
MAX_FIX_LINES = 400
MAX_DIFF_CHARS = 60_000      # what is stored and shown of one fix's diff
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class FixDoesNotApply(ValueError):
    """The fix's diff does not apply to the file as it is; the message says where."""


@dataclass
class Patch:
    """One finding's fix: the patched new file and its unified diff against the reviewed
    file. ``start``..``stop`` are the new file's lines the fix wrote (1-based, inclusive;
    ``stop == start - 1`` when it only deleted lines)."""

    key: str
    path: str
    before: str
    after: str
    diff: str
    line: int
    end_line: int
    start: int
    stop: int


def fix_info(status: str, reason: str, *, diff: str = "", checks: list[dict] | None = None,
             **extra) -> dict:
    """The ``fix`` dict a finding carries (Finding.fix)."""
    return {"status": status, "diff": diff[:MAX_DIFF_CHARS], "reason": reason,
            "checks": list(checks or []), **extra}


def check(name: str, ok: bool | None, detail: str) -> dict:
    """One proof check; ``ok`` None means "not run" (the detail says why)."""
    return {"name": name, "ok": ok, "detail": detail}


def replacement(suggestion: str) -> str | None:
    """The code of a suggestion that replaces the finding's lines, or None for prose."""
    found = suggestion_code(suggestion or "")
    if not found or not found[0].strip():
        return None
    return found[0]


def _indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip(" \t"))]


def _reindent(new: list[str], old: list[str]) -> list[str]:
    """A model often writes the replacement flush left; put it back at the replaced lines'
    indentation (only then: an indented replacement is taken as written)."""
    body = [ln for ln in new if ln.strip()]
    first_old = next((ln for ln in old if ln.strip()), "")
    if not body or not _indent(first_old) or any(_indent(ln) for ln in body[:1]):
        return new
    pad = _indent(first_old)
    return [pad + ln if ln.strip() else ln for ln in new]


def unified_diff(path: str, before: str, after: str) -> str:
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    out = []
    for ln in difflib.unified_diff(a, b, fromfile=f"a/{path}", tofile=f"b/{path}", n=3):
        out.append(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n")
    return "".join(out)


def make_patch(finding: dict, content: str | None) -> tuple[Patch | None, dict]:
    """The patch for ``finding`` on the reviewed new file ``content``, or None with the fix
    dict that says why there is none (status "none": no code to apply; "not_proven": code
    that cannot be applied here)."""
    code = replacement(str(finding.get("suggestion") or ""))
    if code is None:
        return None, fix_info("none", "The suggestion is not code that replaces the finding's "
                                      "lines, so there is no fix to try.")
    line, end = finding.get("line"), finding.get("end_line")
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        return None, fix_info("not_proven", "Not proven: the finding names no line, so the "
                                            "suggested code has no place to go.")
    end = end if isinstance(end, int) and not isinstance(end, bool) and end >= line else line
    if content is None:
        return None, fix_info("not_proven", "Not proven: the full file is not available (the "
                                            "review had the diff only), so the fix could not "
                                            "be applied and checked.")
    if len(code) > MAX_FIX_CHARS or code.count("\n") >= MAX_FIX_LINES:
        return None, fix_info("not_proven", f"Not proven: the suggested code is longer than "
                                            f"{MAX_FIX_LINES} lines or {MAX_FIX_CHARS:,} "
                                            "characters.")
    lines = content.split("\n")
    trailing = content.endswith("\n")
    count = len(lines) - 1 if trailing else len(lines)
    if end > count:
        return None, fix_info("not_proven", f"Not proven: the fix replaces lines {line}-{end} "
                                            f"but the file has {count} line(s); it does not "
                                            "apply.", checks=[check("applies", False, "The "
                                            "lines it replaces are not in the file.")])
    old = lines[line - 1:end]
    new = _reindent(code.replace("\r\n", "\n").split("\n"), old)
    if new == old:
        return None, fix_info("none", "The suggested code is the same as the code already "
                                      "there, so there is nothing to apply.")
    after = "\n".join(lines[:line - 1] + new + lines[end:])
    path = str(finding.get("file") or "")
    patch = Patch(key=str(finding.get("key") or ""), path=path, before=content, after=after,
                  diff=unified_diff(path, content, after), line=line, end_line=end,
                  start=line, stop=line + len(new) - 1)
    return patch, {}


# --- applying a fix's diff again (when the accepted fixes are committed) ---------------------------
def _hunks(diff: str) -> list[tuple[int, list[tuple[str, str]]]]:
    """``(0-based old start, [(kind, text)])`` per hunk of a one-file unified diff."""
    out: list[tuple[int, list[tuple[str, str]]]] = []
    for row in diff.split("\n"):
        m = _HUNK.match(row)
        if m:
            out.append((int(m.group(1)) - (0 if m.group(2) == "0" else 1), []))
        elif out and row[:1] in (" ", "-", "+"):
            out[-1][1].append((row[:1], row[1:]))
    return out


def same(actual: str, want: str) -> bool:
    """A line of the file is the line the diff expects: equal, or equal once masked (a stored
    fix has its secrets masked, like everything stored; the file still has them)."""
    return actual == want or mask(actual) == want


def _find(lines: list[str], old: list[str], start: int, lowest: int) -> int | None:
    """Where ``old`` is in ``lines``: at ``start``, else the nearest place at or after
    ``lowest`` within MAX_OFFSET lines (an earlier fix in the same file moved it)."""
    def at(i: int) -> bool:
        return lowest <= i and i + len(old) <= len(lines) and \
            all(same(lines[i + j], want) for j, want in enumerate(old))

    for delta in range(MAX_OFFSET + 1):
        for i in (start + delta, start - delta):
            if at(i):
                return i
    return None


MAX_OFFSET = 300


def apply_diff(text: str, diff: str) -> str:
    """``text`` with the unified diff ``diff`` (one file, as :func:`unified_diff` makes it)
    applied; :class:`FixDoesNotApply` when the lines it removes or keeps are not there as
    they were (the file changed since the review, or another fix changed the same lines). A
    hunk whose lines moved (an earlier fix above it added or removed lines) still applies."""
    lines = text.split("\n")
    hunks = _hunks(diff)
    if not hunks:
        raise FixDoesNotApply("the fix has no change in it")
    out: list[str] = []
    pos = 0
    for start, rows in hunks:
        old = [t for k, t in rows if k in (" ", "-")]
        found = _find(lines, old, start, pos)
        if found is None:
            i = next((j for j, want in enumerate(old)
                      if start + j >= len(lines) or not same(lines[start + j], want)), 0)
            n = start + i
            shown = lines[n][:80] if 0 <= n < len(lines) else "(end of file)"
            want = old[i][:80] if old else ""
            raise FixDoesNotApply(f"line {n + 1} reads {shown!r} where the fix expects "
                                  f"{want!r} (the code changed since the review)")
        out += lines[pos:found]
        at = found
        for kind, body in rows:
            if kind == "+":
                out.append(body)
            else:
                if kind == " ":
                    out.append(lines[at])  # the file's own line, never the masked copy
                at += 1
        pos = at
    out += lines[pos:]
    return "\n".join(out)
