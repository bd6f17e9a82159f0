"""``manage.py run_pattern plan_execute_review`` with the offline model on a real repository."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from agents_app.models import MergeRequest, Run

from .test_change_views import TASK, git, repo  # noqa: F401 - the repository fixture

pytestmark = pytest.mark.django_db


def run_cmd(*args) -> dict:
    out = StringIO()
    call_command("run_pattern", "plan_execute_review", *args, "--json", stdout=out,
                 stderr=StringIO())
    return json.loads(out.getvalue())


def test_auto_approve_and_auto_merge(repo, alice):  # noqa: F811
    result = run_cmd("--repo", str(repo), "--base", "main", "--task", TASK,
                     "--auto-approve-plan", "--auto-merge")
    assert result["status"] == "completed" and result["merge_request"] == "merged"
    assert "Hello world" in git(repo, "show", "main:README.md")
    assert result["review"]["approve"] is True and result["rounds"] == 1


def test_without_auto_flags_waits_at_the_plan(repo, alice):  # noqa: F811
    out = StringIO()
    call_command("run_pattern", "plan_execute_review", "--repo", str(repo), "--task", TASK,
                 stdout=out)
    assert "The plan waits for approval" in out.getvalue()
    run = Run.objects.get()
    assert run.status == "awaiting_plan_approval"
    assert MergeRequest.objects.get(run=run).base_branch == "main"  # the current branch


@pytest.mark.parametrize("args, message", [
    (["--task", TASK], "needs --repo"),
    (["--repo", "/etc", "--task", TASK], "outside the folders"),
    (["--repo", "{repo}", "--base", "nope", "--task", TASK], "no branch 'nope'"),
    (["--repo", "{repo}", "--task", "  "], "--task is empty"),
    (["--repo", "{repo}", "--task", TASK, "--test-command", "rm -rf /"], "not among"),
    (["--repo", "{repo}", "--task", TASK, "--max-rounds", "0"], "--max-rounds"),
    (["--repo", "{repo}", "--task", TASK, "--model", "reviewer=bad model!"], "Unknown model “bad model!”"),
])
def test_bad_input_is_a_clear_error_and_nothing_is_created(repo, alice, args, message):  # noqa: F811
    args = [a.replace("{repo}", str(repo)) for a in args]
    with pytest.raises(CommandError, match=message):
        call_command("run_pattern", "plan_execute_review", *args, stdout=StringIO())
    assert not Run.objects.exists()
