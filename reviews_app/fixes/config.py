"""The review's ``fixes`` option (issue 16): what proving a fix may use, set when a review
starts (``services.start_review``) and read by ``fixes/check.py`` at the synthesis.

Tests prove a fix only for a review with a real checkout, a local git range under
``QUORUM_REPO_ROOTS``, and only with a test command the server allows:

* ``QUORUM_FIX_TEST_COMMAND`` (server setting; empty by default: a test run executes the code
  under review, so an administrator turns it on), or
* ``[fixes] test_command`` in the repository's ``.quorum.toml``, read from the range's merge
  base (never from the head, which the change's author controls), used only when it is the
  server's ``QUORUM_FIX_TEST_COMMAND`` or one of ``QUORUM_TEST_COMMANDS``.

Either is split into an argument list with shlex and never run by a shell; a bad value (NUL
bytes, empty, unparseable) becomes a note on the fix cards, not an error.
"""

from __future__ import annotations

from django.conf import settings

from agents_app.repos.gitcmd import GitError, git

from ..hosting import repo_config
from ..sources import SHA
from .testrun import parse_command

NO_CHECKOUT = ("Not run: tests run only for a review of a local git repository, which has a "
               "checkout; this review has {what}.")
WHAT = {"paste": "a pasted diff only", "upload": "an uploaded patch only",
        "github": "a pull request read from GitHub (its fixes are offered as suggestion blocks "
                  "on the pull request instead)",
        "pull_request": "a pull request of a connected repository (its fixes are offered as "
                        "suggestion blocks on the pull request instead)"}


def _repo_command(repo: str, merge_base: str) -> tuple[str, list[str]]:
    """``[fixes] test_command`` of ``.quorum.toml`` at the merge base, and the file's notes."""
    if not SHA.fullmatch(merge_base or ""):
        return "", []
    try:
        got = git(repo, "cat-file", "blob", f"{merge_base}:{repo_config.PATH}", check=False)
    except GitError:
        return "", []
    if got.returncode != 0:
        return "", []  # no .quorum.toml there
    cfg, notes = repo_config.load(got.stdout.encode("utf-8", "surrogateescape"))
    return cfg.fixes.test_command, [n for n in notes if "[fixes]" in n]


def options_for(kind: str, meta: dict | None) -> dict:
    """The ``fixes`` option of a review of source ``kind`` with source ``meta``."""
    base = {"work_root": str(settings.VAR_DIR / "fix-proofs"),
            "timeout": float(settings.QUORUM_TEST_TIMEOUT),
            "budget": float(getattr(settings, "QUORUM_FIX_TEST_BUDGET", 240.0))}
    meta = meta or {}
    if kind != "git" or not meta.get("repo") or not SHA.fullmatch(str(meta.get("head") or "")):
        return {**base, "note": NO_CHECKOUT.format(what=WHAT.get(kind, "no checkout"))}
    server = str(getattr(settings, "QUORUM_FIX_TEST_COMMAND", "") or "")
    command, notes = _repo_command(str(meta["repo"]), str(meta.get("merge_base") or ""))
    allowed = {c.strip() for c in [server, *settings.QUORUM_TEST_COMMANDS] if c.strip()}
    note = ""
    if command and command.strip() not in allowed:
        note = (f"Not run: the repository's {repo_config.PATH} asks for the test command "
                f"{command.strip()[:200]!r}, which is not one the server allows "
                "(QUORUM_FIX_TEST_COMMAND or QUORUM_TEST_COMMANDS).")
        command = ""
    elif not command:
        command = server
    argv, problem = parse_command(command)
    note = note or (f"Not run: {problem}" if problem else "")
    if not argv and not note:
        note = ("Not run: no test command is configured (QUORUM_FIX_TEST_COMMAND, or [fixes] "
                f"test_command in {repo_config.PATH} among the allowed commands).")
    if notes:
        note = " ".join([note, *notes]).strip()
    return {**base, "repo": str(meta["repo"]), "head": str(meta["head"]), "test_command": argv,
            "note": note}
