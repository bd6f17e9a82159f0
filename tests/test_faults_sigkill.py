"""Faults found by tests/faults/sigkill.py, pinned as tests.

A worker killed after a stage's side effects but before the stage's commit runs the stage
again: the side effects must be found done, not reported as a failure.
"""

import pytest

from agents_app import engine
from agents_app.models import Approval, Event, MergeRequest
from agents_app.patterns import get_pattern
from agents_app.patterns.base import Decision
from agents_app.patterns.plan_execute_review.service import start_change
from tests.faults.common import git, make_repo

pytestmark = pytest.mark.django_db(transaction=True)

OFFLINE = {role: "offline/default" for role in ("planner", "executor", "reviewer")}


@pytest.fixture
def repo(tmp_path, settings):
    path = make_repo(tmp_path / "repos" / "proj")
    settings.QUORUM_REPO_ROOTS = [str(tmp_path / "repos")]
    settings.QUORUM_WORKTREE_ROOT = str(tmp_path / "worktrees")
    return path


def test_merge_stage_run_again_after_its_merge_completes_the_run(repo, alice):
    """The worker merged the branch and removed it, then died before committing the stage.
    The stage run again must find the change merged, not say "branch does not exist" and
    reopen the merge gate (which merging again could never leave)."""
    run = start_change(alice, repo=str(repo), base="main", models=OFFLINE,
                       task='replace "Helo world" with "Hello world" in README.md',
                       auto_approve_plan=True, enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "awaiting_merge_request", run.error
    run = engine.decide(run, alice, run.stage_seq, Decision("approve", author="alice"),
                        enqueue=False)
    # The interrupted attempt: the stage's work is done in git, its result never committed.
    get_pattern(run.pattern).run_stage(run.stage, run.state, None)
    assert git(repo, "show", "main:README.md") == "Hello world."
    assert not git(repo, "branch", "--list", run.options["branch"])

    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    assert MergeRequest.objects.get(run=run).status == "merged"
    assert not Event.objects.filter(run=run, kind__in=("merge_blocked", "merge_conflict")).exists()
    assert Approval.objects.filter(run=run, gate="merge_request").count() == 1
    assert len(git(repo, "log", "--format=%s", "main").splitlines()) == 2  # initial + change
    assert not git(repo, "branch", "--list", run.options["branch"])
    assert not (repo.parent.parent / "worktrees" / run.options["branch"].split("/")[1]).exists()
