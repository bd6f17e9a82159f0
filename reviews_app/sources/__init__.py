"""Where a review's input comes from: a local git range (:mod:`.git`) or a GitHub pull request
(:mod:`.github`).

Both produce a :class:`Source`: a unified diff plus, where it can be read, the full new text
of each changed file (for "heavy mode"). Every input here is untrusted: the repository path,
the revision range and the pull request URL come from a web form, and the answers come from
git and from a remote server. So:

* local paths must resolve (symlinks included) inside one of the configured roots, and so must
  the repository's top level and git directory;
* revisions must match a strict pattern (no leading ``-``, no shell, argument lists only) and
  are turned into full SHAs before any other git command sees them;
* git runs through :mod:`common.proc` (a time limit, a scrubbed environment: no prompts, no
  system or user config) with no external diff or textconv;
* every read is capped in bytes and files, and a too-large diff is cut at a file boundary and
  reported in ``meta`` (``truncated`` / ``truncated_files``);
* the GitHub token is sent in a header only and never appears in an error message.

This package has no Django imports: the caller passes the settings in. This module holds what
both sources share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class SourceError(ValueError):
    """A problem with the review's source; the message is shown to the user as-is."""


@dataclass
class Source:
    kind: str  # "git" | "github"
    label: str
    diff_text: str
    contents: dict[str, str | None] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)


_FILE_BOUNDARY = b"\ndiff --git "


def _count_files(diff: bytes) -> int:
    return diff.count(_FILE_BOUNDARY) + (1 if diff.startswith(b"diff --git ") else 0)


def cut_diff(data: bytes, max_bytes: int, total_files: int) -> tuple[bytes, dict]:
    """Keep whole files only, at most ``max_bytes``; returns the kept bytes and meta to add."""
    if len(data) <= max_bytes:
        return data, {}
    # the last file boundary whose newline still fits: data[:cut + 1] is <= max_bytes long
    cut = data.rfind(_FILE_BOUNDARY, 0, max(max_bytes - 1 + len(_FILE_BOUNDARY), 0))
    kept = data[: cut + 1] if cut >= 0 else b""
    total = max(total_files, _count_files(data))
    dropped = max(total - _count_files(kept), 1)
    return kept, {"truncated": True, "truncated_files": dropped}


def text_or_none(data: bytes) -> str | None:
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
