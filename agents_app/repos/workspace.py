"""A sandboxed view of one worktree for model-driven tools.

Everything a model passes in is untrusted. Paths go through :meth:`Workspace.resolve`, which
refuses anything that could leave the root (absolute paths, ``..``, symlinks pointing outside)
or reach git's own data (``.git``). Commands run without a shell, only when they start with an
allowlisted prefix, in their own process group so a timeout can kill everything they started.

Error messages are shown to the model, so they name only the path the model gave, never the
host path of the root.
"""

from __future__ import annotations

import codecs
import fnmatch
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import unidiff
from unidiff.errors import UnidiffParseError

DEV_NULL = "/dev/null"
BINARY_SNIFF_BYTES = 8192
MAX_SEARCH_FILE_BYTES = 2_000_000
MAX_HIT_TEXT = 300
PATCH_FUZZ_LINES = 50
_SEGMENT_SPLIT = re.compile(r"[\\/]+")
_DRIVE = re.compile(r"^[A-Za-z]:")


class ToolError(Exception):
    """A refusal or failure the model sees as the tool's observation (message is shown to the
    model)."""


class Capped(list):
    """A list that remembers whether it was cut at a limit (``truncated``)."""

    truncated: bool = False


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: int | None
    output: str
    timed_out: bool
    seconds: float
    truncated: bool


def _looks_absolute(text: str) -> bool:
    return text.startswith(("/", "\\", "~")) or bool(_DRIVE.match(text))


def _has_dotdot(text: str) -> bool:
    return ".." in _SEGMENT_SPLIT.split(text)


def _is_binary(sample: bytes) -> bool:
    return b"\0" in sample


def _split_lines(text: str) -> list[str]:
    """Lines without terminators, split on ``\\n`` only (so numbers match editors, grep and
    diff); a trailing ``\\r`` is dropped."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _keep_ends(text: str) -> list[str]:
    """Lines with their terminators (``\\n`` or ``\\r\\n``), split on ``\\n`` only."""
    return [part for part in re.split(r"(?<=\n)", text) if part]


def _strip_eol(line: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith("\n"):
        return line[:-1]
    return line


class _HeadTail:
    """Keeps the first and last ``limit // 2`` characters of a stream."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1)
        self.head = ""
        self.tail = ""
        self.total = 0

    def feed(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        room = self.half - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail += text
            if len(self.tail) > 2 * self.half:
                self.tail = self.tail[-self.half:]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + min(len(self.tail), self.half)

    def text(self) -> str:
        tail = self.tail[-self.half:]
        if not self.truncated:
            return self.head + self.tail
        omitted = self.total - len(self.head) - len(tail)
        return f"{self.head}\n[... {omitted} characters of output omitted ...]\n{tail}"


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
        """The absolute path for a model-given relative ``path``, or :class:`ToolError`.

        Refuses empty paths, NUL bytes, absolute paths (POSIX, drive letters, UNC), any ``..``
        segment, anything inside ``.git``, and paths whose real location (symlinks followed,
        parents included) leaves the root. With ``for_write`` no component may be a symlink at
        all, so writes land exactly where the path says."""
        if not isinstance(path, str):
            raise ToolError("Refused: the path must be a string")
        shown = repr(path)
        if not path.strip():
            raise ToolError("Refused: the path is empty")
        if "\0" in path:
            raise ToolError("Refused: the path contains a NUL byte")
        if _looks_absolute(path):
            raise ToolError(f"Refused: {shown} is an absolute path; use a path relative to "
                            "the repository root")
        segments = [s for s in _SEGMENT_SPLIT.split(path) if s not in ("", ".")]
        if ".." in segments:
            raise ToolError(f"Refused: {shown} is outside the repository ('..' is not allowed)")
        if any(s.lower() == ".git" for s in segments):
            raise ToolError(f"Refused: {shown} is inside .git, which tools may not touch")
        lexical = self.root.joinpath(*segments)
        real = Path(os.path.realpath(lexical))
        if real != self.root and not real.is_relative_to(self.root):
            raise ToolError(f"Refused: {shown} is outside the repository")
        rel_real = real.relative_to(self.root).parts
        if rel_real and rel_real[0].lower() == ".git":
            raise ToolError(f"Refused: {shown} leads into .git, which tools may not touch")
        if for_write:
            if not segments:
                raise ToolError("Refused: cannot write to the repository root itself")
            current = self.root
            for segment in segments:
                current = current / segment
                if current.is_symlink():
                    raise ToolError(f"Refused: {shown} goes through a symbolic link; write to "
                                    "the link's target path instead")
            real = lexical
        if must_exist and not real.exists():
            raise ToolError(f"{shown} does not exist")
        return real

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    # ---------------------------------------------------------------- reading
    def _walk(self, path: str, pattern: str, max_depth: int | None, limit: int):
        """Yield (relative POSIX path, absolute path) of files under ``path`` matching
        ``pattern`` (fnmatch on the relative path or the name), ``.git`` skipped, symlinked
        directories not followed, at most ``limit`` + 1 entries."""
        base = self.resolve(path, must_exist=True)
        if base.is_file():
            rel = self._rel(base)
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(base.name, pattern):
                yield rel, base
            return
        count = 0
        base_depth = len(base.relative_to(self.root).parts) if base != self.root else 0
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            current = Path(dirpath)
            depth = len(current.relative_to(self.root).parts) - base_depth
            dirnames[:] = sorted(d for d in dirnames if d.lower() != ".git"
                                 and not (current / d).is_symlink())
            if max_depth is not None and depth + 1 >= max_depth:
                dirnames[:] = []
            for name in sorted(filenames):
                if name.lower() == ".git":
                    continue
                full = current / name
                rel = full.relative_to(self.root).as_posix()
                if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(name, pattern):
                    yield rel, full
                    count += 1
                    if count > limit:
                        return

    def list_files(self, path: str = ".", pattern: str = "*",
                   max_depth: int | None = None) -> list[str]:
        """Relative POSIX paths of files under ``path``, sorted. ``max_depth=1`` lists only files
        directly inside ``path`` (like ``find -maxdepth 1``). At most ``max_list`` entries; the
        returned list has ``truncated=True`` when there were more."""
        if max_depth is not None and max_depth < 1:
            raise ToolError("max_depth must be at least 1")
        found = sorted(rel for rel, _ in self._walk(path, pattern or "*", max_depth,
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
        if _is_binary(data[:BINARY_SNIFF_BYTES]):
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
            if _is_binary(handle.read(BINARY_SNIFF_BYTES)):
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
        for rel, _full in self._walk(path, pattern or "*", None, 100_000):
            try:
                real = self.resolve(rel)
                if not real.is_file() or real.stat().st_size > MAX_SEARCH_FILE_BYTES:
                    continue
                data = real.read_bytes()
            except (ToolError, OSError):
                continue
            if _is_binary(data[:BINARY_SNIFF_BYTES]):
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

    def replace(self, path: str, search: str, replacement: str, count: int = 1) -> str:
        """Replace exact occurrences of ``search``; refuses when it is missing or occurs more
        than ``count`` times."""
        if not search:
            raise ToolError("search text is empty")
        if count < 1:
            raise ToolError("count must be at least 1")
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
        if found > count:
            raise ToolError(f"The search text occurs {found} times in {path!r} but count is "
                            f"{count}. Include more surrounding lines to make it unique, or set "
                            f"count to {found} to replace every occurrence.")
        new = content.replace(search, replacement, count)
        data = new.encode("utf-8", errors="surrogateescape")
        if len(data) > self.max_write_bytes:
            raise ToolError(f"the result would be {len(data)} bytes, more than the "
                            f"{self.max_write_bytes}-byte limit")
        self._write_bytes(target, data)
        return f"Replaced {found} occurrence{'s' if found != 1 else ''} in {self._rel(target)}"

    def delete_file(self, path: str) -> str:
        target = self.resolve(path, for_write=True, must_exist=True)
        if target.is_dir():
            raise ToolError(f"{path!r} is a directory; only files can be deleted")
        target.unlink()
        return f"Deleted {self._rel(target)}"

    # ---------------------------------------------------------------- patches
    def apply_patch(self, diff: str) -> str:
        """Apply a unified diff (git-style or plain) to the workspace, all or nothing.

        Each hunk must match exactly at its stated position (after earlier hunks' shifts), or
        its old lines must be found within ±50 lines of it (nearest wins). Every file is checked
        before anything is written; if a write still fails, files written so far are
        restored."""
        if not diff or not diff.strip():
            raise ToolError("The patch is empty")
        if not diff.endswith("\n"):
            diff += "\n"
        try:
            patch = unidiff.PatchSet(diff)
        except UnidiffParseError as exc:
            raise ToolError(f"Could not parse the patch as a unified diff: {exc}") from None
        if not len(patch):
            raise ToolError("The patch contains no file changes (expected '--- a/path', "
                            "'+++ b/path' and '@@' hunk headers)")
        # path -> new bytes (None = delete); original bytes kept for rollback
        pending: dict[Path, bytes | None] = {}
        shown: dict[Path, str] = {}
        summary: list[str] = []
        for pf in patch:
            self._plan_file(pf, pending, shown, summary)
        originals: dict[Path, bytes | None] = {}
        try:
            for target, data in pending.items():
                originals[target] = target.read_bytes() if target.exists() else None
                if data is None:
                    if target.exists():
                        target.unlink()
                else:
                    self._write_bytes(target, data)
        except OSError as exc:
            for target, data in originals.items():
                try:
                    if data is None:
                        target.unlink(missing_ok=True)
                    else:
                        self._write_bytes(target, data)
                except OSError:
                    pass
            raise ToolError(f"Writing {shown.get(target, 'a file')!r} failed "
                            f"({exc.strerror}); nothing was changed") from None
        return "Applied patch: " + "; ".join(summary)

    @staticmethod
    def _patch_paths(pf) -> tuple[str | None, str | None, bool]:
        """(source, target, git_style): paths with a/ b/ prefixes and quotes removed; None for
        /dev/null."""
        git_style = bool(pf.patch_info) and any(
            str(line).startswith("diff --git ") for line in pf.patch_info)

        def clean(name: str | None, prefix: str) -> str | None:
            if name is None or name == DEV_NULL:
                return None
            if len(name) >= 2 and name.startswith('"') and name.endswith('"'):
                name = name[1:-1]
            if name.startswith(prefix):
                name = name[2:]
            return name

        src_raw, tgt_raw = pf.source_file, pf.target_file
        prefixed = (src_raw in (None, DEV_NULL) or str(src_raw).lstrip('"').startswith("a/")) \
            and (tgt_raw in (None, DEV_NULL) or str(tgt_raw).lstrip('"').startswith("b/"))
        if git_style or prefixed:
            return clean(src_raw, "a/"), clean(tgt_raw, "b/"), git_style
        return clean(src_raw, "\0"), clean(tgt_raw, "\0"), git_style

    def _current(self, target: Path, pending: dict[Path, bytes | None]) -> bytes | None:
        if target in pending:
            return pending[target]
        if target.is_file():
            return target.read_bytes()
        return None

    def _plan_file(self, pf, pending, shown, summary) -> None:
        src, tgt, git_style = self._patch_paths(pf)
        label = tgt or src or "?"
        if getattr(pf, "is_binary_file", False):
            raise ToolError(f"Binary patches are not supported ({label!r}); use write_file")
        if pf.is_symlink or pf.is_submodule:
            raise ToolError(f"Patches that create or change symlinks or submodules are not "
                            f"supported ({label!r})")
        if src is None and tgt is None:
            raise ToolError("A file in the patch has /dev/null as both source and target")
        if src is None:  # new file
            target = self.resolve(tgt, for_write=True)
            if self._current(target, pending) is not None or target.exists():
                raise ToolError(f"The patch creates {tgt!r}, but it already exists")
            new_lines = self._apply_hunks(tgt, [], pf)
            pending[target], shown[target] = "".join(new_lines).encode(
                "utf-8", "surrogateescape"), tgt
            summary.append(f"created {tgt} (+{pf.added})")
            return
        if tgt is None:  # deletion
            target = self.resolve(src, for_write=True)
            current = self._current(target, pending)
            if current is None:
                raise ToolError(f"The patch deletes {src!r}, but it does not exist")
            old = _keep_ends(current.decode("utf-8", "surrogateescape"))
            if len(pf):
                rest = self._apply_hunks(src, old, pf)
                if rest:
                    raise ToolError(f"The patch deletes {src!r}, but its removed lines do not "
                                    "cover the whole file")
            pending[target], shown[target] = None, src
            summary.append(f"deleted {src}")
            return
        rename = git_style and src != tgt
        if rename:
            source = self.resolve(src, for_write=True)
            target = self.resolve(tgt, for_write=True)
            if self._current(target, pending) is not None:
                raise ToolError(f"The patch renames {src!r} to {tgt!r}, but {tgt!r} exists")
        else:
            name = tgt
            if src != tgt:  # plain diff with different names (e.g. x.orig -> x)
                candidate = self.resolve(tgt, for_write=True)
                name = tgt if self._current(candidate, pending) is not None else src
            source = target = self.resolve(name, for_write=True)
            src = tgt = name
        current = self._current(source, pending)
        if current is None:
            raise ToolError(f"The patch modifies {src!r}, but it does not exist (use /dev/null "
                            "as the source to create a file)")
        if _is_binary(current[:BINARY_SNIFF_BYTES]):
            raise ToolError(f"{src!r} is a binary file; it cannot be patched")
        new_lines = self._apply_hunks(src, _keep_ends(current.decode("utf-8", "surrogateescape")),
                                      pf)
        data = "".join(new_lines).encode("utf-8", "surrogateescape")
        if len(data) > self.max_write_bytes:
            raise ToolError(f"Patching {tgt!r} would make it {len(data)} bytes, more than the "
                            f"{self.max_write_bytes}-byte limit")
        if rename:
            pending[source], shown[source] = None, src
            summary.append(f"renamed {src} -> {tgt} (+{pf.added} -{pf.removed})")
        else:
            summary.append(f"modified {tgt} (+{pf.added} -{pf.removed})")
        pending[target], shown[target] = data, tgt

    @staticmethod
    def _hunk_ops(hunk) -> list[tuple[str, str]]:
        """(kind, line) pairs of a hunk — kind ' ', '-' or '+', line with its terminator; a
        '\\ No newline at end of file' marker strips the newline of the line before it."""
        ops: list[tuple[str, str]] = []
        for line in hunk:
            kind = line.line_type
            if kind == "\\":
                if ops:
                    ops[-1] = (ops[-1][0], _strip_eol(ops[-1][1]))
                continue
            value = line.value if line.value.endswith("\n") else line.value + "\n"
            ops.append((" " if kind == "" else kind, value))
        return ops

    def _apply_hunks(self, path: str, lines: list[str], pf) -> list[str]:
        result = list(lines)
        crlf = bool(result) and result[0].endswith("\r\n")
        offset = 0
        floor = 0  # hunks apply in order: never before the end of the previous one
        for number, hunk in enumerate(pf, 1):
            ops = self._hunk_ops(hunk)
            old = [value for kind, value in ops if kind in (" ", "-")]
            if hunk.source_length == 0:
                expected = hunk.source_start + offset
            else:
                expected = hunk.source_start - 1 + offset
            expected = max(expected, 0)
            where = self._locate(result, old, expected, floor)
            if where is None:
                header = (f"@@ -{hunk.source_start},{hunk.source_length} "
                          f"+{hunk.target_start},{hunk.target_length} @@")
                raise ToolError(self._mismatch(path, number, header, result, old, expected))
            new: list[str] = []
            at = where
            for kind, value in ops:
                if kind == " ":
                    new.append(result[at])  # keep the file's own bytes for context lines
                    at += 1
                elif kind == "-":
                    at += 1
                else:
                    if crlf and value.endswith("\n") and not value.endswith("\r\n"):
                        value = value[:-1] + "\r\n"
                    new.append(value)
            if where == len(result) and result and not result[-1].endswith("\n"):
                result[-1] += "\r\n" if crlf else "\n"  # appending after a last line
            result[where:where + len(old)] = new
            offset += (where - expected) + len(new) - len(old)
            floor = where + len(new)
        return result

    @staticmethod
    def _matches(lines: list[str], old: list[str], at: int) -> bool:
        if at < 0 or at + len(old) > len(lines):
            return False
        for index, want in enumerate(old):
            have = lines[at + index]
            if _strip_eol(have) != _strip_eol(want):
                return False
            # the missing-newline marker must agree only at the very end of the file
            if have.endswith("\n") != want.endswith("\n") and at + index != len(lines) - 1:
                return False
        return True

    def _locate(self, lines: list[str], old: list[str], expected: int, floor: int) -> int | None:
        if not old:
            return expected if floor <= expected <= len(lines) else None
        if expected >= floor and self._matches(lines, old, expected):
            return expected
        for distance in range(1, PATCH_FUZZ_LINES + 1):
            for at in (expected - distance, expected + distance):
                if at >= floor and self._matches(lines, old, at):
                    return at
        return None

    @staticmethod
    def _mismatch(path: str, number: int, header: str, lines: list[str], old: list[str],
                  expected: int) -> str:
        start = f"Hunk #{number} ({header}) for {path!r} does not apply"
        if not old:
            return f"{start}: line {expected} is past the end of the file ({len(lines)} lines)"
        detail = ""
        for index, want in enumerate(old):
            at = expected + index
            if at >= len(lines):
                detail = (f": the file has only {len(lines)} lines, but the hunk expects "
                          f"{_strip_eol(want)!r} at line {at + 1}")
                break
            if _strip_eol(lines[at]) != _strip_eol(want):
                detail = (f": line {at + 1} is {_strip_eol(lines[at])[:200]!r} but the hunk "
                          f"expects {_strip_eol(want)[:200]!r}")
                break
        return (f"{start}{detail}, and its old lines were not found within "
                f"±{PATCH_FUZZ_LINES} lines. Nothing was changed; read the file again and "
                "resend the whole patch.")

    # --------------------------------------------------------------- commands
    def check_command(self, argv: list[str], allowlist: list[list[str]]) -> list[str]:
        """Validate ``argv`` against ``allowlist`` (exact prefixes); returns the argv."""
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
                if _looks_absolute(value) or _has_dotdot(value):
                    raise ToolError(f"Refused: argument {arg!r} points outside the repository "
                                    "(absolute paths and '..' are not allowed)")
        return argv

    def run_command(self, argv: list[str], *, allowlist: list[list[str]], timeout: float = 120,
                    max_output: int = 20_000, env: dict | None = None) -> CommandResult:
        """Run an allowlisted command in the root without a shell; stdout and stderr are merged
        and only the first and last ``max_output // 2`` characters are kept."""
        argv = self.check_command(argv, allowlist)
        home = tempfile.mkdtemp(prefix="quorum-home-")
        child_env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": home,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "TMPDIR": home,
        }
        child_env.update({str(k): str(v) for k, v in (env or {}).items()})
        buffer = _HeadTail(max_output)
        began = time.monotonic()
        try:
            try:
                proc = subprocess.Popen(  # noqa: S603 - allowlisted argv, no shell, checked above
                    argv, cwd=self.root, shell=False, stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=child_env,
                    start_new_session=True)
            except FileNotFoundError:
                raise ToolError(f"Command not found: {argv[0]!r}") from None
            except PermissionError:
                raise ToolError(f"Command is not executable: {argv[0]!r}") from None

            def pump() -> None:
                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                fd = proc.stdout.fileno()
                while True:
                    try:
                        chunk = os.read(fd, 65536)
                    except OSError:
                        break
                    if not chunk:
                        break
                    buffer.feed(decoder.decode(chunk))
                buffer.feed(decoder.decode(b"", final=True))

            reader = threading.Thread(target=pump, daemon=True)
            reader.start()
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            # kill the whole group: on timeout, and any stragglers left behind on success
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            reader.join(timeout=5)
            proc.stdout.close()
            seconds = time.monotonic() - began
        finally:
            shutil.rmtree(home, ignore_errors=True)
        return CommandResult(argv=argv, exit_code=None if timed_out else proc.returncode,
                             output=buffer.text(), timed_out=timed_out,
                             seconds=round(seconds, 3), truncated=buffer.truncated)
