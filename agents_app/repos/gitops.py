"""Git plumbing for agent branches: worktrees, commits, diffs and merges.

git runs through :func:`.gitcmd.git` (an argument list without a shell, a scrubbed environment,
no hooks, no signing, explicit identities). Agents work in separate worktrees, never in the
person's. Merges are computed in the object database; the result is published with a
compare-and-swap ref update, or, when the base branch is checked out, by fast-forwarding that
checkout (see ``merge_into_base``), so its files never fall behind its branch.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .gitcmd import (
    GitError,
    author_env,
    check_branch,
    check_ref_arg,
    git,
    git_version,
    repo_lock,
)

DEFAULT_AUTHOR = "Quorum Executor <executor@quorum.local>"
MERGE_AUTHOR = "Quorum <quorum@quorum.local>"
BASE_MARKER = "quorum-base"  # file in the worktree's admin dir recording its base commit


def is_repo(path) -> bool:
    """True if ``path`` is the top level of a git working tree (main checkout or worktree)."""
    path = Path(path)
    if not path.is_dir():
        return False
    try:
        proc = git(path, "rev-parse", "--show-toplevel", check=False)
    except GitError:
        return False
    if proc.returncode != 0:
        return False
    return os.path.realpath(proc.stdout.strip()) == os.path.realpath(path)


def branches(repo) -> list[str]:
    out = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/").stdout
    return sorted(line for line in out.splitlines() if line)


def current_branch(repo) -> str | None:
    """The checked-out branch, or None when HEAD is detached."""
    proc = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def head_sha(path, ref: str = "HEAD") -> str:
    check_ref_arg(ref, "ref")
    proc = git(path, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if proc.returncode != 0:
        raise GitError(f"unknown revision: {ref!r}")
    return proc.stdout.strip()


def _branch_sha(repo, branch: str) -> str | None:
    proc = git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
                check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _worktrees(repo) -> list[dict[str, str]]:
    out = git(repo, "worktree", "list", "--porcelain").stdout
    entries: list[dict[str, str]] = []
    for block in out.split("\n\n"):
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            entry[key] = value
        if "worktree" in entry:
            entries.append(entry)
    return entries


def _find_worktree(repo, worktree_dir) -> dict[str, str] | None:
    wanted = os.path.realpath(worktree_dir)
    for entry in _worktrees(repo):
        if os.path.realpath(entry["worktree"]) == wanted:
            return entry
    return None


def _admin_dir(worktree) -> Path:
    out = git(worktree, "rev-parse", "--absolute-git-dir").stdout.strip()
    return Path(out)


def create_worktree(repo, worktree_dir, branch: str, base: str) -> str:
    """``git worktree add -b branch worktree_dir base``; returns the base commit sha.

    Idempotent for redelivered tasks: if ``worktree_dir`` already is this repository's
    worktree for ``branch``, the recorded base is returned; if only the branch survives, it is
    checked out again in a new worktree. The person's checkout (HEAD, index, files) is never
    touched. Holds the repository's lock (``repo_lock``)."""
    check_branch(repo, branch)
    check_ref_arg(base, "base")
    with repo_lock(repo):
        return _create_worktree(repo, Path(worktree_dir), branch, base)


def _create_worktree(repo, worktree_dir: Path, branch: str, base: str) -> str:
    git(repo, "worktree", "prune")
    existing = _find_worktree(repo, worktree_dir)
    if existing is not None:
        if existing.get("branch") != f"refs/heads/{branch}":
            raise GitError(f"{worktree_dir} is already a worktree for "
                           f"{existing.get('branch', 'a detached HEAD')}, not {branch}")
        return _recorded_base(repo, worktree_dir, branch, base)
    if worktree_dir.exists() and any(worktree_dir.iterdir()):
        raise GitError(f"{worktree_dir} exists and is not a worktree of this repository")
    if _branch_sha(repo, branch) is not None:
        git(repo, "worktree", "add", str(worktree_dir), branch)
        base_sha = _recorded_base(repo, worktree_dir, branch, base)
    else:
        base_sha = head_sha(repo, base)
        git(repo, "worktree", "add", "-b", branch, str(worktree_dir), base_sha)
    (_admin_dir(worktree_dir) / BASE_MARKER).write_text(base_sha + "\n")
    return base_sha


def _recorded_base(repo, worktree_dir, branch: str, base: str) -> str:
    try:
        marker = _admin_dir(worktree_dir) / BASE_MARKER
        if marker.is_file():
            return marker.read_text().strip()
    except GitError:
        pass
    proc = git(repo, "merge-base", head_sha(repo, base), f"refs/heads/{branch}")
    return proc.stdout.strip()


def commit_all(worktree, message: str, author: str = DEFAULT_AUTHOR, *,
               timestamp: int | None = None) -> str | None:
    """Stage everything (``git add -A``) and commit; the new sha, or None if nothing changed.

    With ``timestamp`` (Unix seconds) the author and committer dates are fixed, so the same
    tree, parent and message always give the same commit: a stage executed again after a
    crash re-creates the identical commit instead of a second one."""
    if not message or not message.strip():
        raise GitError("commit message is empty")
    env = author_env(author)
    if timestamp is not None:
        stamp = f"@{int(timestamp)} +0000"
        env.update({"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
    git(worktree, "add", "-A")
    if git(worktree, "diff", "--cached", "--quiet", check=False, ok_codes=(0, 1)).returncode \
            == 0:
        return None
    git(worktree, "commit", "--quiet", "--no-verify", "-m", message, env=env)
    return head_sha(worktree)


def diff(worktree_or_repo, base_sha: str, head: str = "HEAD") -> str:
    """``git diff --no-ext-diff --no-textconv --no-color -M base head`` (with a/ b/ prefixes
    forced, whatever the user's diff config says)."""
    check_ref_arg(base_sha, "base")
    check_ref_arg(head, "head")
    return git(worktree_or_repo, "diff", "--no-ext-diff", "--no-textconv", "--no-color", "-M",
                "--src-prefix=a/", "--dst-prefix=b/", base_sha, head, "--").stdout


def _update_ref(repo, ref: str, new: str, old: str, reason: str) -> None:
    proc = git(repo, "update-ref", "-m", reason, ref, new, old, check=False)
    if proc.returncode != 0:
        raise GitError(f"{ref} moved while merging; nothing was changed "
                       f"({proc.stderr.strip()})")


def _checkout_of(repo, branch: str) -> Path | None:
    """The working tree that has ``branch`` checked out (the person's checkout), if any."""
    for entry in _worktrees(repo):
        if entry.get("branch") == f"refs/heads/{branch}" and "bare" not in entry:
            return Path(entry["worktree"])
    return None


MERGE_MODES = ("ff", "squash", "merge")


def merge_into_base(repo, base_branch: str, branch: str, message: str, *,
                    author: str = MERGE_AUTHOR, mode: str = "ff",
                    committer: str | None = None) -> dict:
    """Merge ``branch`` into ``base_branch``, all or nothing.

    ``mode``: ``ff`` fast-forwards when possible and makes a merge commit otherwise;
    ``squash`` makes one new commit on the base with the branch's changes (one parent);
    ``merge`` always makes a merge commit (two parents), even when a fast-forward was possible.
    ``message`` is the new commit's message (unused by a fast-forward); ``committer``
    (``'Name <email>'``, default: ``author``) commits it. A squash whose changes
    are all on the base already makes no commit and reports ``up_to_date``, so merging again
    after a crash never adds an empty commit.

    The merge is computed in the object database with ``git merge-tree --write-tree``
    (git >= 2.38) and committed with ``git commit-tree``, so a conflict leaves every ref, index
    and file as it was. Holds the repository's lock (``repo_lock``).

    Publishing: if the base branch is not checked out anywhere, its ref is moved with a
    compare-and-swap ``git update-ref``. If it is checked out (the person's working tree),
    moving only the ref would leave their files behind, looking like the change undone; so
    the checkout is fast-forwarded to the result with ``git merge --ff-only``, which updates
    ref, index and files together and refuses, changing nothing, when uncommitted changes
    there touch the same files.

    Returns ``{"merged": True, "sha": ..., "fast_forward": bool}`` (``up_to_date`` when the
    branch was already contained, ``checkout`` when a working tree was updated), or
    ``{"merged": False, "conflicts": [paths], "message": ...}`` with nothing changed."""
    check_branch(repo, base_branch)
    check_branch(repo, branch)
    if mode not in MERGE_MODES:
        raise GitError(f"unknown merge mode {mode!r}")
    if mode != "ff" and (not message.strip() or "\0" in message):
        raise GitError("the commit message is empty or contains a NUL byte")
    env = author_env(author)
    if committer:
        env.update({k: v for k, v in author_env(committer).items() if "COMMITTER" in k})
    with repo_lock(repo):
        return _merge_into_base(repo, base_branch, branch, message, env, mode)


def _merge_into_base(repo, base_branch: str, branch: str, message: str, env: dict[str, str],
                     mode: str) -> dict:
    base_ref = f"refs/heads/{base_branch}"
    old = _branch_sha(repo, base_branch)
    new = _branch_sha(repo, branch)
    if old is None:
        raise GitError(f"base branch {base_branch!r} does not exist")
    if new is None:
        raise GitError(f"branch {branch!r} does not exist")

    def is_ancestor(a: str, b: str) -> bool:
        return git(repo, "merge-base", "--is-ancestor", a, b, check=False,
                    ok_codes=(0, 1)).returncode == 0

    def tree_of(commit: str) -> str:
        return git(repo, "rev-parse", f"{commit}^{{tree}}").stdout.strip()

    already = {"merged": True, "sha": old, "fast_forward": False, "up_to_date": True}
    if is_ancestor(new, old):
        return already
    fast_forward = False
    if is_ancestor(old, new):
        tree = tree_of(new)
        target, fast_forward = (new, True) if mode == "ff" else ("", False)
    else:
        version = git_version()
        if version < (2, 38):
            raise GitError(f"merging diverged branches needs git 2.38 or newer (found "
                           f"{'.'.join(map(str, version))}); rebase {branch} onto "
                           f"{base_branch} or merge it by hand")
        proc = git(repo, "merge-tree", "--write-tree", "--messages", "--name-only", old, new,
                    check=False)
        if proc.returncode not in (0, 1):
            raise GitError(f"git merge-tree failed ({proc.returncode}): {proc.stderr.strip()}")
        head, _, messages = proc.stdout.partition("\n\n")
        lines = head.splitlines()
        if not lines:
            raise GitError("git merge-tree printed nothing")
        tree = lines[0].strip()
        if proc.returncode == 1:
            conflicts = sorted({line for line in lines[1:] if line})
            return {"merged": False, "conflicts": conflicts,
                    "message": messages.strip() or "merge conflict"}
        target = ""
    if not target:
        if mode == "squash" and tree == tree_of(old):
            return already
        parents = ["-p", old] if mode == "squash" else ["-p", old, "-p", new]
        target = git(repo, "commit-tree", tree, *parents, "-m", message, env=env).stdout.strip()
    checkout = _checkout_of(repo, base_branch)
    if checkout is None:
        _update_ref(repo, base_ref, target, old, f"quorum: merge {branch} into {base_branch}")
        return {"merged": True, "sha": target, "fast_forward": fast_forward,
                **({"squashed": True} if mode == "squash" else {})}
    if head_sha(checkout) != old:
        raise GitError(f"{base_branch} moved while merging; nothing was changed")
    proc = git(checkout, "merge", "--ff-only", "--no-edit", "--quiet", target, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        blocked = [line.strip() for line in detail.splitlines()
                   if line.startswith(("\t", "    "))]
        listed = f" ({', '.join(blocked[:10])})" if blocked else ""
        if "untracked working tree files" in detail:
            what = (f"untracked files there would be overwritten{listed}: move or delete "
                    "them")
        else:
            what = (f"uncommitted changes there touch the same files{listed}: commit or "
                    "stash them")
        return {"merged": False, "conflicts": [], "blocked_by": blocked,
                "message": f"{base_branch} is checked out in {checkout} and {what}, then merge "
                           "again. Nothing was changed."}
    return {"merged": True, "sha": target, "fast_forward": fast_forward,
            "checkout": str(checkout), **({"squashed": True} if mode == "squash" else {})}


def reset_worktree(worktree, sha: str) -> None:
    """Make the worktree exactly ``sha``: its branch points there and every untracked or
    ignored file left by an interrupted attempt (or a test run) is removed."""
    check_ref_arg(sha, "commit")
    git(worktree, "reset", "--quiet", "--hard", sha)
    git(worktree, "clean", "-ffdxq")


def changed_files(worktree_or_repo, base_sha: str, head: str = "HEAD") -> list[dict[str, str]]:
    """``[{"status": "M", "path": ...}]`` between two commits (renames give the new path)."""
    check_ref_arg(base_sha, "base")
    check_ref_arg(head, "head")
    out = git(worktree_or_repo, "diff", "--no-ext-diff", "--name-status", "-M", "-z", base_sha,
               head, "--").stdout
    parts = out.split("\0")
    files, i = [], 0
    while i < len(parts) - 1:
        status = parts[i]
        if status[:1] in "RC":
            files.append({"status": status[:1], "path": parts[i + 2], "old_path": parts[i + 1]})
            i += 3
        else:
            files.append({"status": status[:1], "path": parts[i + 1]})
            i += 2
    return files


def remove_worktree(repo, worktree_dir, branch: str, *, delete_branch: bool = True) -> None:
    """Force-remove the worktree, prune, and delete ``branch``; safe to call repeatedly.
    Holds the repository's lock (``repo_lock``)."""
    check_branch(repo, branch)
    with repo_lock(repo):
        _remove_worktree(repo, Path(worktree_dir), branch, delete_branch)


def _remove_worktree(repo, worktree_dir: Path, branch: str, delete_branch: bool) -> None:
    if _find_worktree(repo, worktree_dir) is not None:
        git(repo, "worktree", "remove", "--force", "--force", str(worktree_dir))
    if worktree_dir.exists() and _is_stale_worktree_of(repo, worktree_dir):
        shutil.rmtree(worktree_dir)
    git(repo, "worktree", "prune")
    if delete_branch and _branch_sha(repo, branch) is not None:
        git(repo, "branch", "-D", "--", branch)


def _is_stale_worktree_of(repo, worktree_dir: Path) -> bool:
    """True if ``worktree_dir`` has a ``.git`` file pointing into this repository's
    ``worktrees`` admin area (left behind after its registration was pruned)."""
    marker = worktree_dir / ".git"
    if not marker.is_file():
        return False
    text = marker.read_text(errors="replace").strip()
    if not text.startswith("gitdir:"):
        return False
    common = git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout.strip()
    target = os.path.realpath(text.removeprefix("gitdir:").strip())
    return Path(target).is_relative_to(Path(os.path.realpath(common)) / "worktrees")


def branch_sha(repo, branch: str) -> str | None:
    """The commit ``branch`` points to, or None if there is no such branch."""
    check_ref_arg(branch, "branch name")
    return _branch_sha(repo, branch)
