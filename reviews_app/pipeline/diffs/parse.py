"""``prepare()``: walk the chunks of a diff under the limits, parse each with unidiff on its
own, and sort every file into the files to review or the coverage report."""

from __future__ import annotations

import posixpath

from unidiff import PatchSet
from unidiff.constants import RE_HUNK_HEADER
from unidiff.errors import UnidiffParseError

from .classify import generated_by_content, generated_by_name, language_of
from .hunks import clip, line_count, read_hunks, whole_new_file
from .limits import (
    BINARY_DETAIL,
    DELETED_DETAIL,
    EMPTY_MESSAGE,
    GENERATED_NAME_DETAIL,
    MODEL_ONLY_DETAIL,
    NO_HEADERS_MESSAGE,
    NOT_A_DIFF_MESSAGE,
    DiffError,
    Limits,
    Prepared,
    coverage_entry,
    cut_detail,
)
from .paths import CONTROL, clean_path, quick_path, raw_name, read_head, strip_prefixes
from .text import Chunk, decode_input, normalise_text, split_chunks

_ERROR_TEXT_MAX = 160


class _State:
    def __init__(self, limits: Limits, contents: dict):
        self.limits = limits
        self.contents = contents
        self.result = Prepared()
        self.reviewed_bytes = 0
        self.cut: str | None = None           # over_file_limit / over_byte_limit once reached
        self.first_error = ""                 # "path (line n): error" of the first failure
        self.unparsed = 0                     # files unreadable because they failed to parse

    def skip(self, path: str, reason: str, detail: str) -> None:
        self.result.coverage.append(coverage_entry(path, reason, detail))


def _file(state: _State, pf, git: bool, chunk_line: int) -> None:
    result, limits = state.result, state.limits
    strip = strip_prefixes(pf.source_file, pf.target_file, git)
    old_raw = raw_name(pf.source_file, strip_prefix=strip)
    new_raw = raw_name(pf.target_file, strip_prefix=strip)
    old_path = old_problem = None
    if old_raw is not None:
        old_path, old_problem = clean_path(old_raw)
    if new_raw is not None:
        path, problem = clean_path(new_raw)
    elif old_path is not None:
        path, problem = old_path, old_problem
    else:
        path, problem = f"(unnamed file at line {chunk_line} of the diff)", ""
    problem = problem or old_problem
    if problem:
        state.skip(path, "unreadable", f"Not reviewed: {problem}.")
        return
    if pf.is_binary_file:
        state.skip(path, "binary", BINARY_DETAIL)
        return
    if new_raw is None or pf.is_removed_file:
        state.skip(path, "deleted", DELETED_DETAIL)
        return
    if generated_by_name(path):
        state.skip(path, "generated", GENERATED_NAME_DETAIL)
        return
    renamed = git and old_path is not None and old_path != path
    if pf.is_added_file or old_raw is None:
        status = "added"
    elif renamed:
        status = "renamed"
    else:
        status = "modified"
    if not len(pf):
        if renamed:
            state.skip(path, "rename_only", f"Renamed from {old_path} without content changes.")
            return
        if pf.source_mode and pf.target_mode and pf.source_mode != pf.target_mode:
            state.skip(path, "mode_only", f"Only the file mode changed ({pf.source_mode} → "
                                          f"{pf.target_mode}): no content to review.")
            return
        if status != "added":
            state.skip(path, "unreadable", "Not reviewed: the diff has a header for this file "
                                           "but no hunks (`@@ … @@`); it may be cut short.")
            return
    hunks, no_newline = read_hunks(pf)
    content = state.contents.get(path)
    if not isinstance(content, str):
        content = None
    if content is None and status == "added":
        content = whole_new_file(pf, hunks, no_newline)
    if generated_by_content(hunks, content):
        state.skip(path, "generated", "Generated file (marked `@generated` or `DO NOT EDIT` "
                                      "at the top): not reviewed.")
        return
    if len(result.files) >= limits.max_files:     # several files in one chunk
        state.skip(path, "over_file_limit", cut_detail("over_file_limit", limits))
        return
    hunks, kept, total = clip(hunks, limits.max_lines_per_file)
    clipped = kept < total
    language, lexer = language_of(posixpath.basename(path))
    is_python = path.lower().endswith((".py", ".pyi"))
    mode = ("heavy" if content is not None
            and line_count(content) <= limits.heavy_max_lines else "light")
    result.files.append({
        "path": path, "old_path": old_path, "status": status, "language": language,
        "lexer": lexer, "is_python": is_python, "hunks": hunks, "added": pf.added,
        "removed": pf.removed, "content": content, "mode": mode, "clipped": clipped,
        "no_newline_at_end": no_newline,
    })
    if not is_python:
        result.coverage.append(coverage_entry(path, "model_only", MODEL_ONLY_DETAIL, True))
    if clipped:
        result.coverage.append(coverage_entry(
            path, "clipped", f"Only the first {kept} of {total} changed lines were reviewed "
                             f"(limit {limits.max_lines_per_file} per file).", True))


def _chunk(state: _State, text: str, chunk: Chunk) -> None:
    limits, result = state.limits, state.result
    if state.cut is None and len(result.files) >= limits.max_files:
        state.cut = "over_file_limit"
    size, chunk_text = 0, ""
    if state.cut is None:
        chunk_text = text[chunk.start:chunk.end]
        size = len(chunk_text) if chunk_text.isascii() else len(chunk_text.encode("utf-8"))
        if state.reviewed_bytes + size > limits.max_bytes:
            state.cut = "over_byte_limit"
    if state.cut is not None:
        result.total_files += 1
        state.skip(quick_path(text, chunk), state.cut, cut_detail(state.cut, limits))
        return
    head = read_head(text, chunk)
    # Files whose header already decides that they are skipped are not parsed (a diff that
    # deletes or vendors 20,000 files stays fast); the reasons match those of _file().
    if head.problem or head.binary or head.deleted or generated_by_name(head.path):
        result.total_files += 1
        if head.problem:
            state.skip(head.path, "unreadable", f"Not reviewed: {head.problem}.")
        elif head.binary:
            state.skip(head.path, "binary", BINARY_DETAIL)
        elif head.deleted:
            state.skip(head.path, "deleted", DELETED_DETAIL)
        else:
            state.skip(head.path, "generated", GENERATED_NAME_DETAIL)
        return
    try:
        patch = PatchSet(chunk_text)
    except Exception as exc:      # UnidiffParseError, or anything unidiff trips over
        result.total_files += 1
        message = str(exc) if isinstance(exc, UnidiffParseError) else type(exc).__name__
        message = CONTROL.sub(" ", message).strip()
        if len(message) > _ERROR_TEXT_MAX:
            message = message[:_ERROR_TEXT_MAX] + "…"
        where = f"line {chunk.line} of the diff"
        state.unparsed += 1
        if not state.first_error:
            state.first_error = f"{head.path} ({where}): {message}"
        state.skip(head.path, "unreadable",
                   f"Not reviewed: this file's part of the diff ({where}) could not be read: "
                   f"{message}. The diff may be cut short or edited by hand.")
        return
    if not patch:
        result.total_files += 1
        state.skip(head.path, "unreadable",
                   f"Not reviewed: no file could be read from line {chunk.line} of the diff.")
        return
    before = len(result.files)
    for pf in patch:
        result.total_files += 1
        _file(state, pf, chunk.git, chunk.line)
    if len(result.files) > before:
        state.reviewed_bytes += size
        if dropped := _dropped_lines(chunk_text, patch):
            result.coverage.append(coverage_entry(
                result.files[-1]["path"], "unreadable",
                f"Part not reviewed: {dropped} changed line(s) in this file's part of the diff "
                f"(from line {chunk.line}) follow a hunk whose header counts fewer lines, so "
                "they could not be read. The diff may be edited by hand.", True))


def _dropped_lines(chunk_text: str, patch) -> int:
    """Changed lines in the text that unidiff did not read. A hunk whose header counts fewer
    lines than follow it ends early, and unidiff passes over the rest of the file's part in
    silence: a line hidden there would be neither analysed nor shown."""
    _, hunk_start, body = chunk_text.partition("\n@@")
    if not hunk_start:
        return 0
    lines = body.split("\n")
    headers = {i for i in range(len(lines) - 1)
               if lines[i].startswith("--- ") and lines[i + 1].startswith("+++ ")}
    headers |= {i + 1 for i in headers}
    in_text = sum(1 for i, line in enumerate(lines)
                  if line[:1] in ("+", "-") and line and i not in headers)
    return max(0, in_text - sum(pf.added + pf.removed for pf in patch))


def _prepare(text, contents, limits: Limits) -> Prepared:
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = decode_input(text)[0]
    if not isinstance(text, str):
        raise DiffError("The diff must be text. Paste the output of `git diff` or upload a "
                        ".diff/.patch file.")
    if not text.strip().lstrip("\ufeff").strip():
        raise DiffError(EMPTY_MESSAGE)
    if not isinstance(limits, Limits):
        limits = Limits()
    contents = contents if isinstance(contents, dict) else {}
    text = normalise_text(text)
    if not text.endswith("\n"):
        text += "\n"
    chunks = split_chunks(text)
    preamble = text[:chunks[0].start] if chunks else text
    orphan = "@@ -" in preamble and any(
        RE_HUNK_HEADER.match(line) for line in preamble.split("\n") if line.startswith("@@ -"))
    if not chunks:
        raise DiffError(NO_HEADERS_MESSAGE if orphan else NOT_A_DIFF_MESSAGE)
    state = _State(limits, contents)
    if orphan:
        state.result.total_files += 1
        state.unparsed += 1
        state.skip("(hunks before the first file header)", "unreadable",
                   "Not reviewed: these hunks come before any file header, so their file is "
                   "unknown.")
    for chunk in chunks:
        _chunk(state, text, chunk)
    result = state.result
    if state.unparsed and state.unparsed == result.total_files:
        raise DiffError(
            "No file in this diff could be read. The first problem, in "
            f"{state.first_error or 'the hunks before the first file header'}. Check that the "
            "whole diff was copied, including the `@@ … @@` hunk headers and every line after "
            "them.")
    return result


def prepare(text: str, *, contents: dict[str, str | None] | None = None,
            limits: Limits = Limits()) -> Prepared:  # noqa: B008 - frozen, shared safely
    """Parse ``text`` into files to review and a coverage report; raise only ``DiffError``.

    ``contents`` maps a (new) file path to its full new text when known; it makes the file
    ``heavy`` when it has at most ``limits.heavy_max_lines`` lines. ``added``/``removed``
    count every changed line of the file in the diff, also when the hunks are clipped.
    """
    try:
        return _prepare(text, contents, limits)
    except DiffError:
        raise
    except Exception as exc:  # never let a surprise in an untrusted diff escape as a crash
        raise DiffError("The diff could not be read (unexpected "
                        f"{type(exc).__name__}). Check that it is the unchanged output of "
                        "`git diff`.") from exc
