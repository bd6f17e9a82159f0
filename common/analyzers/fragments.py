"""The files written for the analyzers: one per whole file, and for a fragment (a file known
only by its diff hunks) its hunks made to parse.

A hunk usually starts inside an indented block and does not parse as a module, so:

* The fragment is split into segments of consecutive new-file lines (one per hunk).
* Each segment is dedented by its common margin. If its first line is still indented (the
  hunk starts deep and later dedents), ``if True:`` header lines are put above it, one per
  indentation level below the first line's, so the indentation stack is valid.
* If the segment still does not parse, a few lines at its start and end are blanked (kept as
  empty lines, so numbers do not move) until it parses: a hunk starting inside a string or a
  bracket, or ending after a ``def``/``if`` line whose body was cut off. Failing that, the
  line the parser stops at is blanked, a few times over. Blanked lines are not analyzed.
* The segments that parse are joined into one file ``f{i}.py`` (modules joined end to end
  still parse); a segment that still does not parse is analyzed on its own, as it is, in
  ``f{i}_{k}.py``, so it cannot hide the other hunks from bandit (which skips files it cannot
  parse) or from ruff (which then only runs its token-based rules on that file).

The only in-process use of the text is ``ast.parse`` (parsing, not compiling or running).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass

from .inputs import AnalyzerInput, suffix_for

_NAME_RE = re.compile(r"^f(\d+)(?:_(\d+))?\.[A-Za-z0-9]{1,10}$")
_MAX_BLANKED = 6          # lines blanked in total at a segment's ends to make it parse
_MAX_REPAIRS = 12         # lines blanked inside a segment to make it parse
_MAX_TRIES_CHARS = 400_000  # above this, a segment gets one parse attempt only
# Suppression comments of the change are untrusted (see the package notes): oxlint's and
# shellcheck's have no command-line switch to ignore them, so they are made plain comments
# in the files written for the tools (lines and columns do not move). semgrep and hadolint
# are told to ignore theirs (--disable-nosem, --disable-ignore-pragma).
_DIRECTIVES = re.compile(
    r"\b(eslint|oxlint)-(disable|enable)|(#\s*)shellcheck(\s+(?:disable|enable|source))")
# yamllint's ``# yamllint disable``, codespell's ``codespell:ignore`` and pymarkdown's
# ``<!-- pyml disable -->`` have no switch either: their keyword is broken the same way.
_OTHER_DIRECTIVES = re.compile(r"\b(yamllint)(\s+(?:disable|enable))|\b(codespell):(ignore)"
                               r"|\b(pyml)(\s+(?:disable|enable))", re.IGNORECASE)


def neutralize_directives(text: str) -> str:
    text = _DIRECTIVES.sub(lambda m: f"{m.group(1)}-ignored-{m.group(2)}" if m.group(1)
                           else f"{m.group(3)}(shellcheck){m.group(4)}", text)
    return _OTHER_DIRECTIVES.sub(
        lambda m: f"({m.group(1)}){m.group(2)}" if m.group(1)
        else f"({m.group(3)})-{m.group(4)}" if m.group(3) else f"({m.group(5)}){m.group(6)}",
        text)


@dataclass
class Unit:
    """One file written for the analyzers."""

    index: int                      # the input's index
    name: str                       # generated file name
    text: str
    line_map: dict[int, int] | None  # file line -> new-file line; None = identity
    fragment: bool


def file_order(name: str) -> tuple[int, ...]:
    """Sort key of a generated name: input order, the joined file before its lone segments."""
    m = _NAME_RE.match(name)
    if m is None:
        raise ValueError(f"not a generated file name: {name!r}")
    return tuple(int(x or -1) for x in m.groups())


def _parse_error(text: str) -> int | None:
    """None if the text parses as a module, else the failing line (0 if unknown)."""
    try:
        ast.parse(text)  # parsing only: nothing is compiled to bytecode or run
    except SyntaxError as exc:
        return exc.lineno or 0
    except Exception:  # noqa: BLE001 - ValueError (NUL bytes), RecursionError, MemoryError
        return 0
    return None


def _parses(text: str) -> bool:
    return _parse_error(text) is None


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _dedent(lines: list[str]) -> list[str]:
    margins = [_indent(ln) for ln in lines if ln.strip()]
    margin = os.path.commonprefix(margins) if margins else ""
    return [ln[len(margin):] if ln.strip() else "" for ln in lines]


def _headers(lines: list[str]) -> list[str]:
    """``if True:`` lines opening every indentation level below the first line's."""
    first = next((ln for ln in lines if ln.strip()), "")
    depth = len(_indent(first))
    if not depth:
        return []
    levels: dict[int, str] = {}
    for ln in lines:
        ind = _indent(ln)
        if ln.strip() and len(ind) < depth:
            levels.setdefault(len(ind), ind)
    levels.setdefault(0, "")
    return [levels[n] + "if True:" for n in sorted(levels)]


def _segment_lines(lines: list[str]) -> tuple[list[str], int, bool]:
    """A segment made parseable if possible: (file lines, header count, parses)."""
    base = _dedent(lines)
    n = len(base)
    attempts = [(0, 0)]
    if len("\n".join(base)) <= _MAX_TRIES_CHARS:
        attempts += [(s, k - s) for k in range(1, min(_MAX_BLANKED, n - 1) + 1)
                     for s in range(k + 1)]
    for start, end in attempts:
        body = [""] * start + base[start:n - end] + [""] * end
        heads = _headers(body)
        if _parses("\n".join(heads + body) + "\n"):
            return heads + body, len(heads), True
    # Broken inside (e.g. a bracket closed by the wrong character, or Python syntax newer
    # than ours): blank the line the parser stops at, a few times over.
    body = list(base)
    for _ in range(_MAX_REPAIRS if len(attempts) > 1 else 0):
        heads = _headers(body)
        failed = _parse_error("\n".join(heads + body) + "\n")
        if failed is None:
            return heads + body, len(heads), True
        at = failed - 1 - len(heads)
        if not 0 <= at < n or not body[at].strip():
            break
        body[at] = ""
    heads = _headers(base)
    return heads + base, len(heads), False


def units_for(index: int, inp: AnalyzerInput) -> list[Unit]:
    if inp.kind != "python":
        # The other languages' tools parse with error recovery (tree-sitter, oxc, shellcheck's
        # parser): a fragment is written as it is, its hunks one after the other, and the
        # parse errors of a cut fragment are dropped where its results are read.
        text = neutralize_directives(inp.text.replace("\r\n", "\n").replace("\r", " "))
        return [Unit(index, f"f{index}.{suffix_for(inp.kind, inp.path)}", text, inp.line_map,
                     not inp.full)]
    if inp.full:
        return [Unit(index, f"f{index}.py", inp.text, inp.line_map, False)]
    raw = inp.text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    # Lone carriage returns would count as line breaks for the analyzers and shift lines.
    raw = [ln.rstrip("\r").replace("\r", " ") for ln in raw]
    # Segments: runs of lines whose new-file numbers follow each other (one per hunk).
    segments: list[list[tuple[str, int | None]]] = []
    prev: int | None = None
    for i, text in enumerate(raw, start=1):
        new = i if inp.line_map is None else inp.line_map.get(i)
        if not segments or new is None or prev is None or new != prev + 1:
            segments.append([])
        segments[-1].append((text, new))
        prev = new
    good_lines: list[str] = []
    good_map: dict[int, int] = {}
    units: list[Unit] = []
    for k, seg in enumerate(segments):
        lines, heads, ok = _segment_lines([t for t, _ in seg])
        if ok:
            offset = len(good_lines) + heads
            good_lines += lines
            good_map.update({offset + j: new for j, (_, new) in enumerate(seg, start=1)
                             if new is not None})
        else:
            units.append(Unit(index, f"f{index}_{k}.py", "\n".join(lines) + "\n",
                               {heads + j: new for j, (_, new) in enumerate(seg, start=1)
                                if new is not None}, True))
    if good_lines:
        text = "\n".join(good_lines) + "\n"
        if _parses(text):
            units.insert(0, Unit(index, f"f{index}.py", text, good_map, True))
        else:  # should not happen; analyze the parseable segments one by one then
            return _split_units(index, inp, segments)
    return units


def _split_units(index: int, inp: AnalyzerInput,
                 segments: list[list[tuple[str, int | None]]]) -> list[Unit]:
    units = []
    for k, seg in enumerate(segments):
        lines, heads, _ = _segment_lines([t for t, _ in seg])
        units.append(Unit(index, f"f{index}_{k}.py", "\n".join(lines) + "\n",
                           {heads + j: new for j, (_, new) in enumerate(seg, start=1)
                            if new is not None}, True))
    return units
