"""Running git for :mod:`.gitops`: one wrapper, its checks and the repository lock.

Every call goes through :func:`common.proc.run`: an argument list without a shell, the
scrubbed child environment (no inherited ``GIT_*`` variable can redirect us, git never prompts
and reads no system or user config) plus whatever the caller names (author and dates), and
``core.hooksPath=/dev/null`` and ``commit.gpgsign=false`` so the repository's hooks never run
and no signing prompt appears. Identities are always given explicitly (:func:`author_env`),
never taken from a user's git config.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
import time
from dataclasses import dataclass
from pathlib import Path

from common import proc

GIT_TIMEOUT = 300.0
MAX_OUTPUT = 256 * 1024 * 1024  # bytes of stdout kept; more is an error, never a cut diff
LOCK_FILE = "quorum.lock"  # in the repository's git dir: one writer of worktrees and refs
LOCK_TIMEOUT = 300.0
_AUTHOR = re.compile(r"^\s*(?P<name>[^<>]+?)\s*<(?P<email>[^<>\s]+)>\s*$")
GIT_FLAGS = ("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false",
          "-c", "core.fsmonitor=false", "-c", "core.quotePath=false")


class GitError(Exception):
    pass


@dataclass
class GitResult:
    returncode: int
    stdout: str
    stderr: str


def git(cwd, *args: str, check: bool = True, env: dict[str, str] | None = None,
        ok_codes: tuple[int, ...] = (0,)) -> GitResult:
    """``git <flags> *args`` in ``cwd``; :class:`GitError` when git is missing, ``cwd`` is
    gone, it times out or (with ``check``) exits with a code outside ``ok_codes``."""
    try:
        result = proc.run(["git", *GIT_FLAGS, *args], cwd=cwd, timeout=GIT_TIMEOUT, env=env,
                          limit=MAX_OUTPUT)
    except FileNotFoundError:
        if not Path(cwd).is_dir():
            raise GitError(f"{cwd} does not exist (was the repository or worktree moved or "
                           "deleted?)") from None
        raise GitError("git is not installed") from None
    except NotADirectoryError:
        raise GitError(f"not a directory: {cwd}") from None
    if result.timed_out:
        raise GitError(f"git {args[0]} timed out")
    if result.truncated:
        raise GitError(f"git {args[0]} printed more than {MAX_OUTPUT} bytes")
    out = GitResult(result.returncode, result.stdout.decode("utf-8", "surrogateescape"),
                    result.stderr.decode("utf-8", "surrogateescape"))
    if check and out.returncode not in ok_codes:
        detail = (out.stderr or out.stdout).strip()
        raise GitError(f"git {' '.join(args)} failed ({out.returncode}): {detail}")
    return out


def check_ref_arg(value: str, what: str) -> str:
    if not value or value.startswith("-") or "\0" in value or "\n" in value:
        raise GitError(f"invalid {what}: {value!r}")
    return value


def check_branch(repo, branch: str) -> str:
    check_ref_arg(branch, "branch name")
    if git(repo, "check-ref-format", "--branch", branch, check=False).returncode != 0:
        raise GitError(f"invalid branch name: {branch!r}")
    return branch


def author_env(author: str) -> dict[str, str]:
    """Author and committer of a new commit, from ``'Name <email>'``."""
    match = _AUTHOR.match(author or "")
    if not match:
        raise GitError(f"author must look like 'Name <email>': {author!r}")
    name, email = match["name"], match["email"]
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}


def is_identity(value: str) -> bool:
    """True for ``'Name <email>'``, the form :func:`author_env` takes."""
    return bool(_AUTHOR.match(value or ""))


def git_version() -> tuple[int, ...]:
    out = git(".", "--version").stdout
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    if not match:
        raise GitError(f"cannot parse git version: {out.strip()!r}")
    return tuple(int(part or 0) for part in match.groups())


@contextlib.contextmanager
def repo_lock(repo, timeout: float | None = None):
    """Hold the repository's Quorum lock: an ``flock`` on a file in its common git dir.

    Git's worktree bookkeeping (``worktree add`` / ``remove`` / ``prune`` and the admin area
    under ``.git/worktrees``) is not safe to change from several processes at once: a prune
    can read a worktree another process is half-way through adding and fail it. Change runs
    on one repository run in parallel worker processes and threads, so every change to the
    repository's worktrees, branches and base goes through this lock. ``flock`` works across
    processes and, since each holder opens the file itself, across threads too; the kernel
    releases it if the holder dies."""
    out = git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout
    path = Path(out.strip()) / LOCK_FILE
    deadline = time.monotonic() + (LOCK_TIMEOUT if timeout is None else timeout)
    with open(path, "a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise GitError(f"another run kept {path} locked for too long; try "
                                   "again") from None
                time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
