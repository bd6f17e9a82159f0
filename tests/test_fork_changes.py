"""Forks of change runs (plan → execute → review on git; issue 33) on a real repository with the
offline model: a fork works on a branch and in a worktree of its own, made from the commit
recorded at the fork point when its first stage needs them (never while the fork is being
created), has a merge request of its own, and merges into the base without touching the
original's branch or merge request. A replay is refused, and so are the stages after a merge
was decided."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agents_app import engine
from agents_app.forking.create import ForkRefused, create_fork
from agents_app.models import RUNNABLE, Checkpoint, MergeRequest, PlanVersion, Run
from agents_app.patterns.base import Decision
from agents_app.patterns.plan_execute_review.service import start_change
from agents_app.repos import gitops

pytestmark = pytest.mark.django_db(transaction=True)

OFFLINE = {"planner": "offline/default", "executor": "offline/default",
           "reviewer": "offline/default"}
TASK = 'Fix the typo: replace "Helo world" with "Hello world" in README.md'


def git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, settings, monkeypatch):
    root = tmp_path / "repos"
    path = root / "proj"
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    (path / "README.md").write_text("# Project\n\nHelo world.\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    settings.QUORUM_REPO_ROOTS = [str(root)]
    settings.QUORUM_WORKTREE_ROOT = str(tmp_path / "worktrees")
    settings.QUORUM_TEST_COMMANDS = [f"{sys.executable} -c \"print('tests ok')\""]
    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS, **OFFLINE}
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)
    return path


def drive(run_id: int) -> Run:
    engine.run_inline(run_id)
    while Run.objects.get(pk=run_id).status in RUNNABLE:
        engine.run_inline(run_id)
    return Run.objects.get(pk=run_id)


def decide(run: Run, user, action: str = "approve", **kw) -> Run:
    run.refresh_from_db()
    engine.decide(run, user, run.stage_seq, Decision(action=action, author=user.get_username(),
                                                     **kw), enqueue=False)
    return drive(run.pk)


def at_merge_gate(user, repo) -> Run:
    run = drive(start_change(user, repo=str(repo), base="main", task=TASK, models=OFFLINE,
                             enqueue=False).pk)
    assert run.status == "awaiting_plan_approval", run.error
    run = decide(run, user)
    assert run.status == "awaiting_merge_request", run.error
    return run


def seq_of(run: Run, stage: str = "", gate: str = "") -> int:
    q = Checkpoint.objects.filter(run=run, gate=gate)
    return (q.filter(stage=stage) if stage else q).get().seq


def snapshot(run: Run, repo) -> tuple:
    mr = MergeRequest.objects.get(run=run)
    return (gitops.branch_sha(str(repo), run.options["branch"]), mr.branch, mr.status,
            mr.head_sha, mr.base_sha, mr.merged_sha, mr.decided_by_id)


def plan_doc(run: Run) -> dict:
    p = run.state["plan"]
    return {k: p[k] for k in ("goal", "files", "approach", "steps", "test_strategy", "risks")}


def test_a_fork_at_the_plan_gate_with_an_edited_plan_merges_on_its_own_branch(alice, repo):
    parent = at_merge_gate(alice, repo)
    original = snapshot(parent, repo)
    assert original[0] and original[2] == "open"
    edited = plan_doc(parent)
    edited["steps"] = ['Replace "Helo world" with "Hi world" in README.md']
    edited["goal"] = "Greet the world briefly."
    child = create_fork(parent, alice, seq=seq_of(parent, gate="plan_approval"),
                        edits=edited, enqueue=False)
    child.refresh_from_db()
    assert child.status == "awaiting_plan_approval"
    branch = f"quorum/run-{child.pk}"
    assert child.options["branch"] == branch != parent.options["branch"]
    assert child.options["worktree"].endswith(f"/run-{child.pk}")
    # Nothing of git ran while the fork was made: its branch comes with its first stage.
    assert gitops.branch_sha(str(repo), branch) is None
    assert child.state["fork_start"] == parent.state["base_sha"]
    mr = MergeRequest.objects.get(run=child)
    assert (mr.branch, mr.status, mr.base_branch) == (branch, "draft", "main")
    v2 = PlanVersion.objects.get(run=child, version=2)
    assert v2.steps == edited["steps"] and v2.reason == "Edited when forking"
    assert v2.author == "alice" and PlanVersion.objects.filter(run=child, version=1).exists()
    assert child.state["plan"]["goal"] == "Greet the world briefly."

    child = decide(child, alice)
    assert child.status == "awaiting_merge_request", child.error
    head = gitops.branch_sha(str(repo), branch)
    assert head and head != original[0]
    assert git(repo, "rev-parse", f"{head}^") == parent.state["base_sha"]
    assert "Hi world" in git(repo, "show", f"{branch}:README.md")
    assert MergeRequest.objects.get(run=child).head_sha == head
    assert snapshot(parent, repo) == original  # the original's branch and MR untouched

    child = decide(child, alice)
    assert child.status == "completed", child.error
    assert "Hi world" in git(repo, "show", "main:README.md")
    mr = MergeRequest.objects.get(run=child)
    assert mr.status == "merged" and mr.merged_sha == gitops.branch_sha(str(repo), "main")
    assert gitops.branch_sha(str(repo), branch) is None  # merged: its branch is removed
    assert snapshot(parent, repo) == original
    assert "Hello world" in git(repo, "show", f"{parent.options['branch']}:README.md")
    assert parent.options["worktree"] != child.options["worktree"]
    assert gitops.is_repo(parent.options["worktree"])  # the original's worktree is still there


def test_a_fork_from_an_execute_round_starts_at_that_rounds_commit(alice, repo):
    parent = at_merge_gate(alice, repo)
    original = snapshot(parent, repo)
    round_commit = parent.state["head"]
    assert round_commit != parent.state["base_sha"]
    child = create_fork(parent, alice, seq=seq_of(parent, stage="review:1:1"), enqueue=False)
    assert child.state["fork_start"] == round_commit
    child = drive(child.pk)
    assert child.status == "awaiting_merge_request", child.error
    branch = child.options["branch"]
    assert gitops.branch_sha(str(repo), branch) == round_commit  # the review made no commit
    assert gitops.head_sha(child.options["worktree"]) == round_commit
    assert MergeRequest.objects.get(run=child).status == "open"
    assert snapshot(parent, repo) == original
    # Compared, the fork's own branch is what it set up, not an edit a person made.
    from agents_app.forking.stages import stages
    labels = [s.label for s in stages(child)]
    assert "Set up for the fork" in labels and "Edited when forked" not in labels
    # The original merges first; the fork's merge finds the change there already.
    parent = decide(parent, alice)
    assert parent.status == "completed", parent.error
    child = decide(child, alice)
    assert child.status == "completed", child.error
    assert MergeRequest.objects.get(run=child).status == "merged"


def test_a_fork_at_the_merge_gate_merges_its_own_branch_made_at_the_recorded_commit(
        alice, repo):
    parent = at_merge_gate(alice, repo)
    original = snapshot(parent, repo)
    child = create_fork(parent, alice, seq=parent.stage_seq, enqueue=False)
    child.refresh_from_db()
    assert child.status == "awaiting_merge_request"
    assert MergeRequest.objects.get(run=child).status == "open"
    child = decide(child, alice)
    assert child.status == "completed", child.error
    assert "Hello world" in git(repo, "show", "main:README.md")
    assert snapshot(parent, repo) == original
    parent = decide(parent, alice, "discard")  # the original's own decision, still its own
    assert parent.status == "completed"
    assert MergeRequest.objects.get(run=parent).status == "discarded"
    assert MergeRequest.objects.get(run=child).status == "merged"


def test_a_branch_left_under_the_forks_name_is_never_built_on(alice, repo):
    parent = at_merge_gate(alice, repo)
    child = create_fork(parent, alice, seq=seq_of(parent, stage="review:1:1"), enqueue=False)
    git(repo, "branch", child.options["branch"], "main")  # another run's, say
    child = drive(child.pk)
    assert child.status == "failed"
    assert "exists already without this fork's worktree" in child.error
    assert gitops.branch_sha(str(repo), child.options["branch"]) == \
        gitops.branch_sha(str(repo), "main")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "replay"}, "A change run cannot be replayed"),
    ({"edits": {"steps": []}, "at": "plan"}, "The plan has no steps"),
    ({"edits": {"steps": ["x\x00"], "goal": "g"}, "at": "plan"}, "control characters"),
    ({"edits": {"steps": ["x"], "goal": ""}, "at": "plan"}, "The plan needs a goal"),
    ({"edits": {"steps": ["x" * 4001], "goal": "g"}, "at": "plan"}, "longer than 4000"),
    ({"edits": {"steps": ["x"], "goal": "g"}, "at": "review:1:1"}, "Nothing can be edited"),
])
def test_refused_forks_of_a_change_run_say_why(alice, repo, kwargs, message):
    parent = at_merge_gate(alice, repo)
    at = kwargs.pop("at", "")
    if at == "plan":
        kwargs["seq"] = seq_of(parent, gate="plan_approval")
    elif at:
        kwargs["seq"] = seq_of(parent, stage=at)
    before = Run.objects.count()
    with pytest.raises(ForkRefused) as refused:
        create_fork(parent, alice, enqueue=False, **kwargs)
    assert message in str(refused.value), str(refused.value)
    assert Run.objects.count() == before


def test_the_stages_after_a_merge_was_decided_cannot_be_forked(alice, repo):
    parent = decide(at_merge_gate(alice, repo), alice)
    assert parent.status == "completed", parent.error
    merge = Checkpoint.objects.get(run=parent, stage__startswith="merge:", gate="")
    with pytest.raises(ForkRefused) as refused:
        create_fork(parent, alice, seq=merge.seq, enqueue=False)
    assert "Fork it from the merge-request gate" in str(refused.value)


def test_again_makes_a_new_branch_from_the_base(alice, repo):
    parent = at_merge_gate(alice, repo)
    original = snapshot(parent, repo)
    again = drive(create_fork(parent, alice, kind="again", enqueue=False).pk)
    assert again.status == "awaiting_plan_approval", again.error
    assert again.options["branch"] == f"quorum/run-{again.pk}"
    assert gitops.branch_sha(str(repo), again.options["branch"]) == parent.state["base_sha"]
    assert snapshot(parent, repo) == original


def test_a_fork_of_applied_fixes_names_its_own_branch():
    from reviews_app.fixes.apply_fixes import PATTERN

    state = {"options": {"worktree_root": "/nowhere/wt", "review": 12,
                         "branch": "quorum/fixes-12", "worktree": "/nowhere/wt/fixes-12"},
             "head": "a" * 40, "base_sha": "b" * 40}
    forked = PATTERN.fork_state(state, 30)
    assert forked["options"]["branch"] == "quorum/fixes-12-run-30"
    assert forked["options"]["worktree"] == "/nowhere/wt/fixes-12-run-30"
    assert forked["fork_start"] == "a" * 40 and state["options"]["branch"] == "quorum/fixes-12"


def test_a_forks_gate_reuses_the_originals_decision_on_the_same_plan(alice, repo):
    """The decision is on the plan and the commits, not on the run's own branch name."""
    parent = at_merge_gate(alice, repo)
    child = drive(create_fork(parent, alice, seq=seq_of(parent, gate="plan_approval"),
                              gates={"plan_approval": "reuse"}, enqueue=False).pk)
    assert child.status == "awaiting_merge_request", child.error
    reused = Checkpoint.objects.get(run=child, seq=seq_of(parent, gate="plan_approval") + 1)
    assert reused.decision["how"] == "reused" and reused.decision["action"] == "approve"
    edited = plan_doc(parent)
    edited["risks"] = ["A risk the person saw"]
    asked = drive(create_fork(parent, alice, seq=seq_of(parent, gate="plan_approval"),
                              gates={"plan_approval": "reuse"}, edits=edited,
                              enqueue=False).pk)
    assert asked.status == "awaiting_plan_approval"  # another plan: the person decides


def test_a_fork_from_every_stage_before_the_merge_reaches_its_merge_request(alice, repo):
    parent = at_merge_gate(alice, repo)
    original = snapshot(parent, repo)
    points = list(Checkpoint.objects.filter(run=parent).order_by("seq"))
    assert [(c.stage, c.gate) for c in points] == [
        ("setup", ""), ("plan:1", ""), ("plan:1", "plan_approval"), ("execute:1:1", ""),
        ("review:1:1", ""), ("merge:1", "merge_request")]
    branches = set()
    for cp in points:
        child = drive(create_fork(parent, alice, seq=cp.seq, enqueue=False).pk)
        if child.status == "awaiting_plan_approval":
            child = decide(child, alice)
        assert child.status == "awaiting_merge_request", (cp.stage, child.error)
        branch = child.options["branch"]
        branches.add(branch)
        if cp.gate != "merge_request":  # at the merge gate the branch is made by the merge
            assert "Hello world" in git(repo, "show", f"{branch}:README.md"), cp.stage
        assert MergeRequest.objects.get(run=child).branch == branch
    assert len(branches) == len(points) and parent.options["branch"] not in branches
    assert snapshot(parent, repo) == original
