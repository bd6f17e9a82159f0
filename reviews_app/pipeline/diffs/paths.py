"""File names in diff headers: git's C-style quoting, ``a/``/``b/`` prefixes, and paths that
are unsafe (``..``, control characters); plus a cheap read of a chunk's header lines."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from unidiff.constants import (
    DEV_NULL,
    RE_BINARY_DIFF,
    RE_DIFF_GIT_HEADER,
    RE_DIFF_GIT_HEADER_NO_PREFIX,
    RE_PATCH_FILE_PREFIX,
)

from .text import Chunk

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_QUOTED_OCTAL = re.compile(r"[0-3][0-7]{2}")
_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(name: str) -> str:
    """Undo git's C-style quoting of unusual file names (``"a/t\\303\\251st.py"``)."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    inner, out, i = name[1:-1], bytearray(), 0
    while i < len(inner):
        ch = inner[i]
        if ch == "\\" and i + 1 < len(inner):
            nxt = inner[i + 1]
            if _QUOTED_OCTAL.match(inner, i + 1):
                out.append(int(inner[i + 1:i + 4], 8))
                i += 4
                continue
            if nxt in _C_ESCAPES:
                out.append(_C_ESCAPES[nxt])
                i += 2
                continue
        out += ch.encode("utf-8", "surrogatepass")
        i += 1
    return out.decode("utf-8", "replace")


def raw_name(name: str | None, *, strip_prefix: bool) -> str | None:
    """A name from a header, unquoted and without ``a/``/``b/``; None for /dev/null."""
    if name is None:
        return None
    name = _unquote(name.strip())
    if name == DEV_NULL:
        return None
    if strip_prefix and RE_PATCH_FILE_PREFIX.match(name):
        name = name[2:]
    return name


def clean_path(raw: str) -> tuple[str, str]:
    """``(path, problem)``: a relative POSIX path, or the display text and why it is unsafe."""
    if CONTROL.search(raw):
        shown = CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", raw)
        return shown, "unsafe path: the file name contains control characters"
    path = posixpath.normpath(raw).lstrip("/") if raw else ""
    if path in ("", "."):
        return "(unnamed file)", ""
    if ".." in (re.split(r"[/\\]", path) if "\\" in path else path.split("/")):
        return raw, "unsafe path: the file name climbs out of the repository with `..`"
    return path, ""


def strip_prefixes(old: str | None, new: str | None, git: bool) -> bool:
    """Whether the names carry ``a/``/``b/``-style prefixes to remove."""
    names = [n for n in (old, new) if n not in (None, DEV_NULL)]
    if not names:
        return False
    names = [n[1:] if n.startswith('"') else n for n in names]
    if git:
        return all(RE_PATCH_FILE_PREFIX.match(n) for n in names)
    if old not in (None, DEV_NULL) and new not in (None, DEV_NULL):
        return names[0].startswith("a/") and names[1].startswith("b/")
    return names[0].startswith(("a/", "b/"))


def quick_path(text: str, chunk: Chunk) -> str:
    """The display path of a chunk that is only listed (past a limit): its ``+++ `` name."""
    stop = min(chunk.end, chunk.start + 2048)
    at = text.find("\n+++ ", chunk.start, stop)
    if at >= 0:
        eol = text.find("\n", at + 1, stop)
        name = text[at + 5:eol if eol >= 0 else stop].split("\t", 1)[0]
        if name.strip() != DEV_NULL:
            bare = name.lstrip('"')
            prefixed = (RE_PATCH_FILE_PREFIX.match(bare) if chunk.git
                        else bare.startswith("b/"))
            raw = raw_name(name, strip_prefix=bool(prefixed))
            if raw:
                return clean_path(raw)[0]
    return read_head(text, chunk).path


@dataclass
class Head:
    """What a chunk's header lines say, read cheaply without parsing the chunk."""

    path: str = ""
    problem: str = ""
    binary: bool = False
    deleted: bool = False


def read_head(text: str, chunk: Chunk) -> Head:
    found: dict[str, str] = {}
    head = Head()
    for line in text[chunk.start:min(chunk.end, chunk.start + 4096)].split("\n", 16)[:16]:
        c = line[:1]
        if c == "@":
            break
        if c == "d":
            if line.startswith("diff --git ") and "git" not in found:
                match = (RE_DIFF_GIT_HEADER.match(line)
                         or RE_DIFF_GIT_HEADER_NO_PREFIX.match(line))
                if match:
                    found["git"], found["git-old"] = match.group("target"), match.group("source")
            elif line.startswith("deleted file mode"):
                head.deleted = True
        elif c in ("-", "+") and line[1:4] in ("-- ", "++ "):
            found.setdefault(line[:4], line[4:].split("\t", 1)[0])
        elif c == "r" and line.startswith(("rename to ", "rename from ")):
            key, _, name = line.partition(" ")[2].partition(" ")
            found.setdefault("rename " + key, name)
        elif c == "B":
            match = RE_BINARY_DIFF.match(line)
            if match:
                head.binary = True
                found.setdefault("bin", match.group("target_filename")
                                 or match.group("source_filename"))
                found.setdefault("bin-old", match.group("source_filename"))
        elif line == "GIT binary patch":
            head.binary = True
    if found.get("+++ ", "").strip() == DEV_NULL:
        head.deleted = True
    order = ["+++ ", "rename to", "git", "bin", "--- ", "rename from", "git-old", "bin-old"]
    for key in order:
        name = found.get(key)
        if name is None or name.strip() == DEV_NULL:
            continue
        prefixed = not key.startswith("rename") and (
            RE_PATCH_FILE_PREFIX.match(name.lstrip('"')) if chunk.git
            else name.lstrip('"').startswith(("a/", "b/")))
        raw = raw_name(name, strip_prefix=bool(prefixed))
        if raw:
            head.path, head.problem = clean_path(raw)
            return head
    head.path = f"(unknown file at line {chunk.line} of the diff)"
    return head
