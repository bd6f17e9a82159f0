"""A worker killed with SIGKILL in the middle of a step: the restarted worker recovers the
run, which finishes with no duplicated step, call or event. No other worker runs here."""

import pytest

from agents_app.models import Event, Run
from tests.stack import start_worker, wait_until
from tests.test_worker_integration import (
    assert_no_duplicates,
    second_step_in_flight,
    start,
    status_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_worker_killed_mid_step_restarts_and_finishes_without_duplicates(
        django_db_setup, redis_server, stack_dir, alice):
    first = start_worker(stack_dir, node="killme", QUORUM_OFFLINE_LATENCY="1.0")
    try:
        run = start(alice, auto_approve=True)
        wait_until(lambda: second_step_in_flight(run.pk), 40, interval=0.05,
                   what="step 2 in flight")
        first.kill()
        stuck = Run.objects.get(pk=run.pk)
        assert stuck.status == "executing" and stuck.lease_owner.startswith("killme@")
    finally:
        first.stop()
    second = start_worker(stack_dir, node="killme", QUORUM_OFFLINE_LATENCY="0.1")
    try:
        wait_until(lambda: status_of(run.pk) == "completed", 40, what="completion after restart")
    finally:
        second.stop()
    assert_no_duplicates(run.pk)
    assert Event.objects.filter(run_id=run.pk, kind="stage_resumed").count() == 1


def test_worker_killed_during_execution_finishes_with_one_commit(
        django_db_setup, redis_server, stack_dir, alice, tmp_path, settings):
    """The executor has answered and the tests are running when the worker dies. The next
    worker resets the worktree, replays the journaled calls and commits once: the base branch
    gets exactly one change commit and no model call is paid twice."""
    import subprocess
    import sys

    from agents_app.models import AgentReport, MergeRequest, ModelCall
    from agents_app.patterns.plan_execute_review.service import start_change

    root = tmp_path / "repos"
    repo = root / "proj"
    repo.mkdir(parents=True)

    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q", "-b", "main")
    (repo / "README.md").write_text("Helo world.\n")
    git("add", "-A")
    git("-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "-qm", "initial")
    slow_tests = f"{sys.executable} -c \"import time; time.sleep(4); print('ok')\""
    settings.QUORUM_REPO_ROOTS = [str(root)]
    settings.QUORUM_WORKTREE_ROOT = str(tmp_path / "worktrees")
    settings.QUORUM_TEST_COMMANDS = [slow_tests]
    offline = {role: "offline/default" for role in ("planner", "executor", "reviewer")}

    first = start_worker(stack_dir, node="killchange", QUORUM_OFFLINE_LATENCY="0.2")
    try:
        run = start_change(alice, repo=str(repo), base="main", test_command=slow_tests,
                           task='replace "Helo world" with "Hello world" in README.md',
                           models=offline, auto_approve_plan=True, auto_merge=True)

        def tests_running():
            return ModelCall.objects.filter(run_id=run.pk, key="exec1:answer").exists()

        wait_until(tests_running, 40, interval=0.05, what="the executor's report")
        first.kill()
        stuck = Run.objects.get(pk=run.pk)
        assert stuck.status == "executing" and stuck.stage == "execute:1:1"
        assert not AgentReport.objects.filter(run_id=run.pk, kind="execute").exists()
    finally:
        first.stop()
    second = start_worker(stack_dir, node="killchange", QUORUM_OFFLINE_LATENCY="0.05")
    try:
        wait_until(lambda: status_of(run.pk) == "completed", 60, what="the merge after restart")
    finally:
        second.stop()
    assert MergeRequest.objects.get(run_id=run.pk).status == "merged"
    assert git("show", "main:README.md") == "Hello world."
    assert git("log", "--format=%s", "main").splitlines()[1:] == ["initial"]
    assert AgentReport.objects.filter(run_id=run.pk, kind="execute").count() == 1
    keys = list(ModelCall.objects.filter(run_id=run.pk).values_list("stage", "key"))
    assert len(keys) == len(set(keys))
    assert Event.objects.filter(run_id=run.pk, kind="stage_resumed").count() == 1
    assert "quorum/run-" not in git("branch", "--list")
