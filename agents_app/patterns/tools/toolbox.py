"""Tools for the patterns that use tools: a registry of tools with a name, a
description, a pydantic input schema, a timeout, and whether a person must approve each call.

Built in: files under the configured repository roots (list, read, search; every path stays
inside its root), a calculator that parses arithmetic (never ``eval``), the current time, the
static analyzers of the code review (ruff and bandit on a Python snippet), and ``ask_person``,
which the patterns turn into a gate. No built-in tool touches the network.

Tool errors come back as ``(False, message)`` observations; a tool never raises into a run.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...repos.workspace import ToolError, Workspace
from .. import safe_json
from ..parallel import run_parallel

MAX_OBSERVATION = 8000
PERSON = "person"  # a tool whose answer comes from a person at a gate
HEADING = "### "  # before each tool's name in the catalogue (describe)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class AgentTool:
    name: str
    description: str
    schema: type[BaseModel]
    # Takes the parsed ``schema`` object; None for ask_person: answered at a gate.
    fn: Callable[[Any], str] | None
    timeout: float = 10.0
    needs_approval: bool = False
    kind: str = "local"  # local | person


# --- calculator ------------------------------------------------------------------------------------
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max, "log": math.log,
    "log10": math.log10, "exp": math.exp, "sin": math.sin, "cos": math.cos, "tan": math.tan,
    "floor": math.floor, "ceil": math.ceil}
_CONSTS = {"pi": math.pi, "e": math.e}
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e300


class CalcError(ValueError):
    pass


def calculate(expression: str) -> float | int:
    """Evaluate arithmetic by walking its syntax tree: numbers, + - * / // % **, parentheses,
    a few math functions and constants. Anything else is refused."""
    if len(expression) > 500:
        raise CalcError("the expression is longer than 500 characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise CalcError("not an arithmetic expression") from None

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
                raise CalcError(f"exponents above {MAX_EXPONENT} are not allowed")
            try:
                value = _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise CalcError("division by zero") from None
            if isinstance(value, complex) or abs(value) > MAX_MAGNITUDE:
                raise CalcError("the result is out of range")
            return value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        if isinstance(node, ast.Name) and node.id in _CONSTS:
            return _CONSTS[node.id]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _FUNCS and not node.keywords and len(node.args) <= 4:
            try:
                return _FUNCS[node.func.id](*[ev(a) for a in node.args])
            except (ValueError, TypeError, OverflowError) as exc:
                raise CalcError(f"{node.func.id}: {exc}") from None
        raise CalcError(f"not allowed in a calculation: {ast.dump(node)[:60]}")

    value: float | int = ev(tree)
    return value


class CalcArgs(_Args):
    expression: str = Field(min_length=1, description="Arithmetic, e.g. '(3 + 4) * 2 ** 10' or "
                            "'sqrt(2) * pi'.")


def _calculator(a: CalcArgs) -> str:
    value = calculate(a.expression)
    return f"{a.expression} = {value}"


# --- time ------------------------------------------------------------------------------------------
class TimeArgs(_Args):
    timezone: str = Field("UTC", description="IANA time zone, e.g. 'Europe/Paris'.")


def _current_time(a: TimeArgs) -> str:
    try:
        zone = ZoneInfo(a.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise CalcError(f"unknown time zone {a.timezone!r}") from None
    now = dt.datetime.now(zone)
    return f"{now.isoformat(timespec='seconds')} ({a.timezone}, {now:%A})"


# --- files under the repository roots --------------------------------------------------------------
class _Roots:
    """Each root is addressed by its folder name: ``proj/src/app.py`` is ``src/app.py`` in the
    root whose folder is ``proj``."""

    def __init__(self, roots: list[str]):
        self.by_name: dict[str, Workspace] = {}
        for r in roots:
            path = Path(r).expanduser()
            if path.is_dir():
                self.by_name.setdefault(path.resolve().name, Workspace(path))

    def split(self, path: str) -> tuple[Workspace, str]:
        if not self.by_name:
            raise ToolError("No repository roots are configured (QUORUM_REPO_ROOTS).")
        head, _, rest = (path or "").strip().strip("/").partition("/")
        if head not in self.by_name:
            raise ToolError(f"Paths start with a root: {', '.join(sorted(self.by_name))}.")
        return self.by_name[head], rest or "."


class ListArgs(_Args):
    path: str = Field(description="'<root>/<folder>', e.g. 'proj/src'; '<root>' for the top.")
    pattern: str = Field("*", description="Glob, e.g. '*.py'.")


class ReadArgs(_Args):
    path: str = Field(description="'<root>/<file>', e.g. 'proj/README.md'.")
    start: int | None = Field(None, ge=1)
    end: int | None = Field(None, ge=1)


class SearchArgs(_Args):
    text: str = Field(min_length=1, description="Text to find (literal).")
    path: str = Field(description="'<root>' or '<root>/<folder>' to search in.")
    pattern: str = Field("*", description="Glob for file names, e.g. '*.py'.")


class AnalyzeArgs(_Args):
    code: str = Field(min_length=1, max_length=100_000, description="Python source to check.")


class AskArgs(_Args):
    question: str = Field(min_length=1, max_length=2000, description="What to ask the person.")


def _analyze(a: AnalyzeArgs) -> str:
    from common.analyzers import AnalyzerInput, run_analyzers

    report = run_analyzers([AnalyzerInput(path="snippet.py", text=a.code)], timeout=30)
    lines = [f"line {e.get('line')}: [{e.get('tool')} {e.get('rule')}] {e.get('message')}"
             for e in report.evidence]
    lines += [f"(analyzer problem: {err})" for err in report.errors]
    return "\n".join(lines) or "ruff and bandit found nothing."


def registry(repo_roots: list[str]) -> dict[str, AgentTool]:
    """The built-in tools. ``repo_roots`` are the folders the file tools may read."""
    roots = _Roots(repo_roots)

    def listing(a: ListArgs) -> str:
        ws, rel = roots.split(a.path)
        files = ws.list_files(rel, a.pattern, None)
        return "\n".join(files) if files else "(no files)"

    def reading(a: ReadArgs) -> str:
        ws, rel = roots.split(a.path)
        return ws.read_file(rel, a.start, a.end)

    def searching(a: SearchArgs) -> str:
        ws, rel = roots.split(a.path)
        return str(ws.search(a.text, rel, a.pattern))  # as run_tool made it: a list's repr

    tools = [
        AgentTool("calculator", "Evaluate arithmetic exactly (parsed, never executed).",
                  CalcArgs, _calculator, timeout=5),
        AgentTool("current_time", "The current date and time in a time zone.", TimeArgs,
                  _current_time, timeout=5),
        AgentTool("list_files", "List files of a repository under the configured roots.",
                  ListArgs, listing),
        AgentTool("read_file", "Read a text file of a repository, with line numbers.",
                  ReadArgs, reading),
        AgentTool("search_files", "Find lines containing text in a repository.", SearchArgs,
                  searching, timeout=20),
        AgentTool("analyze_python", "Run ruff and bandit on a Python snippet; lists findings.",
                  AnalyzeArgs, _analyze, timeout=60),
        AgentTool("ask_person", "Ask the person running this a question; waits for their "
                  "answer. Use it when only they can know.", AskArgs, None, kind=PERSON),
    ]
    return {t.name: t for t in tools}


def describe(tools: dict[str, AgentTool]) -> str:
    blocks = []
    for t in tools.values():
        schema = json.dumps(t.schema.model_json_schema(), sort_keys=True)
        blocks.append(f"{HEADING}{t.name}\n{t.description}\nArguments (JSON schema): {schema}")
    return "\n\n".join(blocks)


def check_args(tool: AgentTool, args: Any) -> BaseModel:
    """The validated arguments; ToolError with a readable message otherwise."""
    if isinstance(args, str):
        try:
            args = safe_json.loads(args) if args.strip() else {}
        except safe_json.TooDeep as exc:
            raise ToolError(f"Arguments for {tool.name} are refused: {exc}.") from None
        except ValueError:
            raise ToolError(f"Arguments for {tool.name} are not a JSON object.") from None
    if not isinstance(args, dict):
        raise ToolError(f"Arguments for {tool.name} must be a JSON object.")
    try:
        return tool.schema(**args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}"
                             for e in exc.errors())
        raise ToolError(f"Invalid arguments for {tool.name}: {problems}") from None


def run_tool(tools: dict[str, AgentTool], name: str, args: Any, *,
             timeout: float | None = None) -> tuple[bool, str, float]:
    """Run a tool: ``(ok, observation, seconds)``. Unknown tools, bad arguments, errors and
    timeouts are observations, never exceptions."""
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None or tool.fn is None:
        return False, f"Unknown tool {name!r}. Available: {', '.join(tools) or 'none'}.", 0.0
    try:
        parsed = check_args(tool, args)
    except ToolError as exc:
        return False, str(exc), 0.0
    limit = min(tool.timeout, timeout) if timeout else tool.timeout
    outcome = run_parallel({"tool": lambda: tool.fn(parsed)}, limit, 1)["tool"]
    if outcome.timed_out:
        return False, f"{name} did not finish within {limit:g} s.", outcome.seconds
    if outcome.error:
        message = outcome.error.split(": ", 1)[-1] if outcome.error.startswith(
            ("ToolError", "CalcError")) else outcome.error
        return False, f"{name} failed: {message}", outcome.seconds
    text = str(outcome.value)
    if len(text) > MAX_OBSERVATION:
        text = text[:MAX_OBSERVATION] + f"\n[... {len(text) - MAX_OBSERVATION:,} characters cut]"
    return True, text, outcome.seconds


# The tools' names, for the options of the patterns that use them.
ASK_PERSON = "ask_person"
TOOL_NAMES: tuple[str, ...] = tuple(registry([]))
if TYPE_CHECKING:
    # Literal types of names known only at run time: to the type checker they are strings.
    ToolName = str
    UnattendedTool = str
    ApprovableTool = str
else:
    # The options' choices (the web form's boxes, the command line's values) come from these.
    ToolName = Literal[TOOL_NAMES]
    # The tools that run without a person (every one but ask_person): what a pattern that
    # never stops for a person (ReWOO) may use, and what ReAct may ask approval for.
    UnattendedTool = Literal[tuple(n for n, t in registry([]).items() if t.kind != PERSON)]
    ApprovableTool = UnattendedTool
