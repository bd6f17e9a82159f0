"""The diff as text: decoding uploaded bytes, normalising line endings and lone surrogates, and
splitting it into one chunk per file (``diff --git`` lines, else the plain-diff rules)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from unidiff.constants import RE_BINARY_DIFF, RE_HUNK_HEADER

_CR_BEFORE_LF = re.compile(r"\r+\n")
_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_input(data: bytes) -> tuple[str, bool]:
    """Decode uploaded bytes; return ``(text, had_invalid)``.

    A UTF-8 byte order mark is stripped. Invalid UTF-8 is decoded with ``errors="replace"``
    (U+FFFD) and ``had_invalid`` is True, so the caller can add a ``not_utf8`` coverage note.
    A UTF-16 byte order mark (what Windows PowerShell writes for ``git diff > x.diff``) is
    decoded as UTF-16 the same way.
    """
    raw = bytes(data)
    encoding = "utf-8"
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    elif raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    try:
        return raw.decode(encoding), False
    except UnicodeDecodeError:
        return raw.decode(encoding, errors="replace"), True


def normalise_text(text: str) -> str:
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:        # lone surrogates: make them U+FFFD like bad bytes
        text = _SURROGATE.sub("\ufffd", text)
    if "\r" in text:
        if "\n" not in text:          # old Mac line endings
            text = text.replace("\r", "\n")
        text = _CR_BEFORE_LF.sub("\n", text)
    return text


@dataclass
class Chunk:
    start: int                        # character offsets into the normalised diff text
    end: int
    git: bool
    line: int = 1                     # line number of its first line in the diff


_GIT_START = re.compile(r"^diff --git ", re.MULTILINE)


def _count(value: str | None) -> int:
    if value is None:
        return 1
    return int(value) if len(value) < 19 else 10**18


def split_chunks(text: str) -> list[Chunk]:
    """One chunk per file: at ``diff --git`` lines, else by the plain-diff rules."""
    starts = [match.start() for match in _GIT_START.finditer(text)]
    if starts:
        chunks = [Chunk(start, end, True)
                  for start, end in zip(starts, [*starts[1:], len(text)], strict=True)]
    else:
        chunks = _split_plain(text)
    pos, line = 0, 1
    for chunk in chunks:
        line += text.count("\n", pos, chunk.start)
        pos, chunk.line = chunk.start, line
    return chunks


def _split_plain(text: str) -> list[Chunk]:
    """Chunks of a diff without git headers: at ``--- ``/``+++ `` pairs and binary notes.

    The hunk line counts are followed so that ``--- ``/``+++ `` lines inside a hunk (a removed
    ``-- x`` next to an added ``++ y``) do not start a file, unless a hunk header follows them
    (which no valid hunk body can contain).
    """
    lines = text.split("\n")
    chunks: list[Chunk] = []
    old_left = new_left = pos = 0
    n = len(lines)
    for i, line in enumerate(lines):
        here, pos = pos, pos + len(line) + 1
        c = line[:1]
        if old_left > 0 or new_left > 0:
            if c == "+":
                new_left -= 1
                continue
            if c == " " or c == "":
                old_left -= 1
                new_left -= 1
                continue
            if c == "\\":
                continue
            if c == "-" and not (line.startswith("--- ") and i + 2 < n
                                 and lines[i + 1].startswith("+++ ")
                                 and lines[i + 2].startswith("@@ -")):
                old_left -= 1
                continue
            old_left = new_left = 0   # not a hunk line: the hunk is over (or cut short)
        if c == "-":
            if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
                chunks.append(Chunk(here, len(text), False))
        elif c == "@":
            match = RE_HUNK_HEADER.match(line)
            if match and chunks:
                old_left, new_left = _count(match.group(2)), _count(match.group(4))
        elif c == "B" and RE_BINARY_DIFF.match(line):
            chunks.append(Chunk(here, len(text), False))
    for before, after in zip(chunks, chunks[1:], strict=False):
        before.end = after.start
    return chunks
