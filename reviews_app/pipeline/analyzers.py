"""Static analysis of a change's Python files: ruff and bandit results as reviewer evidence.

The code under review is untrusted. It is never imported or executed: each input is written
to a fresh temporary directory under a generated name (``f0.py``, ``f1.py``, ...; never the
path from the change) and ruff and bandit read those files as subprocesses (argument lists,
no shell, one timeout). The only in-process use of the text is ``ast.parse`` (parsing, not
compiling or running) to choose how to cut diff fragments.

Fragments (a file known only by its diff hunks) get special care, because a hunk usually
starts inside an indented block and does not parse as a module:

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
* Results on a fragment's synthetic lines, syntax errors, and rules that only make sense
  with the whole file (undefined or unused names, import position, ``return`` outside a
  function, ...) are dropped for fragments: they are artefacts of cutting the file.

``# noqa`` and ``# nosec`` comments are ignored (``IGNORE_SUPPRESSIONS``): a suppression
comment is itself part of the untrusted change, and reviewers should see what it hides.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess  # noqa: S404 # nosec B404
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .secret_keys import mask

__all__ = ["AnalyzerInput", "AnalyzerReport", "for_category", "input_from_file",
           "run_analyzers", "suggestion_for"]

IGNORE_SUPPRESSIONS = True

RUFF_SELECT = "S,B,BLE,C90,TRY,E,W,N,F,SIM,UP"
# Ignored everywhere: E501 (line length is the project's formatter's business), W291/W293
# (trailing whitespace: invisible and noisy), W391 (blank line at end of file) and TRY003
# (a message built at the raise site, which nearly all Python code does). Rules that are
# artefacts of analyzing a fragment (undefined/unused names, import position, ...) are not
# ignored here, because for whole files they are real findings; they are dropped for fragments
# only, see ``_FRAGMENT_ARTEFACTS``.
RUFF_IGNORE = "E501,W291,W293,W391,TRY003"
RUFF_TARGET = "py311"

# Rules that a cut-out fragment triggers by construction: names defined or used outside the
# hunk (F401, F811, F821-F823, F841), imports below other code (E402), a late __future__ import
# (F404), return/yield/break/continue outside their function or loop (F701-F706), no newline
# at the end (W292).
_FRAGMENT_ARTEFACTS = frozenset({"F401", "F404", "F701", "F702", "F704", "F706", "F811",
                                 "F821", "F822", "F823", "F841", "E402", "W292"})

_SYNTAX_RULE = "E999"
_SYNTAX_CODES = frozenset({"E999", "invalid-syntax", "syntax-error", ""})

# Bandit tests that become "critical" when bandit rates them HIGH severity and HIGH confidence:
# shell commands, exec, eval, pickle and yaml.load.
_CRITICAL_BANDIT = frozenset({"B602", "B605", "B307", "B301", "B506", "B102"})

_BANDIT_SEVERITY = {"HIGH": "high", "MEDIUM": "medium", "LOW": "low"}
_BANDIT_CONFIDENCE = {"HIGH": 0.9, "MEDIUM": 0.7, "LOW": 0.5}

# Category and severity of each analyzer rule, deliberately: rule or rule prefix ->
# (category, severity); the longest key that the rule starts with wins (``F541`` before
# ``F``). The policy:
# * security (flake8-bandit ``S``): injection and code execution high, the rest medium;
#   hard-coded passwords (S105-S107) medium, a "possible secret" of no known format (a
#   provider key of a known format is found, critical or high, by ``secret_keys``);
#   habits that are only risky in some places (assert, random, subprocess without a
#   shell, importing subprocess or pickle) low or info.
# * architecture: likely bugs (pyflakes ``F``, bugbear ``B``) medium; unused names and
#   broad or verbose exception handling low; a whole file's syntax error high.
# * style: formatting, naming, simplifications, modern syntax and f-string nits are low.
#   They never decide a verdict (see ``synthesis.verdict_findings``).
RUFF_RULES: dict[str, tuple[str, str]] = {
    "S": ("security", "medium"),
    "S102": ("security", "high"), "S307": ("security", "high"),
    "S602": ("security", "high"), "S604": ("security", "high"), "S605": ("security", "high"),
    "S301": ("security", "high"), "S506": ("security", "high"), "S608": ("security", "high"),
    "S105": ("security", "medium"), "S106": ("security", "medium"),
    "S107": ("security", "medium"),
    "S101": ("security", "info"),
    "S110": ("security", "low"), "S112": ("security", "low"), "S311": ("security", "low"),
    "S603": ("security", "low"), "S607": ("security", "low"), "S403": ("security", "low"),
    "S404": ("security", "low"),
    "B": ("architecture", "medium"),
    "BLE": ("architecture", "low"), "TRY": ("architecture", "low"),
    "C90": ("architecture", "low"),
    "F": ("architecture", "medium"),
    "F401": ("architecture", "low"), "F811": ("architecture", "low"),
    "F841": ("architecture", "low"),
    "F5": ("style", "low"),  # %-format and str.format nits; F541: f-string without fields
    "E999": ("architecture", "high"), "E9": ("architecture", "high"),
    "E": ("style", "low"), "W": ("style", "low"), "N": ("style", "low"),
    "SIM": ("style", "low"), "UP": ("style", "low"),
}
# Rules of F5 that are real bugs rather than nits (a format string and its arguments that
# do not match raise at run time).
RUFF_RULES.update(dict.fromkeys(("F501", "F502", "F503", "F504", "F505", "F506", "F507",
                                 "F508", "F509", "F521", "F522", "F523", "F524", "F525"),
                                ("architecture", "medium")))

# Bandit's own severity stands, except where the policy above says otherwise.
BANDIT_RULES: dict[str, tuple[str, str]] = {
    "B105": ("security", "medium"), "B106": ("security", "medium"),
    "B107": ("security", "medium"),
    "B101": ("security", "info"),
    "B403": ("security", "low"), "B404": ("security", "low"),
}


def rule_policy(table: dict[str, tuple[str, str]], rule: str) -> tuple[str, str] | None:
    """(category, severity) of the longest key in ``table`` that ``rule`` starts with."""
    for n in range(len(rule), 0, -1):
        if rule[:n] in table:
            return table[rule[:n]]
    return None


_RULE_RE = re.compile(r"^([A-Z]+)(\d+)$")
_NAME_RE = re.compile(r"^f(\d+)(?:_(\d+))?\.py$")
_MAX_BLANKED = 6          # lines blanked in total at a segment's ends to make it parse
_MAX_REPAIRS = 12         # lines blanked inside a segment to make it parse
_MAX_TRIES_CHARS = 400_000  # above this, a segment gets one parse attempt only


@dataclass
class AnalyzerInput:
    path: str                                   # display only; never a filesystem path
    text: str                                   # Python source to analyze
    line_map: dict[int, int] | None = None      # analyzed line -> new-file line; None = identity
    full: bool = True                           # True when text is the whole new file
    changed_lines: set[int] | None = None       # new-file lines the change adds; None = all


@dataclass
class AnalyzerReport:
    evidence: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tools: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


# --- input ---------------------------------------------------------------------------------------
def input_from_file(file: dict) -> AnalyzerInput | None:
    """The analyzer input for one file of the diff parser, or None (not Python, or no new code).

    With the new content, the whole file is analyzed; otherwise the new side (context and
    added lines) of its hunks, in order, with a map from fragment line to new-file line.
    """
    if not file.get("is_python"):
        return None
    path = str(file.get("path") or "")
    hunks = file.get("hunks") or []
    changed = {ln["new"] for h in hunks for ln in h.get("lines") or []
               if ln.get("kind") == "add" and isinstance(ln.get("new"), int)}
    content = file.get("content")
    if content is not None:
        if not content.strip():
            return None
        return AnalyzerInput(path=path, text=content, line_map=None, full=True,
                             changed_lines=changed)
    texts: list[str] = []
    line_map: dict[int, int] = {}
    for h in hunks:
        for ln in h.get("lines") or []:
            if ln.get("kind") in ("add", "ctx") and isinstance(ln.get("new"), int):
                texts.append(str(ln.get("text") or "").rstrip("\r\n"))
                line_map[len(texts)] = ln["new"]
    if not any(t.strip() for t in texts):
        return None
    return AnalyzerInput(path=path, text="\n".join(texts) + "\n", line_map=line_map,
                         full=False, changed_lines=changed)


# --- preparing the files -------------------------------------------------------------------------
@dataclass
class _Unit:
    """One file written for the analyzers."""

    index: int                      # the input's index
    name: str                       # generated file name
    text: str
    line_map: dict[int, int] | None  # file line -> new-file line; None = identity
    fragment: bool


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


def _units(index: int, inp: AnalyzerInput) -> list[_Unit]:
    if inp.full:
        return [_Unit(index, f"f{index}.py", inp.text, inp.line_map, False)]
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
    units: list[_Unit] = []
    for k, seg in enumerate(segments):
        lines, heads, ok = _segment_lines([t for t, _ in seg])
        if ok:
            offset = len(good_lines) + heads
            good_lines += lines
            good_map.update({offset + j: new for j, (_, new) in enumerate(seg, start=1)
                             if new is not None})
        else:
            units.append(_Unit(index, f"f{index}_{k}.py", "\n".join(lines) + "\n",
                               {heads + j: new for j, (_, new) in enumerate(seg, start=1)
                                if new is not None}, True))
    if good_lines:
        text = "\n".join(good_lines) + "\n"
        if _parses(text):
            units.insert(0, _Unit(index, f"f{index}.py", text, good_map, True))
        else:  # should not happen; analyze the parseable segments one by one then
            return _split_units(index, inp, segments)
    return units


def _split_units(index: int, inp: AnalyzerInput,
                 segments: list[list[tuple[str, int | None]]]) -> list[_Unit]:
    units = []
    for k, seg in enumerate(segments):
        lines, heads, _ = _segment_lines([t for t, _ in seg])
        units.append(_Unit(index, f"f{index}_{k}.py", "\n".join(lines) + "\n",
                           {heads + j: new for j, (_, new) in enumerate(seg, start=1)
                            if new is not None}, True))
    return units


# --- running the tools ---------------------------------------------------------------------------
def _find_tool(name: str) -> str | None:
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
    proc: subprocess.Popen | None = None
    out: Path | None = None
    err: Path | None = None
    version_proc: subprocess.Popen | None = None
    exe: str = ""
    error: str | None = None
    stdout: str = ""


def _start(tool: str, cmd_for, names: list[str], src: Path, out_dir: Path) -> _Run:
    run = _Run(tool)
    exe = _find_tool(tool)
    if not exe:
        run.error = f"{tool} is not installed (not next to {sys.executable} nor on PATH); " \
                    f"its checks were skipped."
        return run
    run.exe = exe
    run.out, run.err = out_dir / f"{tool}.out", out_dir / f"{tool}.err"
    try:
        with open(run.out, "wb") as out, open(run.err, "wb") as err:
            # Fixed argument list, no shell; the only variable parts are generated names.
            run.proc = subprocess.Popen(  # noqa: S603 # nosec B603
                cmd_for(exe, names), cwd=src,
                stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    except OSError as exc:
        run.error = f"{tool} could not be started ({exe}): {exc.strerror or exc}; " \
                    f"its checks were skipped."
        return run
    if exe not in _VERSIONS and Path(exe).parent == Path(sys.executable).parent:
        # The tool of this environment: its package metadata names the version, which is
        # much cheaper than starting bandit a second time.
        with contextlib.suppress(Exception):
            _VERSIONS[exe] = importlib.metadata.version(tool)
    if exe not in _VERSIONS:
        with contextlib.suppress(OSError):
            run.version_proc = subprocess.Popen(  # noqa: S603 # nosec B603
                [exe, "--version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL)
    return run


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _finish(run: _Run, deadline: float, timeout: float) -> None:
    if run.proc is None:
        return
    try:
        code = run.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill(run.proc)
        if run.version_proc is not None:
            _kill(run.version_proc)
        run.error = f"{run.tool} timed out after {timeout:g} s and was stopped; " \
                    f"its results are missing."
        return
    run.stdout = run.out.read_text("utf-8", "replace") if run.out else ""
    stderr = run.err.read_text("utf-8", "replace").strip() if run.err else ""
    bad_exit = code not in (0, 1)  # bandit exits 1 when it found something
    if bad_exit or not run.stdout.strip():
        detail = stderr.splitlines()[-1] if stderr else "no output"
        run.error = f"{run.tool} failed (exit code {code}): {detail[:300]}"
    if run.version_proc is not None:
        try:
            out, _ = run.version_proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            first = out.decode("utf-8", "replace").strip().splitlines()
            if first and first[0].split():
                _VERSIONS[run.exe] = first[0].split()[-1]
        except subprocess.TimeoutExpired:
            _kill(run.version_proc)


def _load_json(run: _Run, errors: list[str]):
    if run.error:
        errors.append(run.error)
    if run.proc is None or not run.stdout.strip():
        return None
    try:
        return json.loads(run.stdout)
    except ValueError:
        if not run.error:
            errors.append(f"{run.tool} printed output that is not JSON; its results are "
                          f"missing.")
        return None


# --- turning results into evidence ---------------------------------------------------------------
def _rule_parts(rule: str) -> tuple[str, str]:
    m = _RULE_RE.match(rule or "")
    return (m.group(1), m.group(2)) if m else (rule or "", "")


def _is_bugbear(rule: str) -> bool:
    """flake8-bugbear codes (B0xx, B9xx) share the B prefix with bandit's (B1xx-B7xx)."""
    prefix, num = _rule_parts(rule)
    return prefix == "B" and bool(num) and not 100 <= int(num) < 900


def _ruff_policy(rule: str) -> tuple[str, str]:
    if rule == _SYNTAX_RULE:
        return RUFF_RULES[_SYNTAX_RULE]
    return rule_policy(RUFF_RULES, rule) or ("style", "low")


def _changed(inp: AnalyzerInput, line: int | None, end: int | None) -> bool:
    if inp.changed_lines is None:
        return True
    if line is None:
        return False
    return any(n in inp.changed_lines for n in range(line, max(line, end or line) + 1))


def _mapper(unit: _Unit):
    def to_new(n) -> int | None:
        if not isinstance(n, int):
            return None
        if unit.line_map is None:
            return n
        return unit.line_map.get(n)
    return to_new


def _evidence(unit: _Unit, inp: AnalyzerInput, *, tool: str, rule: str, category: str,
              severity: str, confidence: float, line: int | None, end: int | None,
              message: str, url: str | None, tool_fix: str | None = None) -> dict:
    if end is not None and line is not None and end < line:
        end = line
    return {"tool": tool, "rule": rule, "category": category, "severity": severity,
            "confidence": confidence, "file": inp.path, "line": line,
            "end_line": end if end is not None else line,
            # bandit quotes the value it flags ("hardcoded password: '...'"): never whole.
            "message": mask(message), "url": url or "",
            "on_changed_line": _changed(inp, line, end),
            "tool_fix": mask(tool_fix) if tool_fix else tool_fix}


def _from_ruff(data, units: dict[str, _Unit], inputs: list[AnalyzerInput]) -> list[dict]:
    out: list[dict] = []
    syntax_seen: set[str] = set()
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        unit = units.get(Path(str(item.get("filename") or "")).name)
        if unit is None:
            continue
        code = str(item.get("code") or "")
        message = str(item.get("message") or "")
        syntax = code in _SYNTAX_CODES or (not _RULE_RE.match(code)
                                           and "syntax" in (message + code).lower())
        if syntax and "syntax was added in python" in message.lower():
            continue  # valid on a newer Python than --target-version: not an error we know of
        if syntax:
            # A fragment's syntax errors come from cutting it out; a whole file's is real,
            # reported once (the parser's follow-up errors add nothing).
            if unit.fragment or unit.name in syntax_seen:
                continue
            syntax_seen.add(unit.name)
            code, message = _SYNTAX_RULE, f"SyntaxError: {message}"
        if unit.fragment and code in _FRAGMENT_ARTEFACTS:
            continue
        to_new = _mapper(unit)
        line = to_new((item.get("location") or {}).get("row"))
        if line is None:
            continue  # a synthetic line of a fragment
        end = to_new((item.get("end_location") or {}).get("row")) or line
        fix = item.get("fix") if isinstance(item.get("fix"), dict) else {}
        prefix, _ = _rule_parts(code)
        out.append(_evidence(
            unit, inputs[unit.index], tool="ruff", rule=code, category=_ruff_policy(code)[0],
            severity=_ruff_policy(code)[1],
            confidence=0.8 if prefix in ("S", "B", "F") or code == _SYNTAX_RULE else 0.7,
            line=line, end=end, message=message, url=item.get("url"),
            tool_fix=(fix or {}).get("message") or None))
    return out


def _from_bandit(data, units: dict[str, _Unit], inputs: list[AnalyzerInput],
                 errors: list[str]) -> list[dict]:
    out: list[dict] = []
    if not isinstance(data, dict):
        return out
    for err in data.get("errors") or []:
        unit = units.get(Path(str((err or {}).get("filename") or "")).name)
        # Fragments that do not parse are expected (see the module notes); a whole file that
        # bandit cannot read has not been security-checked by it, which reviewers should know.
        if unit is not None and not unit.fragment:
            errors.append(f"bandit skipped {inputs[unit.index].path}: "
                          f"{(err or {}).get('reason') or 'it could not be parsed'}.")
    for item in data.get("results") or []:
        if not isinstance(item, dict):
            continue
        unit = units.get(Path(str(item.get("filename") or "")).name)
        if unit is None:
            continue
        to_new = _mapper(unit)
        line = to_new(item.get("line_number"))
        if line is None:
            continue
        ends = [to_new(n) for n in item.get("line_range") or []]
        end = max([n for n in ends if n is not None] or [line])
        rule = str(item.get("test_id") or "")
        sev = str(item.get("issue_severity") or "").upper()
        conf = str(item.get("issue_confidence") or "").upper()
        category, severity = rule_policy(BANDIT_RULES, rule) or (
            "security", _BANDIT_SEVERITY.get(sev, "low"))
        if rule in _CRITICAL_BANDIT and sev == "HIGH" and conf == "HIGH":
            severity = "critical"
        out.append(_evidence(
            unit, inputs[unit.index], tool="bandit", rule=rule, category=category,
            severity=severity, confidence=_BANDIT_CONFIDENCE.get(conf, 0.5), line=line,
            end=end, message=str(item.get("issue_text") or ""), url=item.get("more_info")))
    return out


_SEVERITY_ORDER = ("critical", "high", "medium", "low", "info")


def _merge(ruff: list[dict], bandit: list[dict]) -> list[dict]:
    """One item per finding that both tools report (ruff S123 is bandit's B123): bandit's
    text and link, the stronger of the two severities, marked ``bandit+ruff``."""
    kept = []
    for r in ruff:
        prefix, num = _rule_parts(r["rule"])
        twin = None
        if prefix == "S":
            for b in bandit:
                if (b["file"] == r["file"] and b["rule"] == f"B{num}"
                        and b["line"] <= (r["end_line"] or r["line"])
                        and r["line"] <= (b["end_line"] or b["line"])
                        and b["tool"] == "bandit"):
                    twin = b
                    break
        if twin is None:
            kept.append(r)
            continue
        twin["tool"] = "bandit+ruff"
        # Bandit grades some injection risks (SQL built with %, eval) only medium; ruff's
        # table rates them high. Keep the stronger grade: the reviewers may downgrade it.
        if _SEVERITY_ORDER.index(r["severity"]) < _SEVERITY_ORDER.index(twin["severity"]):
            twin["severity"] = r["severity"]
        twin["confidence"] = max(twin["confidence"], r["confidence"])
        twin["on_changed_line"] = twin["on_changed_line"] or r["on_changed_line"]
        twin["tool_fix"] = twin["tool_fix"] or r["tool_fix"]
    return kept + bandit


def run_analyzers(inputs: list[AnalyzerInput], timeout: float = 60) -> AnalyzerReport:
    """Run one ruff and one bandit process, concurrently, over all inputs; never raises for
    a missing, failing or slow tool (see ``errors``)."""
    started = time.monotonic()
    report = AnalyzerReport()
    if not inputs:
        return report
    with tempfile.TemporaryDirectory(prefix="review-analyzers-") as tmp:
        src, out_dir = Path(tmp) / "src", Path(tmp) / "out"
        src.mkdir()
        out_dir.mkdir()
        units: dict[str, _Unit] = {}
        for i, inp in enumerate(inputs):
            for unit in _units(i, inp):
                units[unit.name] = unit
                (src / unit.name).write_text(unit.text, encoding="utf-8", errors="replace",
                                             newline="")
        names = sorted(units, key=lambda n: tuple(int(x or -1) for x in
                                                  _NAME_RE.match(n).groups()))
        deadline = time.monotonic() + timeout
        runs = [_start("ruff", _ruff_cmd, names, src, out_dir),
                _start("bandit", _bandit_cmd, names, src, out_dir)]
        try:
            for run in runs:
                _finish(run, deadline, timeout)
        finally:
            for run in runs:
                for proc in (run.proc, run.version_proc):
                    if proc is not None and proc.poll() is None:
                        _kill(proc)
        ruff_data = _load_json(runs[0], report.errors)
        bandit_data = _load_json(runs[1], report.errors)
    ruff_ev = _from_ruff(ruff_data, units, inputs) if ruff_data is not None else []
    bandit_ev = (_from_bandit(bandit_data, units, inputs, report.errors)
                 if bandit_data is not None else [])
    for run, data in zip(runs, (ruff_data, bandit_data), strict=True):
        if data is not None and run.tool not in report.tools:
            report.tools[run.tool] = _VERSIONS.get(run.exe, "unknown")
    order = {inp.path: i for i, inp in reversed(list(enumerate(inputs)))}
    report.evidence = sorted(_merge(ruff_ev, bandit_ev),
                             key=lambda e: (order.get(e["file"], 0), e["line"] or 0,
                                            e["rule"], e["tool"]))
    report.seconds = time.monotonic() - started
    return report


# --- using evidence ------------------------------------------------------------------------------
# Fix texts say what to change in this code. ``{at}`` becomes "on line N" (or "here"), and
# ``{ name}`` the name the analyzer's message quotes (" `os`"), or nothing.
_SECURITY_FIXES = {
    "608": "Pass the values {at} as query parameters (cursor.execute(sql, params)) instead "
           "of formatting them into the SQL string.",
    "611": "Pass the values {at} as query parameters to RawSQL instead of formatting them "
           "into the SQL string.",
    "610": "Replace the QuerySet.extra() call {at} with ORM expressions, or pass the values "
           "as params.",
    "602": "Pass the command {at} as a list of arguments and drop shell=True (shell=False is "
           "the default); never build a shell command from input.",
    "604": "Pass the command {at} as a list of arguments and drop shell=True (shell=False is "
           "the default); never build a shell command from input.",
    "605": "Replace the os.system/os.popen call {at} with subprocess.run([...]) and a list "
           "of arguments (no shell=True).",
    "603": "Check that no argument of the subprocess call {at} comes unvalidated from "
           "untrusted input; keep the argument list fixed where you can.",
    "607": "Start the program {at} by its absolute path (or resolve it once with "
           "shutil.which and check it) instead of relying on PATH.",
    "307": "Replace eval() {at} with ast.literal_eval for literals, or parse the input "
           "explicitly.",
    "102": "Remove the exec() call {at}: dispatch to explicit functions (e.g. a dict of "
           "callables) instead of executing code strings.",
    "105": "Take the password{ name} {at} out of the source: read it from the environment "
           "or a secrets store, and change it, since it is in the history now.",
    "106": "Take the password passed {at} out of the source: read it from the environment "
           "or a secrets store, and change it, since it is in the history now.",
    "107": "Remove the default password of the argument {at}: make it required, or read it "
           "from the environment or a secrets store.",
    "301": "Do not unpickle data that could come from outside {at}; use json (or a signed, "
           "schema-checked format) instead of pickle.",
    "302": "Do not unmarshal data that could come from outside {at}; use json instead of "
           "marshal.",
    "403": "Avoid pickle {at} for data that crosses a trust boundary; use json or a signed "
           "format.",
    "506": "Replace yaml.load {at} with yaml.safe_load (or yaml.load(..., "
           "Loader=yaml.SafeLoader)).",
    "324": "Use hashlib.sha256 (or stronger) {at} if the hash protects anything; for a "
           "plain checksum pass usedforsecurity=False.",
    "303": "Use hashlib.sha256 (or stronger) {at} if the hash protects anything; for a "
           "plain checksum pass usedforsecurity=False.",
    "304": "Replace the cipher {at} with an authenticated modern one (AES-GCM or "
           "ChaCha20-Poly1305 from cryptography).",
    "305": "Replace ECB mode {at} with an authenticated mode (AES-GCM).",
    "311": "Use the secrets module (secrets.token_hex, secrets.choice) {at} if the value is "
           "a token, password or anything security-related.",
    "101": "Replace the assert {at} with an explicit check that raises, if it must hold at "
           "run time; Python drops asserts under -O.",
    "110": "Handle or log the exception {at} (logger.exception) instead of passing, and "
           "catch only the specific exception type you expect.",
    "112": "Handle or log the exception {at} before continuing, and catch only the "
           "specific exception type you expect.",
    "113": "Pass a timeout= to the HTTP request {at} so a slow server cannot hang the "
           "worker.",
    "104": "Bind {at} to a specific interface (e.g. 127.0.0.1) or make the address "
           "configurable instead of 0.0.0.0.",
    "108": "Create the temporary file {at} with the tempfile module instead of a fixed /tmp "
           "path.",
    "501": "Keep TLS certificate verification on {at} (verify=True); point verify at a CA "
           "bundle if the certificate is private.",
    "310": "Check the URL's scheme (http/https only) before opening it {at}, or use an HTTP "
           "client that only speaks HTTP.",
    "308": "Do not mark the string {at} as safe while it contains input; build the HTML "
           "with format_html or escape the values.",
    "701": "Create the Jinja2 Environment {at} with autoescape=True (or "
           "select_autoescape()).",
    "202": "Extract the archive {at} with filter='data' (tarfile) or check each member's "
           "path before extracting.",
    "404": "Check that the subprocess calls in this module use fixed argument lists and no "
           "shell.",
}
for _n in range(313, 321):
    _SECURITY_FIXES.setdefault(str(_n), "Parse the XML {at} with defusedxml instead of the "
                                        "standard library parsers.")

_FIXES = {
    "E999": "Fix the syntax error {at}; the file cannot be imported as it is.",
    "E711": "Compare with None {at} using `is`/`is not`.",
    "E712": "Test the truth value directly {at} (`if x:` / `if not x:`), or use `is True`/"
            "`is False` if the identity matters.",
    "E713": "Write `x not in y` instead of `not x in y` {at}.",
    "E714": "Write `x is not y` instead of `not x is y` {at}.",
    "E721": "Use isinstance() (or `is` for exact type checks) {at} instead of comparing "
            "types with ==.",
    "E722": "Catch a specific exception type {at} instead of a bare `except:`.",
    "E731": "Define the function{ name} {at} with def instead of assigning a lambda.",
    "E741": "Rename{ name} {at} to something that cannot be confused with 1 or 0.",
    "E101": "Indent line {line} with spaces only, like the lines around it.",
    "W191": "Indent line {line} with spaces instead of tabs (your editor or `ruff format` "
            "can convert the file).",
    "E501": "Break line {line} into shorter lines.",
    "W605": "Make the string {at} a raw string (r'...') or escape the backslash.",
    "B006": "Replace the mutable default argument {at} with None and create the list/dict "
            "inside the function.",
    "B008": "Replace the function call in the default argument {at} with None and call it "
            "inside the function.",
    "B007": "Rename the unused loop variable{ name} {at} to `_`.",
    "B023": "Bind the loop variable{ name} {at} as a default argument (or use "
            "functools.partial) instead of closing over it.",
    "B904": "Chain the exception raised {at}: `raise NewError(...) from err` (or `from "
            "None`).",
    "B905": "Pass strict=True (or strict=False deliberately) to the zip() call {at}.",
    "B017": "Assert a specific exception type {at}, not Exception.",
    "B018": "Remove the useless expression {at}, or assign or return its value.",
    "BLE001": "Catch the specific exceptions you expect {at} instead of Exception; let "
              "others propagate.",
    "TRY002": "Raise a specific (or custom) exception class {at} instead of a bare "
              "Exception.",
    "TRY300": "Move the statement {at} out of the try body into an else: block.",
    "TRY301": "Move the raise {at} out of the try body (into a helper or after the try).",
    "TRY400": "Use logger.exception(...) {at} to keep the traceback.",
    "TRY201": "Re-raise with a bare `raise` {at}.",
    "C901": "Split the function{ name} {at} into smaller functions; it is too complex to "
            "review and test.",
    "F541": "Remove the `f` prefix from the string {at}; it has no placeholders.",
    "F632": "Use == to compare with the str, bytes or int literal {at}, not `is`.",
    "F821": "Define or import{ name} before it is used {at}.",
    "F841": "Remove the assignment to the unused variable{ name} {at}, or use its value.",
    "F401": "Remove the unused import{ name} {at} (or re-export it in __all__ if it is "
            "public API).",
    "F811": "Remove or rename the redefinition of{ name} {at}.",
    "SIM105": "Replace the try/except/pass {at} with contextlib.suppress(...).",
    "SIM108": "Write the if/else assignment {at} as a conditional expression.",
    "SIM102": "Combine the nested if statements {at} with `and`.",
    "SIM117": "Combine the nested with statements {at} into one.",
    "SIM118": "Write `key in d` instead of `key in d.keys()` {at}.",
}
_PREFIX_FIXES = {
    "N": "Rename{ name} {at} to follow PEP 8 naming (snake_case functions and variables, "
         "CapWords classes, UPPER_CASE constants).",
    "UP": "Rewrite the code {at} in the modern syntax the analyzer points to (`ruff check "
          "--fix --select UP` does it).",
}
_QUOTED = re.compile(r"`([^`]{1,80})`")


def _fill(template: str, evidence: dict) -> str:
    line = evidence.get("line")
    names = _QUOTED.findall(str(evidence.get("message") or ""))
    text = (template.replace("{at}", f"on line {line}" if line else "here")
            .replace("{line}", str(line) if line else "this")
            .replace("{ name}", f" `{names[0]}`" if names else ""))
    return mask(text)


def suggestion_for(evidence: dict) -> str:
    """A concrete instruction for what to change in this code; never empty, never only the
    rule's name."""
    rule = str(evidence.get("rule") or "").strip()
    prefix, num = _rule_parts(rule)
    if evidence.get("fix") and evidence.get("tool") == "secrets":
        return mask(str(evidence["fix"]))
    found = None
    if prefix == "S" or (prefix == "B" and not _is_bugbear(rule)):  # ruff S123 = bandit B123
        found = _SECURITY_FIXES.get(num)
    if found is None:
        found = _FIXES.get(rule)
    if found is None and evidence.get("tool_fix"):
        # ruff's own fix title ("Remove unused import: `os`") names the change.
        line = evidence.get("line")
        return mask(f"{str(evidence['tool_fix']).rstrip('.')}"
                    f"{f' on line {line}' if line else ''}.")
    if found is None:
        found = _PREFIX_FIXES.get(prefix)
    if found is None:
        message = str(evidence.get("message") or "").strip().rstrip(".")
        if not message:
            return "Read the analyzer's report for this line and change the code it points to."
        line = evidence.get("line")
        return mask(f"Change the code {f'on line {line}' if line else 'here'} so that this no "
                    f"longer holds: {message}.")
    return _fill(found, evidence)


def for_category(evidence: list[dict], category: str) -> list[dict]:
    """The evidence items of one category (security, architecture or style)."""
    return [e for e in evidence if e.get("category") == category]
