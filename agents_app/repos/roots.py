"""Which local repositories Quorum may open: only git work trees inside the folders named by
``QUORUM_REPO_ROOTS``. Paths are resolved (symlinks included) before they are compared, and a
path outside the roots is refused before its existence is checked, so the error messages are
no oracle for what exists elsewhere on the server."""

from __future__ import annotations

from pathlib import Path

from .gitcmd import GitError, git

TURNED_OFF = ("Reading local repositories is turned off: set QUORUM_REPO_ROOTS to the folders "
              "Quorum may read.")


class RepoRootError(ValueError):
    """The path is not a repository Quorum may use; the message is for the person."""


def inside(path: Path, roots: list[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def resolved_roots(roots: list[str]) -> list[Path]:
    out = []
    for r in roots or []:
        if r and str(r).strip():
            try:
                out.append(Path(str(r).strip()).expanduser().resolve())
            except (OSError, RuntimeError, ValueError):
                continue
    return out


def allowed_repo(path: str, roots: list[str]) -> Path:
    """The top level of the git work tree at ``path``, if it lies inside one of ``roots``."""
    allowed_roots = resolved_roots(roots)
    if not allowed_roots:
        raise RepoRootError(TURNED_OFF)
    path = (path or "").strip()
    if not path:
        raise RepoRootError("Give the path of a local git repository.")
    if "\0" in path:
        raise RepoRootError("That path is not usable.")
    allowed = ", ".join(str(r) for r in allowed_roots)
    try:
        loose = Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        raise RepoRootError(f"{path} is not a usable path.") from None
    if not inside(loose, allowed_roots):
        raise RepoRootError(f"{path} is outside the folders Quorum may read ({allowed}).")
    try:
        resolved = Path(path).expanduser().resolve(strict=True)
    except (OSError, RuntimeError):
        raise RepoRootError(f"{path} does not exist.") from None
    if not inside(resolved, allowed_roots):  # pragma: no cover - raced with a new symlink
        raise RepoRootError(f"{path} is outside the folders Quorum may read ({allowed}).")
    if not resolved.is_dir():
        raise RepoRootError(f"{path} is not a folder, so it is not a git repository.")
    not_repo = RepoRootError(f"{path} is not a git repository (no git work tree found there).")
    try:
        proc = git(resolved, "rev-parse", "--show-toplevel", "--absolute-git-dir", check=False)
    except GitError:
        raise not_repo from None
    if proc.returncode != 0:
        if "dubious ownership" in proc.stderr:
            raise RepoRootError(f"git refuses to read {path}: it belongs to another user. "
                                "Quorum runs git without the server's git config (so "
                                "safe.directory there does not apply); give the repository to "
                                "the user Quorum runs as.")
        raise not_repo
    lines = proc.stdout.splitlines()
    if len(lines) != 2 or not lines[0]:
        raise not_repo
    top, git_dir = Path(lines[0]).resolve(), Path(lines[1]).resolve()
    if not inside(top, allowed_roots) or not inside(git_dir, allowed_roots):
        raise RepoRootError(f"The git repository at {path} lies (partly) outside the folders "
                            f"Quorum may read ({allowed}).")
    return top


# Files that make a folder a project whose settings tools find from the folders below it:
# pytest reads the first of these it meets going up from the tests (``--strict-markers``,
# ``addopts``, a settings module), and so do ruff, mypy, tox and setuptools.
PROJECT_FILES = ("pyproject.toml", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg",
                 "setup.py", "conftest.py")


def project_file_above(folder: Path) -> Path | None:
    """The first project file in ``folder`` or a folder above it, or None when ``folder`` lies
    outside any project (where a run's worktree belongs: its tests then see only their own
    repository)."""
    for here in (folder, *folder.parents):
        for name in PROJECT_FILES:
            try:
                if (here / name).is_file():
                    return here / name
            except OSError:
                continue
    return None
