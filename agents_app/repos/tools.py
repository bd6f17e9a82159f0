"""A small tool registry for LLM agent loops working on a :class:`Workspace`.

Planners and reviewers get :data:`READ_TOOLS`; the executor gets those plus
:data:`WRITE_TOOLS` and a :func:`run_tests_tool`. :func:`call` turns every model mistake
(unknown tool, bad arguments, refused path, failed patch) into ``(False, message)`` so the
loop can show it to the model as the observation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..patterns import safe_json
from .workspace import ToolError, Workspace

MAX_OBSERVATION = 12_000


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    schema: type[BaseModel]
    fn: Callable[[Workspace, BaseModel], str]
    writes: bool = False
    timeout: float = 30


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


PATH_HELP = "Path relative to the repository root, e.g. 'src/app.py'."


class ListFilesArgs(_Args):
    path: str = Field(".", description="Directory (or file) to list, relative to the root.")
    pattern: str = Field("*", description="Glob matched against the relative path or the "
                                          "file name, e.g. '*.py' or 'tests/*'.")
    max_depth: int | None = Field(None, ge=1, description="1 = only files directly in path; "
                                                          "omit for no limit.")


class ReadFileArgs(_Args):
    path: str = Field(description=PATH_HELP)
    start: int | None = Field(None, ge=1, description="First line to show (1-based).")
    end: int | None = Field(None, ge=1, description="Last line to show (inclusive).")


class SearchArgs(_Args):
    text: str = Field(min_length=1, description="Text to look for (literal unless regex).")
    path: str = Field(".", description="Directory or file to search in.")
    pattern: str = Field("*", description="Glob for file names or relative paths, e.g. '*.py'.")
    regex: bool = Field(False, description="Treat text as a Python regular expression.")
    case: bool = Field(False, description="Case-sensitive match.")


class WriteFileArgs(_Args):
    path: str = Field(description=PATH_HELP)
    content: str = Field(description="The complete new content of the file.")


class ReplaceArgs(_Args):
    path: str = Field(description=PATH_HELP)
    search: str = Field(min_length=1, description="Exact text to find, including whitespace.")
    replacement: str = Field(description="Text to put in its place.")
    count: int = Field(1, ge=1, description="How many occurrences may be replaced; the call "
                                            "fails if the text occurs more often.")
    replace_all: bool = Field(False, description="Replace every occurrence, however many.")
    occurrence: int | None = Field(None, ge=1, description="Replace only this occurrence "
                                   "(1 = the first from the top of the file).")


class ApplyPatchArgs(_Args):
    diff: str = Field(description="A unified diff ('--- a/x', '+++ b/x', '@@ ... @@' hunks) "
                                  "with a few lines of context; /dev/null to create or delete.")


class DeleteFileArgs(_Args):
    path: str = Field(description=PATH_HELP)


class RunTestsArgs(_Args):
    args: list[str] = Field(default_factory=list, description="Extra arguments after the "
                            "configured test command, e.g. ['-q', 'tests/test_x.py'].")


def _list_files(ws: Workspace, a: ListFilesArgs) -> str:
    files = ws.list_files(a.path, a.pattern, a.max_depth)
    if not files:
        return "(no files match)"
    text = "\n".join(files)
    if getattr(files, "truncated", False):
        text += f"\n[... listing cut at {len(files)} files; narrow path or pattern ...]"
    return text


def _read_file(ws: Workspace, a: ReadFileArgs) -> str:
    text = ws.read_file(a.path, a.start, a.end)
    return text if text else f"({a.path} is empty or the range has no lines)"


def _search(ws: Workspace, a: SearchArgs) -> str:
    hits = ws.search(a.text, a.path, a.pattern, a.regex, a.case)
    if not hits:
        return "(no matches)"
    text = "\n".join(f"{h['path']}:{h['line']}: {h['text']}" for h in hits)
    if getattr(hits, "truncated", False):
        text += f"\n[... stopped after {len(hits)} matches; narrow the search ...]"
    return text


READ_TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("list_files", "List files in the repository (sorted, .git excluded).", ListFilesArgs,
         _list_files),
    Tool("read_file", "Show a text file with line numbers, optionally a line range.",
         ReadFileArgs, _read_file),
    Tool("search", "Find lines containing text (or a regex) across files; shows "
         "path:line: text.", SearchArgs, _search),
)}

WRITE_TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("write_file", "Create or overwrite a file with the given content (parent "
         "directories are created).", WriteFileArgs,
         lambda ws, a: ws.write_file(a.path, a.content), writes=True),
    Tool("replace_in_file", "Replace an exact piece of text in a file. Fails if it is not "
         "found, or occurs more than count times unless replace_all or occurrence says which.",
         ReplaceArgs, lambda ws, a: ws.replace(a.path, a.search, a.replacement, a.count,
                                               occurrence=a.occurrence, every=a.replace_all),
         writes=True),
    Tool("apply_patch", "Apply a unified diff to one or more files, all or nothing.",
         ApplyPatchArgs, lambda ws, a: ws.apply_patch(a.diff), writes=True),
    Tool("delete_file", "Delete a file.", DeleteFileArgs,
         lambda ws, a: ws.delete_file(a.path), writes=True),
)}


def run_tests_tool(allowlist: list[list[str]], timeout: float, *,
                   command: list[str] | None = None, max_output: int = 10_000) -> Tool:
    """A ``run_tests`` tool running ``command`` (default: the first allowlist entry) plus the
    model's extra ``args``, checked against ``allowlist``."""
    if not allowlist or not allowlist[0]:
        raise ValueError("run_tests_tool needs a non-empty allowlist")
    base = list(command or allowlist[0])
    shown = " ".join(base)

    def run(ws: Workspace, a: RunTestsArgs) -> str:
        result = ws.run_command(base + list(a.args), allowlist=allowlist, timeout=timeout,
                                max_output=max_output)
        if result.timed_out:
            status = f"TIMED OUT after {timeout:g}s (the process group was killed)"
        else:
            status = f"exit code {result.exit_code} ({result.seconds:.1f}s)"
        return f"$ {' '.join(result.argv)}\n{status}\n{result.output}"

    return Tool("run_tests", f"Run the repository's tests: `{shown}` followed by optional "
                "extra arguments (paths must stay inside the repository).", RunTestsArgs, run,
                writes=False, timeout=timeout + 10)


def describe(tools: dict[str, Tool]) -> str:
    """A catalogue of the tools for the model: name, description and JSON schema of the
    arguments."""
    blocks = []
    for tool in tools.values():
        schema = json.dumps(tool.schema.model_json_schema(), sort_keys=True)
        note = " (modifies files)" if tool.writes else ""
        blocks.append(f"### {tool.name}{note}\n{tool.description}\nArguments (JSON schema): "
                      f"{schema}")
    return "\n\n".join(blocks)


def _format_validation(name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error.get("loc", ())) or "(arguments)"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return f"Invalid arguments for {name}: " + "; ".join(problems)


def cap_observation(text: str, limit: int = MAX_OBSERVATION) -> str:
    """Keep the head (about 60%) and tail of ``text`` within ``limit`` characters."""
    if len(text) <= limit:
        return text
    head = int(limit * 0.6)
    tail = limit - head
    omitted = len(text) - head - tail
    return (f"{text[:head]}\n[... observation truncated: {omitted} characters omitted; ask for "
            f"less (a line range, a narrower path or pattern) ...]\n{text[-tail:]}")


def call(tools: dict[str, Tool], ws: Workspace, name: str, args: dict | str | None,
         *, limit: int = MAX_OBSERVATION) -> tuple[bool, str]:
    """Run a tool for the model: ``(ok, observation)``. Model mistakes never raise."""
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None:
        return False, f"Unknown tool {name!r}. Available tools: {', '.join(tools) or 'none'}"
    if args is None:
        args = {}
    if isinstance(args, str):
        try:
            args = safe_json.loads(args) if args.strip() else {}
        except ValueError as exc:
            return False, f"Arguments for {name} are not valid JSON: {exc}"
    if not isinstance(args, dict):
        return False, f"Arguments for {name} must be a JSON object"
    try:
        parsed = tool.schema.model_validate(args)
    except ValidationError as exc:
        return False, cap_observation(_format_validation(name, exc), limit)
    try:
        observation = tool.fn(ws, parsed)
    except ToolError as exc:
        return False, cap_observation(str(exc), limit)
    except UnicodeError as exc:
        return False, f"{name} failed: {exc.reason}"
    except OSError as exc:  # e.g. permission denied; never show host paths
        return False, f"{name} failed: {exc.strerror or type(exc).__name__}"
    return True, cap_observation(observation, limit)
