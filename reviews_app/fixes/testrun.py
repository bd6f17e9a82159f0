"""Fixes proven before they are offered (issue 16), part 3: the test command, in a throwaway
worktree of the reviewed head.

Only for a review with a real checkout (a local git range under ``QUORUM_REPO_ROOTS``) and a
configured test command. The worktree is ``git worktree add --detach`` of the reviewed head
commit into a fresh directory under the work root (``var/fix-proofs``), and it is always
removed afterwards (``finally``), whatever happened. The command first runs on the head as it
is (a suite that already fails proves nothing about a fix); then, for each fix, the patched
file is written, the command runs, and the worktree is reset. Commands run through
``agents_app.repos.commands`` (``common.proc``: an argument list, no shell, a scrubbed
environment with a throwaway HOME, a deadline that kills the process group, capped output).
Paths come from the diff (untrusted): they stay inside the worktree and never go through a
symbolic link. Plain Python, no Django.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from agents_app.repos.commands import run_command
from agents_app.repos.gitcmd import GitError, git, repo_lock
from agents_app.repos.paths import ToolError

from ..sources import SHA
from .proof import Patch, check

MAX_COMMAND_CHARS = 1000
MAX_OUTPUT = 4000  # of the test output kept in a check's detail


def parse_command(value: object) -> tuple[list[str], str]:
    """``(argv, "")`` for a usable test command, or ``([], why not)``. Parsed with shlex into
    an argument list: no shell ever sees it (pipes, ``&&`` and ``$VAR`` are plain words)."""
    if value is None or value == "":
        return [], ""
    if not isinstance(value, str):
        return [], "The test command should be a text, like \"pytest -q\"."
    if "\x00" in value or any(ord(c) < 32 and c not in " \t" for c in value):
        return [], "The test command contains control characters (such as NUL bytes)."
    if len(value) > MAX_COMMAND_CHARS:
        return [], f"The test command is longer than {MAX_COMMAND_CHARS} characters."
    try:
        argv = shlex.split(value)
    except ValueError as exc:
        return [], f"The test command could not be read ({exc})."
    if not argv:
        return [], "The test command is empty."
    return argv, ""


@dataclass
class TestSetup:
    repo: str
    head: str
    argv: list[str]
    work_root: str
    timeout: float = 300.0
    budget: float = 600.0  # seconds for all the runs of one review
    outputs: list[str] = field(default_factory=list)


def inside(root: Path, path: str) -> Path | None:
    rel = PurePosixPath(path)
    if not path or rel.is_absolute() or ".." in rel.parts or "\x00" in path:
        return None
    target = root / rel
    try:
        parent = target.parent.resolve(strict=True)
    except OSError:
        return None
    if not parent.is_relative_to(root.resolve()) or target.is_symlink():
        return None
    return target


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_OUTPUT else "…" + text[-MAX_OUTPUT:]


def _run(setup: TestSetup, wt: Path) -> tuple[bool, str]:
    try:
        r = run_command(wt, list(setup.argv), allowlist=[list(setup.argv)],
                        timeout=setup.timeout, max_output=40_000)
    except ToolError as exc:
        return False, f"The test command could not run: {exc}"
    shown = f"$ {shlex.join(r.argv)}"
    if r.timed_out:
        return False, f"{shown}: stopped after {setup.timeout:g} s.\n{_tail(r.output)}"
    return r.exit_code == 0, f"{shown}: exit code {r.exit_code} ({r.seconds:.1f} s)\n" \
                             f"{_tail(r.output)}"


def _reset(wt: Path) -> None:
    git(wt, "reset", "--hard", "--quiet")
    git(wt, "clean", "-fdq")


def run_tests(patches: list[Patch], setup: TestSetup) -> dict[str, dict]:
    """A "tests pass" check per patch key (ok True, False, or None: not run, with why)."""
    name = "tests pass"
    if not patches:
        return {}
    root = Path(setup.work_root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="fixproof-", dir=root))
    wt = tmp / "wt"
    added = False
    try:
        try:
            with repo_lock(setup.repo):
                git(setup.repo, "worktree", "add", "--detach", "--quiet", str(wt), setup.head)
            added = True
        except GitError as exc:
            why = f"Not run: the reviewed commit could not be checked out ({str(exc)[:300]})."
            return {p.key: check(name, None, why) for p in patches}
        deadline = time.monotonic() + setup.budget
        ok, out = _run(setup, wt)
        if not ok:
            why = "The tests already fail without the fix, so they cannot show it works:\n" + out
            return {p.key: check(name, False, why) for p in patches}
        _reset(wt)
        results: dict[str, dict] = {}
        for p in patches:
            if time.monotonic() > deadline:
                results[p.key] = check(name, None, f"Not run: the {setup.budget:g} s for this "
                                                   "review's test runs were spent.")
                continue
            target = inside(wt, p.path)
            if target is None or not target.is_file():
                results[p.key] = check(name, False, "The file is not in the reviewed commit's "
                                                    "checkout, so the fix cannot be tested.")
                continue
            target.write_text(p.after, encoding="utf-8", newline="")
            ok, out = _run(setup, wt)
            results[p.key] = check(name, ok, out)
            _reset(wt)
        return results
    finally:
        if added:
            try:
                with repo_lock(setup.repo):
                    git(setup.repo, "worktree", "remove", "--force", "--force", str(wt),
                        check=False)
                    git(setup.repo, "worktree", "prune", check=False)
            except GitError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


def runner_for(opts: dict | None):
    """``(run_tests bound to the review's options or None, the note when tests do not run)``.
    ``opts`` is the review's ``fixes`` option (see ``reviews_app/fixes/config.py``)."""
    opts = opts or {}
    argv = opts.get("test_command") or []
    if not argv or not opts.get("repo") or not SHA.fullmatch(str(opts.get("head") or "")):
        return None, str(opts.get("note") or "Not run: no test command is configured for this "
                                              "review.")
    setup = TestSetup(repo=str(opts["repo"]), head=str(opts["head"]), argv=list(argv),
                      work_root=str(opts.get("work_root") or tempfile.gettempdir()),
                      timeout=float(opts.get("timeout") or 300.0),
                      budget=float(600.0 if opts.get("budget") is None else opts["budget"]))
    return (lambda patches: run_tests(patches, setup)), ""
