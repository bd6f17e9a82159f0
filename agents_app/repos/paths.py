"""Keeping model-given paths inside a workspace root.

Everything a model passes in is untrusted. :func:`resolve` refuses anything that could leave the
root (absolute paths, ``..``, symlinks pointing outside) or reach git's own data (``.git``).
Error messages are shown to the model, so they name only the path the model gave, never the
host path of the root.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

BINARY_SNIFF_BYTES = 8192
_SEGMENT_SPLIT = re.compile(r"[\\/]+")
_DRIVE = re.compile(r"^[A-Za-z]:")


class ToolError(Exception):
    """A refusal or failure the model sees as the tool's observation (message is shown to the
    model)."""


def looks_absolute(text: str) -> bool:
    return text.startswith(("/", "\\", "~")) or bool(_DRIVE.match(text))


def has_dotdot(text: str) -> bool:
    return ".." in _SEGMENT_SPLIT.split(text)


def is_binary(sample: bytes) -> bool:
    return b"\0" in sample


def resolve(root: Path, path: str, *, must_exist: bool = False, for_write: bool = False) -> Path:
    """The absolute path for a model-given relative ``path`` under ``root`` (a real path), or
    :class:`ToolError`.

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
    if looks_absolute(path):
        raise ToolError(f"Refused: {shown} is an absolute path; use a path relative to "
                        "the repository root")
    segments = [s for s in _SEGMENT_SPLIT.split(path) if s not in ("", ".")]
    if ".." in segments:
        raise ToolError(f"Refused: {shown} is outside the repository ('..' is not allowed)")
    if any(s.lower() == ".git" for s in segments):
        raise ToolError(f"Refused: {shown} is inside .git, which tools may not touch")
    lexical = root.joinpath(*segments)
    real = Path(os.path.realpath(lexical))
    if real != root and not real.is_relative_to(root):
        raise ToolError(f"Refused: {shown} is outside the repository")
    rel_real = real.relative_to(root).parts
    if rel_real and rel_real[0].lower() == ".git":
        raise ToolError(f"Refused: {shown} leads into .git, which tools may not touch")
    if for_write:
        if not segments:
            raise ToolError("Refused: cannot write to the repository root itself")
        current = root
        for segment in segments:
            current = current / segment
            if current.is_symlink():
                raise ToolError(f"Refused: {shown} goes through a symbolic link; write to "
                                "the link's target path instead")
        real = lexical
    if must_exist and not real.exists():
        raise ToolError(f"{shown} does not exist")
    return real


def relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path != root else "."


def walk(root: Path, path: str, pattern: str, max_depth: int | None,
         limit: int) -> Iterator[tuple[str, Path]]:
    """Yield (relative POSIX path, absolute path) of files under ``path`` matching ``pattern``
    (fnmatch on the relative path or the name), ``.git`` skipped, symlinked directories not
    followed, at most ``limit`` + 1 entries."""
    base = resolve(root, path, must_exist=True)
    if base.is_file():
        rel = relative(root, base)
        if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(base.name, pattern):
            yield rel, base
        return
    count = 0
    base_depth = len(base.relative_to(root).parts) if base != root else 0
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        current = Path(dirpath)
        depth = len(current.relative_to(root).parts) - base_depth
        dirnames[:] = sorted(d for d in dirnames if d.lower() != ".git"
                             and not (current / d).is_symlink())
        if max_depth is not None and depth + 1 >= max_depth:
            dirnames[:] = []
        for name in sorted(filenames):
            if name.lower() == ".git":
                continue
            full = current / name
            rel = full.relative_to(root).as_posix()
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(name, pattern):
                yield rel, full
                count += 1
                if count > limit:
                    return
