"""The code two change runs left (issue 33): ``git diff`` from the first run's branch head to
the second's, in the repository both worked on. A run with no merge request yet, another
repository, or a commit git no longer has is said in the note, not hidden."""

from __future__ import annotations

from django.conf import settings

from ..repos.gitcmd import GitError
from ..repos.gitops import branch_sha, diff, head_sha
from ..repos.roots import RepoRootError, allowed_repo
from .extras import Extra, clip, register


def _head(mr) -> str | None:
    """The commit the run's branch points to now, or the one it recorded."""
    try:
        return branch_sha(mr.repo, mr.branch) or (head_sha(mr.repo, mr.head_sha)
                                                   if mr.head_sha else None)
    except GitError:
        return None


@register
def code_between_branches(runs: list) -> Extra | None:
    mrs = [getattr(r, "merge_request", None) for r in runs]  # None: no merge request
    if not any(mrs):
        return None
    extra = Extra(key="code", title="Code on the branches")
    if len(runs) != 2:
        extra.note = ("The code is compared two runs at a time: compare two of these runs to "
                      "see the diff between their branches.")
        return extra
    (a, b), (ma, mb) = runs, mrs
    missing = [f"run {r.pk}" for r, m in zip(runs, mrs, strict=True) if m is None]
    if missing:
        extra.note = f"{' and '.join(missing)} has no branch yet: nothing to compare."
        return extra
    if ma.repo != mb.repo:
        extra.note = (f"The runs changed different repositories ({ma.repo} and {mb.repo}): "
                      "their code is not compared.")
        return extra
    try:
        allowed_repo(ma.repo, settings.QUORUM_REPO_ROOTS)
    except RepoRootError as exc:
        extra.note = f"The repository cannot be read: {exc}"
        return extra
    ha, hb = _head(ma), _head(mb)
    if not ha or not hb:
        gone = [f"run {r.pk}'s branch {m.branch}" for r, m, h in
                ((a, ma, ha), (b, mb, hb)) if not h]
        extra.note = f"{' and '.join(gone)} is gone from the repository: nothing to compare."
        return extra
    try:
        text = diff(ma.repo, ha, hb)
    except GitError as exc:
        extra.note = f"git could not compare the branches: {exc}"
        return extra
    extra.note = (f"git diff from {ma.branch} ({ha[:10]}, run {a.pk}) to {mb.branch} "
                  f"({hb[:10]}, run {b.pk}).")
    if not text.strip():
        extra.note += " The two branches hold the same code."
    extra.diff_lines, extra.cut = clip(text.splitlines())
    return extra
