"""A sandboxed view of one worktree for model-driven tools.

Everything a model passes in is untrusted. Paths go through :func:`paths.resolve` (nothing
outside the root, nothing in ``.git``, no writes through symlinks); patches are applied by
``git apply`` after the same checks (:mod:`.patching`); commands run without a shell, only when
they start with an allowlisted prefix, through :mod:`common.proc` (:mod:`.commands`).

Error messages are shown to the model, so they name only the path the model gave, never the
host path of the root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from . import commands, patching, paths
from .commands import CommandResult
from .paths import BINARY_SNIFF_BYTES, ToolError, is_binary

MAX_SEARCH_FILE_BYTES = 2_000_000
MAX_HIT_TEXT = 300


class Capped(list):
    """A list that remembers whether it was cut at a limit (``truncated``)."""

    truncated: bool = False


def _split_lines(text: str) -> list[str]:
    """Lines without terminators, split on ``\\n`` only (so numbers match editors, grep and
    diff); a trailing ``\\r`` is dropped."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _strip_eol(line: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith("\n"):
        return line[:-1]
    return line


class Workspace:
    def __init__(self, root: str | Path, *, max_read_bytes: int = 200_000,
                 max_write_bytes: int = 500_000, max_list: int = 2000,
                 max_search_hits: int = 200):
        root_path = Path(os.path.realpath(root))
        if not root_path.is_dir():
            raise ValueError(f"workspace root is not a directory: {root}")
        self.root = root_path
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self.max_list = max_list
        self.max_search_hits = max_search_hits

    # ------------------------------------------------------------------ paths
    def resolve(self, path: str, *, must_exist: bool = False, for_write: bool = False) -> Path:
        """The absolute path for a model-given relative ``path``, or :class:`ToolError` (see
        :func:`paths.resolve`)."""
        return paths.resolve(self.root, path, must_exist=must_exist, for_write=for_write)

    def _rel(self, path: Path) -> str:
        return paths.relative(self.root, path)

    # ---------------------------------------------------------------- reading
    def list_files(self, path: str = ".", pattern: str = "*",
                   max_depth: int | None = None) -> list[str]:
        """Relative POSIX paths of files under ``path``, sorted. ``max_depth=1`` lists only files
        directly inside ``path`` (like ``find -maxdepth 1``). At most ``max_list`` entries; the
        returned list has ``truncated=True`` when there were more."""
        if max_depth is not None and max_depth < 1:
            raise ToolError("max_depth must be at least 1")
        found = sorted(rel for rel, _ in paths.walk(self.root, path, pattern or "*", max_depth,
                                                    self.max_list))
        result = Capped(found[: self.max_list])
        result.truncated = len(found) > self.max_list
        return result

    def _read_text(self, path: str) -> tuple[Path, str]:
        target = self.resolve(path, must_exist=True)
        if target.is_dir():
            raise ToolError(f"{path!r} is a directory; use list_files to see its contents")
        if not target.is_file():
            raise ToolError(f"{path!r} is not a regular file")
        data = target.read_bytes()
        if is_binary(data[:BINARY_SNIFF_BYTES]):
            raise ToolError(f"{path!r} looks like a binary file; it cannot be shown as text")
        return target, data.decode("utf-8", errors="surrogateescape")

    def read_file(self, path: str, start: int | None = None, end: int | None = None) -> str:
        """Numbered lines (``"  12| text"``) of a text file; ``start``/``end`` are a 1-based
        inclusive line range."""
        target = self.resolve(path, must_exist=True)
        if target.is_dir():
            raise ToolError(f"{path!r} is a directory; use list_files to see its contents")
        if not target.is_file():
            raise ToolError(f"{path!r} is not a regular file")
        if start is not None and start < 1:
            raise ToolError("start must be 1 or more (line numbers are 1-based)")
        if end is not None and end < 1:
            raise ToolError("end must be 1 or more (line numbers are 1-based)")
        if start is not None and end is not None and end < start:
            raise ToolError(f"end ({end}) is before start ({start})")
        size = target.stat().st_size
        with target.open("rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                raise ToolError(f"{path!r} looks like a binary file; it cannot be shown as text")
        if size > self.max_read_bytes and start is None and end is None:
            raise ToolError(f"{path!r} is {size} bytes, more than the {self.max_read_bytes}-byte "
                            "limit; read a line range with start and end, or use search")
        first = start or 1
        out: list[str] = []
        used = 0
        total = 0
        cut = False
        with target.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                total = number
                if number < first or (end is not None and number > end) or cut:
                    continue
                text = _strip_eol(raw.decode("utf-8", errors="replace"))
                used += len(text) + 8
                if used > self.max_read_bytes:
                    cut = True
                    continue
                out.append((number, text))
        if start is not None and start > total:
            raise ToolError(f"{path!r} has only {total} lines; start {start} is past the end")
        if not out:
            return ""
        width = max(4, len(str(out[-1][0])))
        lines = [f"{number:>{width}}| {text}" for number, text in out]
        if cut:
            lines.append(f"[... output cut at {self.max_read_bytes} bytes; the file has "
                         f"{total} lines; read the rest with start={out[-1][0] + 1} ...]")
        return "\n".join(lines)

    def search(self, text: str, path: str = ".", pattern: str = "*", regex: bool = False,
               case: bool = False) -> list[dict]:
        """Lines matching ``text`` (literal unless ``regex``; case-insensitive unless ``case``)
        as ``{path, line, text}`` dicts, at most ``max_search_hits`` (``truncated`` is set when
        cut). Binary and very large files and ``.git`` are skipped."""
        if not text:
            raise ToolError("search text is empty")
        flags = 0 if case else re.IGNORECASE
        try:
            compiled = re.compile(text if regex else re.escape(text), flags)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {text!r}: {exc}") from None
        hits = Capped()
        for rel, _full in paths.walk(self.root, path, pattern or "*", None, 100_000):
            try:
                real = self.resolve(rel)
                if not real.is_file() or real.stat().st_size > MAX_SEARCH_FILE_BYTES:
                    continue
                data = real.read_bytes()
            except (ToolError, OSError):
                continue
            if is_binary(data[:BINARY_SNIFF_BYTES]):
                continue
            for number, line in enumerate(_split_lines(data.decode("utf-8", "replace")), 1):
                if compiled.search(line[:10_000]):
                    if len(hits) >= self.max_search_hits:
                        hits.truncated = True
                        return hits
                    hits.append({"path": rel, "line": number, "text": line[:MAX_HIT_TEXT]})
        return hits

    # ---------------------------------------------------------------- writing
    def _write_bytes(self, target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(target, flags, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path, for_write=True)
        data = content.encode("utf-8", errors="surrogateescape")
        if len(data) > self.max_write_bytes:
            raise ToolError(f"content is {len(data)} bytes, more than the "
                            f"{self.max_write_bytes}-byte limit")
        if target.is_dir():
            raise ToolError(f"{path!r} is a directory")
        existed = target.exists()
        self._write_bytes(target, data)
        verb = "Overwrote" if existed else "Created"
        return f"{verb} {self._rel(target)} ({len(_split_lines(content))} lines, {len(data)} bytes)"

    def replace(self, path: str, search: str, replacement: str, count: int = 1, *,
                occurrence: int | None = None, every: bool = False) -> str:
        """Replace exact occurrences of ``search``: by default at most ``count`` of them, refusing
        when it is missing or occurs more often; with ``every``, all of them; with
        ``occurrence``, only that one (1 = the first from the top of the file)."""
        if not search:
            raise ToolError("search text is empty")
        if count < 1:
            raise ToolError("count must be at least 1")
        if occurrence is not None and every:
            raise ToolError("Give occurrence (one of them) or replace_all (every one), not both")
        if occurrence is not None and occurrence < 1:
            raise ToolError("occurrence must be at least 1 (1 = the first)")
        self.resolve(path, for_write=True, must_exist=True)
        target, content = self._read_text(path)
        found = content.count(search)
        if not found and "\r\n" in content and "\n" in search and "\r\n" not in search:
            search = search.replace("\n", "\r\n")
            replacement = replacement.replace("\r\n", "\n").replace("\n", "\r\n")
            found = content.count(search)
        if not found:
            raise ToolError(f"The search text was not found in {path!r}. It must match exactly, "
                            "including whitespace and indentation; read the file again.")
        if occurrence is not None:
            if occurrence > found:
                raise ToolError(f"The search text occurs only {found} time"
                                f"{'s' if found != 1 else ''} in {path!r}; there is no "
                                f"{_ordinal(occurrence)}. Nothing was changed.")
            at = -1
            for _ in range(occurrence):
                at = content.index(search, at + 1)
            new = content[:at] + replacement + content[at + len(search):]
            done = f"Replaced the {_ordinal(occurrence)} of {found} occurrences"
        else:
            if found > count and not every:
                raise ToolError(f"The search text occurs {found} times in {path!r} but count is "
                                f"{count}. Include more surrounding lines to make it unique, set "
                                "replace_all to replace every occurrence, or occurrence to "
                                "replace one of them (1 = the first). Nothing was changed.")
            new = content.replace(search, replacement)
            done = f"Replaced {found} occurrence{'s' if found != 1 else ''}"
        data = new.encode("utf-8", errors="surrogateescape")
        if len(data) > self.max_write_bytes:
            raise ToolError(f"the result would be {len(data)} bytes, more than the "
                            f"{self.max_write_bytes}-byte limit")
        self._write_bytes(target, data)
        return f"{done} in {self._rel(target)}"

    def delete_file(self, path: str) -> str:
        target = self.resolve(path, for_write=True, must_exist=True)
        if target.is_dir():
            raise ToolError(f"{path!r} is a directory; only files can be deleted")
        target.unlink()
        return f"Deleted {self._rel(target)}"

    # ---------------------------------------------------------------- patches
    def apply_patch(self, diff: str) -> str:
        """Apply a unified diff (git-style or plain) with ``git apply``, all or nothing (see
        :func:`patching.apply_patch`)."""
        return patching.apply_patch(self.root, diff, max_write_bytes=self.max_write_bytes)

    # --------------------------------------------------------------- commands
    def check_command(self, argv: list[str], allowlist: list[list[str]]) -> list[str]:
        """Validate ``argv`` against ``allowlist`` (exact prefixes); returns the argv."""
        return commands.check_command(argv, allowlist)

    def run_command(self, argv: list[str], *, allowlist: list[list[str]], timeout: float = 120,
                    max_output: int = 20_000, env: dict | None = None) -> CommandResult:
        """Run an allowlisted command in the root without a shell; stdout and stderr are merged
        and only the first and last ``max_output // 2`` bytes are kept."""
        return commands.run_command(self.root, argv, allowlist=allowlist, timeout=timeout,
                                    max_output=max_output, env=env)
