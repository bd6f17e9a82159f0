""""Apply accepted fixes" (issue 16), the Django side: check a review, its owner and its
repository, and start the ``apply_fixes`` run (``fixes/apply_fixes``) that commits the
accepted, proven fixes on ``quorum/fixes-<review id>`` and stops at the merge-request gate.

One run per review: pressing the button again (or twice at once) leads to the same run and
merge request, until that merge request is discarded.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction

from agents_app import engine
from agents_app.models import MergeRequest, Run
from agents_app.repos import gitops
from agents_app.repos.roots import RepoRootError, allowed_repo

from ..models import Finding, Review
from ..sources import SHA
from .apply_fixes import PATTERN

PR_KINDS = (Review.Source.GITHUB, Review.Source.PULL_REQUEST)


class FixesError(ValueError):
    """The fixes cannot be applied; the message is for the person."""


def existing_run(review: Review) -> Run | None:
    """The review's fixes run, unless its merge request was discarded (a fork of it is a
    run of its own, on a branch of its own: never the review's fixes run)."""
    return (Run.objects.filter(owner=review.owner, pattern=PATTERN.name,
                               options__review=review.run_id, forked_from__isnull=True)
            .exclude(merge_request__status=MergeRequest.State.DISCARDED).order_by("-id").first())


def proven_accepted(review: Review) -> list[Finding]:
    return [f for f in review.findings.filter(kept=True, decision=Finding.Decision.ACCEPTED)
            if isinstance(f.fix, dict) and f.fix.get("status") == "proven" and f.fix.get("diff")]


def offer(review: Review) -> dict:
    """What the review page says about applying fixes: ``{"run", "count", "why_not"}``."""
    run = existing_run(review)
    if review.source_kind in PR_KINDS:
        return {"run": None, "count": 0, "why_not": "Fixes of a pull request are offered as "
                "suggestion blocks on the pull request when the review is published; Quorum "
                "pushes no branch to the host."}
    if review.source_kind != Review.Source.GIT:
        return {"run": None, "count": 0, "why_not": ""}
    return {"run": run, "count": len(proven_accepted(review)) if run is None else 0,
            "why_not": ""}


def _target_branch(review: Review, repo: str) -> str:
    rng = str((review.source_meta or {}).get("range") or "")
    head_rev = rng.split("..")[-1] if ".." in rng else ""
    try:
        names = gitops.branches(repo)
    except gitops.GitError as exc:
        raise FixesError(f"The branches of the repository could not be read: {exc}") from None
    if head_rev not in names or head_rev.startswith("quorum/"):
        raise FixesError(f"The reviewed head {head_rev[:100]!r} is not a branch of the "
                         "repository, so there is no branch to merge the fixes into. Review a "
                         "range that ends at a branch (main..feature).")
    return head_rev


def start(user, review: Review) -> Run:
    """The review's fixes run: the existing one, or a new one; FixesError saying why not."""
    with transaction.atomic():
        # one at a time per review: a second press waits here, then finds the first run
        Review.objects.select_for_update().filter(pk=review.pk).first()
        if (run := existing_run(review)) is not None:
            return run
        if review.source_kind in PR_KINDS:
            raise FixesError(offer(review)["why_not"])
        if review.source_kind != Review.Source.GIT:
            raise FixesError("This review is of a pasted or uploaded diff: there is no "
                             "repository to make a branch in.")
        if not review.final_verdict:
            raise FixesError("Finish the triage first: decide the verdict, then apply the "
                             "accepted fixes.")
        fixes = proven_accepted(review)
        if not fixes:
            raise FixesError("No accepted finding has a proven fix, so there is nothing to "
                             "apply.")
        meta = review.source_meta or {}
        head = str(meta.get("head") or "")
        try:
            repo = str(allowed_repo(str(meta.get("repo") or ""), settings.QUORUM_REPO_ROOTS))
        except RepoRootError as exc:
            raise FixesError(str(exc)) from None
        if not SHA.fullmatch(head):
            raise FixesError("The review does not record its head commit.")
        base = _target_branch(review, repo)
        branch = f"quorum/fixes-{review.run_id}"
        if gitops.branch_sha(repo, branch) is not None:
            raise FixesError(f"The repository already has a branch {branch} (from an earlier "
                             "run): merge or delete it first.")
        root = Path(settings.QUORUM_WORKTREE_ROOT).expanduser().resolve()
        if root == Path(repo) or root.is_relative_to(repo):
            raise FixesError(f"QUORUM_WORKTREE_ROOT ({root}) lies inside this repository; "
                             "worktrees must live outside it.")
        options = {"repo": repo, "base": base, "branch": branch,
                   "worktree": str(root / f"fixes-{review.run_id}"), "worktree_root": str(root),
                   "review": review.run_id, "head_sha": head,
                   "fixes": [{"key": f.key, "path": f.file, "title": f.title,
                              "diff": f.fix["diff"]} for f in fixes]}
        run = engine.create_run(user, PATTERN.name, f"Apply the {len(fixes)} accepted fix(es) "
                                f"of review {review.run_id}", options=options, models={})
        MergeRequest.objects.get_or_create(run=run, defaults={
            "repo": repo, "base_branch": base, "branch": branch})
    return run
