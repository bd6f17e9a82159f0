"""A pull request (or what changed in it since an earlier round) as a review input: one unified
diff with ``diff --git`` headers that ``reviews_app.pipeline.diffs.prepare`` reads, the new
text of the changed files (for heavy mode) and a coverage report.

No file is dropped silently. A file whose patch the provider left out or clipped is fetched
(at ``head_sha`` and at the base) and its hunks rebuilt; a binary file stays in the diff as
"Binary files … differ" (the parser reports it); a file too large to fetch, or beyond the
byte or file budget, gets a coverage entry saying so.
"""

from __future__ import annotations

import difflib
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from common import turns
from reviews_app.pipeline.diffs.limits import coverage_entry

from .base import ChangedFile, HostClient, HostError
from .http import TooLarge, safe_repo_path

POOL = 8
_NEEDS_QUOTE = re.compile(r'[\x00-\x1f\x7f"\\]')
_ESC = {"\t": "\\t", "\n": "\\n", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


@dataclass
class PullInput:
    diff_text: str
    contents: dict[str, str | None] = field(default_factory=dict)
    coverage: list[dict] = field(default_factory=list)
    files: list[ChangedFile] = field(default_factory=list)
    from_sha: str = ""  # what the diff starts from: empty when the round became a full one


FULL_ROUND = "full_round"
FULL_ROUND_PATH = "(the new commits)"


def full_round(why: str) -> dict:
    """The coverage entry of a round asked to review new commits that reviewed the whole pull
    request instead, saying why."""
    return {"path": FULL_ROUND_PATH, "reason": FULL_ROUND, "reviewed": True, "detail": why}


@dataclass
class _Got:
    """One fetched version of a file: bytes, or why there are none."""

    data: bytes | None = None
    too_large: bool = False

    @property
    def text(self) -> str | None:
        if self.data is None or b"\x00" in self.data:
            return None
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    @property
    def binary(self) -> bool:
        return self.data is not None and self.text is None


def name(prefix: str, path: str) -> str:
    """A file name for a diff header, quoted the way git does when it must be."""
    if not _NEEDS_QUOTE.search(path):
        return prefix + path
    inner = "".join(_ESC.get(ch, f"\\{ord(ch):03o}" if ord(ch) < 32 or ord(ch) == 127 else ch)
                    for ch in prefix + path)
    return f'"{inner}"'


def header(f: ChangedFile) -> str:
    old = f.previous_path or f.path
    lines = [f"diff --git {name('a/', old)} {name('b/', f.path)}"]
    if f.status == "added":
        lines.append("new file mode 100644")
    elif f.status == "removed":
        lines.append("deleted file mode 100644")
    elif f.previous_path and f.previous_path != f.path:
        lines += [f"rename from {name('', old)}", f"rename to {name('', f.path)}"]
    return "\n".join(lines) + "\n"


def file_heads(f: ChangedFile) -> str:
    a = "/dev/null" if f.status == "added" else name("a/", f.previous_path or f.path)
    b = "/dev/null" if f.status == "removed" else name("b/", f.path)
    return f"--- {a}\n+++ {b}\n"


def rebuild(old: str | None, new: str | None) -> str:
    """The hunks turning ``old`` into ``new`` (no file headers), each line ending in \\n."""
    rows = list(difflib.unified_diff((old or "").splitlines(keepends=True),
                                     (new or "").splitlines(keepends=True), n=3))[2:]
    return "".join(r if r.endswith("\n") else r + "\n\\ No newline at end of file\n"
                   for r in rows)


def _fetch(client: HostClient, ref: str, path: str, cap: int) -> _Got:
    try:
        return _Got(data=client.file_bytes(ref, path, max_bytes=cap))
    except TooLarge:
        return _Got(too_large=True)


COMPARE_CAP = 300  # files GitHub lists for a comparison of two commits, at most


def _size(n: int) -> str:
    return f"{n:,} bytes"


def pull_input(client: HostClient, number: int, *, head_sha: str, from_sha: str | None = None,
               max_bytes: int, max_files: int, max_file_bytes: int) -> PullInput:
    """The review input of pull request ``number`` at ``head_sha``; with ``from_sha`` only
    what changed from ``from_sha`` to ``head_sha`` in the pull request's files."""
    files = client.pull_files(number)
    note = None
    if from_sha:
        try:
            changed = client.compare(from_sha, head_sha)
        except HostError as exc:
            if exc.retryable:
                raise  # the delivery is tried again later
            # A refusal (Gitea has answered 404 for two commits of one branch): review the
            # whole pull request rather than fail this round and every later one.
            changed = None
            note = full_round(f"The provider would not compare {from_sha[:7]} with "
                              f"{head_sha[:7]} ({exc}): the whole pull request was reviewed "
                              "instead of the new commits alone.")
        if changed is not None and len(changed) >= COMPARE_CAP:
            # GitHub lists at most 300 files of a comparison: rather than miss some without
            # saying so, this round reviews the whole pull request.
            note = full_round(f"{len(changed)} or more files changed since the last round, "
                              "more than the provider lists for a comparison: the whole pull "
                              "request was reviewed again.")
        elif changed is not None:
            names = {f.path for f in files} | {f.previous_path for f in files
                                               if f.previous_path}
            files = [f for f in changed if f.path in names or (f.previous_path or "") in names]
        if note:
            from_sha = None
    base_ref = from_sha
    out = PullInput(diff_text="", files=files, from_sha=from_sha or "")
    if note:
        out.coverage.append(note)
    kept, rest = files[:max_files], files[max_files:]

    # what to fetch: the new text of every file that has one, and the old text where the
    # hunks must be rebuilt (no patch, or a clipped one)
    wanted: list[tuple[str, str, str]] = []   # (key, ref, path)
    for f in kept:
        if not safe_repo_path(f.path) or f.status == "removed":
            continue
        wanted.append(("new", head_sha, f.path))
        if (f.patch is None or f.patch_clipped) and f.status != "added":
            wanted.append(("old", "", f.previous_path or f.path))
    if any(k == "old" for k, _r, _p in wanted) and base_ref is None:
        base_ref = client.pull(number).base_sha
    wanted = [(k, r or base_ref or "", p) for k, r, p in wanted
              if k == "new" or safe_repo_path(p)]
    got: dict[tuple[str, str], _Got] = {}
    if wanted:
        with turns.waiting(), ThreadPoolExecutor(max_workers=min(POOL, len(wanted))) as pool:
            results = pool.map(lambda w: _fetch(client, w[1], w[2], max_file_bytes), wanted)
            for (k, _r, p), g in zip(wanted, results, strict=True):
                got[(k, p)] = g

    parts: list[str] = []
    used = 0
    for i, f in enumerate(kept):
        new = got.get(("new", f.path), _Got())
        old = got.get(("old", f.previous_path or f.path))
        section, entries, content = _section(f, new, old, max_file_bytes)
        out.coverage += entries
        if section is None:
            continue
        size = len(section.encode("utf-8"))
        if used + size > max_bytes:
            for g in kept[i:]:
                out.coverage.append(coverage_entry(
                    g.path, "over_byte_limit",
                    f"Not fetched: the pull request's diff is over the fetch limit of "
                    f"{_size(max_bytes)} before this file."))
            break
        used += size
        parts.append(section)
        out.contents[f.path] = content
    for f in rest:
        out.coverage.append(coverage_entry(
            f.path, "over_file_limit",
            f"Not fetched: the review takes the first {max_files} files of the pull request; "
            "this one comes later."))
    out.diff_text = "".join(parts)
    return out


def _section(f: ChangedFile, new: _Got, old: _Got | None,
             cap: int) -> tuple[str | None, list[dict], str | None]:
    """(the file's part of the diff or None, coverage entries, its new text or None)."""
    patch = f.patch if f.patch and f.patch.strip() else None
    if patch is not None and not patch.endswith("\n"):
        patch += "\n"
    if f.status == "removed":
        return header(f) + (file_heads(f) + patch if patch else ""), [], None
    if not safe_repo_path(f.path):
        if patch and not f.patch_clipped:
            return header(f) + file_heads(f) + patch, [], None
        return None, [coverage_entry(f.path, "unreadable", "The file name is not a safe path; "
                                     "its change was not fetched.")], None
    if new.binary or (f.binary and new.data is None and not new.too_large) \
            or (old is not None and old.binary):
        return (f"{header(f)}Binary files {name('a/', f.previous_path or f.path)} and "
                f"{name('b/', f.path)} differ\n"), [], None
    text = new.text
    if patch and not f.patch_clipped:
        return header(f) + file_heads(f) + patch, [], text
    if new.too_large or (old is not None and old.too_large):
        which = "new" if new.too_large else "old"
        if patch:   # clipped: review the part the provider sent
            return header(f) + file_heads(f) + patch, [coverage_entry(
                f.path, "clipped",
                f"The provider sent only part of this file's change and its {which} version "
                f"is larger than {_size(cap)}, so the rest was not fetched; only the part "
                "sent is reviewed.", True)], None
        return None, [coverage_entry(
            f.path, "over_byte_limit",
            f"Not reviewed: the provider sent no diff for this file and its {which} version "
            f"is larger than {_size(cap)}.")], None
    if new.data is None:
        if patch:
            return header(f) + file_heads(f) + patch, [], None
        return None, [coverage_entry(f.path, "unreadable", "The provider sent no diff for this "
                                     "file and its new version could not be read.")], None
    before = old.text if old is not None else None
    if old is not None and old.data is None and f.status == "modified":
        f.status = "added"   # not at the base (a compare listing it per commit): new here
    hunks = rebuild(before, text)
    f.patch, f.patch_clipped = hunks or None, False
    rows = hunks.splitlines()
    f.additions = sum(1 for r in rows if r.startswith("+"))
    f.deletions = sum(1 for r in rows if r.startswith("-"))
    if not hunks:
        return header(f), [], text
    return header(f) + file_heads(f) + hunks, [], text
