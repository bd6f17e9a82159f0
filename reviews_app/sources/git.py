"""A local git range as a review source: the changes on HEAD since it left BASE, read from a
repository under the configured roots. git runs through :func:`common.proc.run`: argument
lists, revisions validated and turned into full SHAs first, a time limit, capped output."""

from __future__ import annotations

import re
from pathlib import Path

from agents_app.repos import roots as roots_mod
from common import proc

from . import SHA, Source, SourceError, cut_diff, text_or_none

__all__ = ["TURNED_OFF", "allowed_repo", "git_range"]

TURNED_OFF = roots_mod.TURNED_OFF
_REV = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/~^-]{0,199}")
_GIT_CONFIG = ["-c", "core.quotepath=off", "-c", "diff.external=", "-c", "core.fsmonitor=false",
               "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false"]
# On top of common.proc.child_env (no inherited GIT_*, no prompts, no system or user config):
# a pathspec, should one ever be passed, is a literal path and never a pattern or magic.
_GIT_ENV = {"GIT_LITERAL_PATHSPECS": "1"}
# What one git command may print before it is stopped (the diff and the blobs have their own).
_GIT_OUTPUT_LIMIT = 50_000_000


def _first_line(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else "git failed without a message"


def _run_git(cwd: Path, args: list[str], *, timeout: float, limit: int,
             stdin: bytes | None = None) -> proc.Result:
    try:
        # fixed argv, no shell, revisions validated
        result = proc.run(["git", *_GIT_CONFIG, *args], cwd=cwd, timeout=timeout, stdin=stdin,
                          env=_GIT_ENV, limit=limit, stop_when_full=True)
    except OSError as exc:
        raise SourceError(f"Could not run git: {exc.strerror or exc}.") from None
    if result.timed_out:
        raise SourceError(f"git took longer than {timeout:g}s in {cwd}; try a smaller range.")
    return result


def _git(cwd: Path, args: list[str], *, timeout: float, stdin: bytes | None = None,
         limit: int = _GIT_OUTPUT_LIMIT) -> bytes:
    """Run git and return stdout; SourceError on failure."""
    result = _run_git(cwd, args, timeout=timeout, limit=limit, stdin=stdin)
    if result.truncated:
        raise SourceError(f"git printed more than {limit:,} bytes in {cwd}; try a smaller range.")
    if result.returncode != 0:
        raise SourceError(f"git failed in {cwd}: {_first_line(result.stderr)}")
    return result.stdout


def _git_capped(cwd: Path, args: list[str], *, timeout: float, limit: int) -> tuple[bytes, bool]:
    """Like :func:`_git`, but git is stopped a little past ``limit`` bytes of stdout (so that
    a file boundary just after the limit can still be seen), with truncated=True."""
    result = _run_git(cwd, args, timeout=timeout, limit=limit + 65536)
    truncated = len(result.stdout) > limit
    if not truncated and result.returncode != 0:
        raise SourceError(f"git failed in {cwd}: {_first_line(result.stderr)}")
    return result.stdout, truncated


def allowed_repo(path: str, roots: list[str]) -> Path:
    """The top level of the git work tree at ``path``, if it lies inside one of ``roots``."""
    try:
        return roots_mod.allowed_repo(path, roots)
    except roots_mod.RepoRootError as exc:
        raise SourceError(str(exc)) from None


RANGE_USAGE = ("Give a range like main..feature or main...feature: the changes on feature since "
               "it left main, as a pull request shows them.")


def _parse_range(rng: str) -> tuple[str, str]:
    """(base, head) from ``BASE..HEAD`` or ``BASE...HEAD``; both mean the same here."""
    rng = (rng or "").strip()
    if not rng:
        raise SourceError(RANGE_USAGE)
    sides = rng.split("...") if "..." in rng else rng.split("..")
    if len(sides) == 1 and _REV.fullmatch(rng):
        raise SourceError(f"{rng!r} is a single revision, not a range. {RANGE_USAGE} For the "
                          f"last commit alone, give {rng}~1..{rng}.")
    if len(sides) != 2:
        raise SourceError(f"{rng!r} is not a range. {RANGE_USAGE}")
    for side in sides:
        if not _REV.fullmatch(side):
            shown = side if side else "(empty)"
            raise SourceError(f"{shown!r} is not an accepted revision in {rng!r}: use a branch, "
                              "tag or commit (letters, digits and . _ / ~ ^ -, not starting "
                              f"with - or .). {RANGE_USAGE}")
    return sides[0], sides[1]


def _resolve_rev(top: Path, rev: str, rng: str, timeout: float) -> str:
    try:
        # --end-of-options: whatever the pattern lets through is never read as an option
        out = _git(top, ["rev-parse", "--verify", "--quiet", "--end-of-options",
                         f"{rev}^{{commit}}"], timeout=timeout)
    except SourceError:
        raise SourceError(f"Unknown revision {rev!r} in {top.name} (range {rng}).") from None
    sha = out.decode("ascii", "replace").strip()
    if not SHA.fullmatch(sha):
        raise SourceError(f"Unknown revision {rev!r} in {top.name} (range {rng}).")
    return sha


def _changed_paths(raw: bytes) -> list[tuple[str, str]]:
    """(status letter, new path) pairs from ``git diff --name-status -z``."""
    tokens = raw.split(b"\x00")
    out, i = [], 0
    while i < len(tokens) and tokens[i]:
        status = tokens[i].decode("ascii", "replace")
        n_paths = 2 if status[:1] in ("R", "C") else 1
        paths = tokens[i + 1: i + 1 + n_paths]
        i += 1 + n_paths
        if len(paths) != n_paths:
            break
        out.append((status[:1], paths[-1].decode("utf-8", "surrogateescape")))
    return out


def _read_blobs(top: Path, head: str, paths: list[str], *, max_file_bytes: int,
                timeout: float) -> dict[str, str | None]:
    """Text of ``head:path`` for each path (None when missing, binary, too big or not UTF-8).

    Two git processes whatever the number of files: ``cat-file --batch-check`` for the type and
    size, then ``cat-file --batch`` fed only the hex object ids of the blobs worth reading.
    """
    result: dict[str, str | None] = dict.fromkeys(paths)
    askable = [p for p in paths if "\n" not in p and "\r" not in p]
    if not askable:
        return result
    query = b"".join(f"{head}:{p}\n".encode("utf-8", "surrogateescape") for p in askable)
    checks = _git(top, ["cat-file", "--batch-check"], stdin=query, timeout=timeout)
    wanted: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    for p, line in zip(askable, checks.decode("utf-8", "replace").splitlines(), strict=False):
        parts = line.split(" ")
        if len(parts) != 3 or parts[1] != "blob" or not SHA.fullmatch(parts[0]):
            continue
        if not parts[2].isdigit() or int(parts[2]) > max_file_bytes:
            continue
        wanted.setdefault(parts[0], []).append(p)
        sizes[parts[0]] = int(parts[2])
    if not wanted:
        return result
    # each blob comes as "<id> blob <size>\n<content>\n"
    data = _git(top, ["cat-file", "--batch"], stdin="".join(f"{s}\n" for s in wanted).encode(),
                timeout=timeout, limit=sum(n + 100 for n in sizes.values()))
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        header = data[pos:nl].decode("ascii", "replace").split(" ")
        pos = nl + 1
        if len(header) != 3 or not header[2].isdigit():
            continue  # "<id> missing"
        size = int(header[2])
        blob = data[pos: pos + size]
        pos += size + 1
        text = text_or_none(blob)
        for p in wanted.get(header[0], []):
            result[p] = text
    return result


MAX_COMMITS_LISTED = 250  # commits recorded for the page; the count says how many there were


def _merge_base(top: Path, base: str, head: str, base_rev: str, head_rev: str, rng: str,
                timeout: float) -> str:
    """The commit ``head`` left ``base`` at (what a pull request diffs against)."""
    try:
        out = _git(top, ["merge-base", base, head], timeout=timeout)
    except SourceError as exc:
        if str(exc).startswith("git took longer"):
            raise
        raise SourceError(f"{base_rev} and {head_rev} have no commit in common in {top.name} "
                          f"(range {rng}), so there is no change of one against the "
                          "other to review.") from None
    sha = out.decode("ascii", "replace").strip().splitlines()[:1]
    if not sha or not SHA.fullmatch(sha[0]):
        raise SourceError(f"{base_rev} and {head_rev} have no commit in common in {top.name} "
                          f"(range {rng}).")
    return sha[0]


def _commits(top: Path, merge_base: str, head: str, timeout: float) -> tuple[list[dict], int]:
    """The commits on ``head`` since ``merge_base``, oldest first (the newest
    MAX_COMMITS_LISTED of them), and how many there are."""
    count = _git(top, ["rev-list", "--count", f"{merge_base}..{head}"], timeout=timeout)
    total = int(count.strip() or 0)
    # --max-count picks the newest commits before --reverse puts them oldest first
    raw = _git(top, ["log", "--no-color", "--no-show-signature", "--reverse",
                     f"--max-count={MAX_COMMITS_LISTED}", "--format=%H%x00%an%x00%s%x00", f"{merge_base}..{head}"], timeout=timeout)
    fields = raw.decode("utf-8", "replace").split("\x00")
    commits = []
    for i in range(0, len(fields) - 3, 3):
        sha = fields[i].strip()
        if SHA.fullmatch(sha):
            commits.append({"sha": sha, "short": sha[:7], "author": fields[i + 1][:200],
                            "subject": fields[i + 2][:300]})
    return commits, total


def git_range(repo: str, rng: str, *, roots: list[str], max_bytes: int = 5_000_000,
              max_files: int = 300, max_file_bytes: int = 500_000, timeout: float = 30) -> Source:
    """The changes on HEAD since it left BASE, like a pull request (``BASE..HEAD`` and
    ``BASE...HEAD`` alike): the diff from their merge base to HEAD, the new file contents and
    the commits included. Diffing the two tips instead would show BASE's newer commits
    reversed, as if the branch undid them."""
    top = allowed_repo(repo, roots)
    base_rev, head_rev = _parse_range(rng)
    rng = f"{base_rev}..{head_rev}"
    base = _resolve_rev(top, base_rev, rng, timeout)
    head = _resolve_rev(top, head_rev, rng, timeout)
    merge_base = _merge_base(top, base, head, base_rev, head_rev, rng, timeout)
    commits, total_commits = _commits(top, merge_base, head, timeout)
    if not total_commits:
        raise SourceError(f"{head_rev} has no commits that {base_rev} does not already have "
                          f"(range {rng} in {top.name}): nothing to review. Check the order: "
                          "BASE..HEAD, the branch with the changes last.")

    names = _git(top, ["diff", "--no-ext-diff", "--no-textconv", "--no-color", "--name-status",
                       "-z", "-M", merge_base, head], timeout=timeout)
    changed = _changed_paths(names)
    raw, _ = _git_capped(top, ["diff", "--no-ext-diff", "--no-textconv", "--no-color",
                               "--submodule=short", "--src-prefix=a/", "--dst-prefix=b/",
                               "-M", "--full-index", merge_base, head],
                         timeout=timeout, limit=max_bytes)
    kept, cut_meta = cut_diff(raw, max_bytes, len(changed))

    contents: dict[str, str | None] = {}
    to_read: list[str] = []
    for status, path in changed:
        if status == "D":
            contents[path] = None
        elif len(to_read) < max_files:
            to_read.append(path)
    contents.update(_read_blobs(top, head, to_read, max_file_bytes=max_file_bytes,
                                timeout=timeout))

    meta = {"repo": str(top), "base": base, "merge_base": merge_base, "head": head,
            "range": rng, "changed_files": len(changed), "commits": commits,
            "commits_total": total_commits, **cut_meta}
    return Source(kind="git", label=f"{top.name} {merge_base[:7]}..{head[:7]}",
                  diff_text=kept.decode("utf-8", "replace"), contents=contents, meta=meta)
