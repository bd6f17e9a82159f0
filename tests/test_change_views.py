"""Plan → execute → review through the engine, the database and the pages: the start form's
bad inputs, access for owner / another user / anonymous, and whole runs with the offline
model and with a scripted model behind LiteLLM's real call path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.models import AgentReport, Approval, MergeRequest, Run
from agents_app.patterns.plan_execute_review.service import ChangeError, start_change

pytestmark = pytest.mark.django_db

OFFLINE = {"planner": "offline/default", "executor": "offline/default",
           "reviewer": "offline/default"}


def git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, settings):
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
    return path


@pytest.fixture
def no_schedule(monkeypatch):
    scheduled = []
    monkeypatch.setattr(engine.scheduling, "schedule", scheduled.append)
    return scheduled


TASK = 'Fix the typo: replace "Helo world" with "Hello world" in README.md'


def form(path, **extra):
    return {"repo": str(path), "base": "main", "task": TASK, **extra}


def shown_plan(run) -> dict:
    """The plan editor's fields as the page fills them: approving posts the plan on screen."""
    plan = run.plan_versions.last()
    return {"goal": plan.goal, "files": "\n".join(plan.details["files"]),
            "approach": plan.reasoning, "steps": "\n".join(plan.steps),
            "test_strategy": plan.details["test_strategy"], "risks": "\n".join(plan.details["risks"])}


def run_to_gate(run) -> Run:
    return engine.run_inline(run.pk)


def decide(client, run, action, **extra):
    run.refresh_from_db()
    return client.post(reverse("change_decision", args=[run.pk]),
                       {"action": action, "seq": run.stage_seq, **extra}, HTTP_HX_REQUEST="true")


# --- a whole run through the pages ---------------------------------------------------------------
def test_offline_run_plan_gate_merge_gate_and_merge(alice_client, alice, repo, no_schedule,
                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("change_new"), form(
            repo, test_command=f"{sys.executable} -c \"print('tests ok')\""))
    run = Run.objects.get()
    assert response.status_code == 302 and response.url == f"/changes/{run.pk}/"
    assert no_schedule == [run.pk]
    assert run.options["branch"] == f"quorum/run-{run.pk}"
    run = run_to_gate(run)
    assert run.status == "awaiting_plan_approval"
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'Replace &quot;Helo world&quot; with &quot;Hello world&quot; in README.md' in page
    assert "Approve and execute" in page

    assert decide(alice_client, run, "approve", **shown_plan(run)).status_code == 200
    run = run_to_gate(run)
    assert run.status == "awaiting_merge_request", run.error
    mr = MergeRequest.objects.get(run=run)
    assert mr.status == "open" and mr.head_sha
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "Merge into main" in page and "Hello world" in page and "tests ok" in page
    assert "Helo world" in git(repo, "show", "main:README.md")

    assert decide(alice_client, run, "approve").status_code == 200
    run = run_to_gate(run)
    assert run.status == "completed"
    assert "Hello world" in git(repo, "show", "main:README.md")
    mr.refresh_from_db()
    assert mr.status == "merged" and mr.merged_sha and mr.decided_by == alice
    assert list(Approval.objects.filter(run=run).values_list("gate", "action")) == [
        ("plan_approval", "approve"), ("merge_request", "approve")]
    kinds = list(AgentReport.objects.filter(run=run).values_list("kind", flat=True))
    assert kinds == ["plan", "execute", "review"]
    # The history shows the merge status.
    assert "MR: Merged" in alice_client.get(reverse("dashboard")).content.decode()


@pytest.fixture
def started(alice, repo):
    def make(task=TASK, **kw):
        run = start_change(alice, repo=str(repo), base="main", task=task, models=OFFLINE,
                           enqueue=False, **kw)
        return run_to_gate(run)
    return make


def test_no_instruction_escalates_then_replan_returns_to_the_plan_gate(alice_client, repo,
                                                                       started):
    run = started("Make it faster.", auto_approve_plan=True)
    assert run.status == "awaiting_escalation"
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "Another round" in page and "only carries out explicit instructions" in page
    # No note: the reviewer's reason is what the planner gets.
    assert decide(alice_client, run, "replan").status_code == 200
    run = run_to_gate(run)
    assert run.status == "awaiting_escalation" or run.status == "awaiting_plan_approval"
    assert run.plan_versions.count() == 2


def test_escalation_stop(alice_client, repo, started):
    run = started("Make it faster.", auto_approve_plan=True)
    assert decide(alice_client, run, "stop").status_code == 200
    run = run_to_gate(run)
    assert run.status == "cancelled"
    assert MergeRequest.objects.get(run=run).status == "closed"
    assert git(repo, "branch", "--list", f"quorum/run-{run.pk}")  # kept


def test_discard_from_the_page(alice_client, repo, started, tmp_path):
    run = started(auto_approve_plan=True)
    assert run.status == "awaiting_merge_request"
    assert (tmp_path / "worktrees" / f"run-{run.pk}").is_dir()
    decide(alice_client, run, "discard")
    run = run_to_gate(run)
    assert run.status == "completed"
    assert MergeRequest.objects.get(run=run).status == "discarded"
    assert not (tmp_path / "worktrees" / f"run-{run.pk}").exists()
    assert not git(repo, "branch", "--list", f"quorum/run-{run.pk}")
    assert "Helo world" in git(repo, "show", "main:README.md")


def test_edited_plan_reaches_the_executor(alice_client, repo, started):
    run = started("Make it faster.")
    edited = {"goal": "Fix the README typo", "files": "README.md", "approach": "Literal edit.",
              "steps": 'Replace "Helo world" with "Hello world" in README.md',
              "test_strategy": "", "risks": ""}
    assert decide(alice_client, run, "approve", **edited).status_code == 200
    run = run_to_gate(run)
    assert run.status == "awaiting_merge_request", run.error
    assert run.plan_versions.last().author == "alice"
    assert "Hello world" in AgentReport.objects.get(run=run, kind="execute").diff


def test_one_approval_of_two_is_acknowledged_in_the_gate_panel(client, alice, bob, repo,
                                                                started):
    """QA (issue 35, the team browser test): at a gate needing two approvals the change page
    answered the first one with its plan form as before and no word of the vote; the run page
    says "alice approved (1 of 2 approvals)", the change page now does too."""
    from agents_app.gates.models import GateRule
    from agents_app.teams.models import Membership, Team

    team = Team.objects.create(name="Platform")
    for user, role in ((alice, "admin"), (bob, "approver")):
        Membership.objects.create(team=team, user=user, role=role)
    GateRule.objects.create(team=team, name="Two", pattern="plan_execute_review",
                            required_approvals=2)
    run = started(team=team)
    client.force_login(alice)
    answer = decide(client, run, "approve", **shown_plan(run))
    assert answer.status_code == 200
    html = answer.content.decode()
    assert 'class="notice vote-note"' in html and "alice approved (1 of 2 approvals)" in html
    run.refresh_from_db()
    assert run.status == "awaiting_plan_approval"


def test_bad_decisions_are_refused_clearly_and_change_nothing(alice_client, repo, started):
    run = started()
    seq = Run.objects.get(pk=run.pk).stage_seq
    r = decide(alice_client, run, "approve", goal="", files="", approach="", steps="",
               test_strategy="", risks="")
    assert r.status_code == 400 and "The plan has no steps" in r.content.decode()
    r = decide(alice_client, run, "reject")
    assert r.status_code == 400 and "Say what is wrong" in r.content.decode()
    r = decide(alice_client, run, "approve", steps="x" * 70000, goal="g")
    assert r.status_code == 400 and "steps is too long" in r.content.decode()
    r = alice_client.post(reverse("change_decision", args=[run.pk]),
                          {"action": "approve", "seq": seq + 5}, HTTP_HX_REQUEST="true")
    assert r.status_code == 409
    r = decide(alice_client, run, "merge-everything")
    assert r.status_code == 400 and "not one this page offers" in r.content.decode()
    assert Run.objects.get(pk=run.pk).stage_seq == seq
    assert Run.objects.get(pk=run.pk).status == "awaiting_plan_approval"
    assert not Approval.objects.filter(run=run).exists()


# --- the start form's bad inputs -------------------------------------------------------------------
@pytest.mark.parametrize("field, value, message", [
    ("repo", "", "required"),
    ("repo", "/etc", "outside the folders"),
    ("repo", "{root}/missing", "does not exist"),
    ("repo", "{root}/notgit", "not a git repository"),
    ("base", "nope", "There is no branch"),
    ("base", "--upload-pack=x", "There is no branch"),
    ("task", "   ", "Describe the change."),
    ("task", "x" * 9000, "limit is"),
    ("model_executor", "not a model!", ""),
    ("model_reviewer", "anthropic/claude-3-5-sonnet-latest", "set ANTHROPIC_API_KEY"),
    ("test_command", "rm -rf /", "not one of the available choices"),
    ("max_rounds", "0", "greater than or equal to 1"),
])
def test_start_form_bad_input(alice_client, repo, no_schedule, field, value, message):
    root = repo.parent
    (root / "notgit").mkdir(exist_ok=True)
    data = form(repo, **{field: value.replace("{root}", str(root))})
    response = alice_client.post(reverse("change_new"), data, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    body = response.content.decode()
    assert 'role="alert"' in body and message in body
    assert not Run.objects.exists() and not MergeRequest.objects.exists()


def test_same_family_reviewer_is_a_warning_not_a_refusal(alice_client, repo, no_schedule,
                                                          settings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")  # requests are blocked in tests
    data = form(repo, model_executor="gpt-4o-mini", model_reviewer="gpt-4o", task="")
    body = alice_client.post(reverse("change_new"), data).content.decode()
    assert "same model family" in body  # shown with the form's other errors
    response = alice_client.post(reverse("change_new"), {**data, "task": TASK})
    assert response.status_code == 302
    run = Run.objects.get()
    assert "same model family" in alice_client.get(response.url).content.decode()
    # The defaults are warned about up front; the offline model is no family.
    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS, "executor": "gpt-4o-mini",
                                   "reviewer": "openai/gpt-4o"}
    assert "same model family" in alice_client.get(reverse("change_new")).content.decode()
    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS, **OFFLINE}
    assert "same model family" not in alice_client.get(reverse("change_new")).content.decode()
    assert run.models_used["reviewer"] == "gpt-4o"


def test_repo_roots_unset_refuses(alice_client, repo, settings, no_schedule):
    settings.QUORUM_REPO_ROOTS = []
    response = alice_client.post(reverse("change_new"), form(repo))
    assert response.status_code == 400 and "QUORUM_REPO_ROOTS" in response.content.decode()


def test_service_refuses_unlisted_test_command(alice, repo):
    with pytest.raises(ChangeError, match="not among the configured"):
        start_change(alice, repo=str(repo), base="main", task=TASK, models=OFFLINE,
                     test_command="python -c 'import os'", enqueue=False)
    assert not Run.objects.exists()


# --- access -----------------------------------------------------------------------------------------
def test_access_owner_other_anonymous(client, alice, bob, repo, started):
    run = started()
    url = run.get_absolute_url()
    decide_url = reverse("change_decision", args=[run.pk])
    client.force_login(alice)
    assert client.get(url).status_code == 200
    assert client.get(reverse("change_new")).status_code == 200
    # The generic run page sends a change run to its own page.
    assert client.get(reverse("run_detail", args=[run.pk])).url == url
    client.force_login(bob)
    assert client.get(url).status_code == 404
    r = client.post(decide_url, {"action": "approve", "seq": run.stage_seq})
    assert r.status_code == 404
    assert Run.objects.get(pk=run.pk).status == "awaiting_plan_approval"
    client.logout()
    for target in (url, reverse("change_new")):
        r = client.get(target)
        assert r.status_code == 302 and "/accounts/login/" in r.url
    r = client.post(decide_url, {"action": "approve", "seq": run.stage_seq})
    assert r.status_code == 302 and "/accounts/login/" in r.url
    assert not Approval.objects.filter(run=run).exists()


def test_untrusted_names_and_output_are_escaped(alice_client, repo, started):
    evil = '<img src=x onerror=alert(1)>.md'
    run = started(f'create {evil.replace(" ", "_")} with "<script>alert(2)</script>"',
                  auto_approve_plan=True)
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "<script>alert(2)</script>" not in page
    assert "<img src=x" not in page and "<img_src=x" not in page


def test_large_diff_loads_files_on_demand(client, alice, bob, repo, started):
    run = started()
    body = "".join(f"+line {i}\n" for i in range(1800))
    big = "".join(f"diff --git a/f{n}.txt b/f{n}.txt\nnew file mode 100644\n--- /dev/null\n"
                  f"+++ b/f{n}.txt\n@@ -0,0 +1,1800 @@\n{body}" for n in range(2))
    AgentReport.objects.create(run=run, stage="execute:1:1", kind="execute", plan_version=1,
                               round=1, diff=big, files=[{"status": "A", "path": "f0.txt"}])
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert page.count("Loading the diff") == 2 and "line 1799" not in page
    one = client.get(reverse("change_file", args=[run.pk, 1])).content.decode()
    assert "line 1799" in one and 'class="diff-code"' in one
    assert client.get(reverse("change_file", args=[run.pk, 2])).status_code == 404
    client.force_login(bob)
    assert client.get(reverse("change_file", args=[run.pk, 0])).status_code == 404
    client.logout()
    assert client.get(reverse("change_file", args=[run.pk, 0])).status_code == 302


def test_cancel_at_a_gate_removes_the_worktree_keeps_the_branch(client, alice, repo, started,
                                                                 tmp_path,
                                                                 django_capture_on_commit_callbacks):
    run = started(auto_approve_plan=True)
    assert run.status == "awaiting_merge_request"
    worktree = tmp_path / "worktrees" / f"run-{run.pk}"
    assert worktree.is_dir()
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("cancel_run", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert not worktree.exists()
    assert git(repo, "branch", "--list", f"quorum/run-{run.pk}")
    mr = MergeRequest.objects.get(run=run)
    assert mr.status == "closed" and "without a merge" in mr.message
    assert "Helo world" in git(repo, "show", "main:README.md")


def test_a_failed_setup_closes_the_request(alice, repo, settings,
                                           django_capture_on_commit_callbacks):
    run = start_change(alice, repo=str(repo), base="main", task=TASK, models=OFFLINE,
                       enqueue=False)
    git(repo, "branch", "-m", "main", "trunk")  # the base branch disappears before setup
    with django_capture_on_commit_callbacks(execute=True):
        run = engine.run_inline(run.pk)
    assert run.status == "failed" and "worktree" in run.error
    assert MergeRequest.objects.get(run=run).status == "closed"


def test_the_running_stage_shows_its_turns_live(client, alice, repo):
    from agents_app.models import ModelCall

    run = start_change(alice, repo=str(repo), base="main", task=TASK, models=OFFLINE,
                       enqueue=False)
    Run.objects.filter(pk=run.pk).update(status="executing", stage="execute:1:1")
    reply = ('{"thought": "Read it first", "action": {"tool": "read_file", "args": '
             '{"path": "<b>x</b>.md"}}, "done": false}')
    ModelCall.objects.create(run=run, stage="execute:1:1", key="exec1:1", role="executor",
                             model="offline/default", response=reply)
    ModelCall.objects.create(run=run, stage="execute:1:1", key="exec1:2", role="executor",
                             model="offline/default", error="provider timed out")
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    live = page[page.index('id="live-panel"'):page.index('id="plan-panel"')]
    assert "Read it first" in live and "read_file" in live and "provider timed out" in live
    assert "&lt;b&gt;x&lt;/b&gt;.md" in live and "<b>x</b>" not in live
    assert "2 model calls so far" in live


def test_pages_show_no_template_syntax(client, alice, repo, started):
    run = started()
    client.force_login(alice)
    for url in (reverse("dashboard"), reverse("change_new"), run.get_absolute_url(),
                reverse("review_list")):
        html = client.get(url).content.decode()
        for token in ("{#", "#}", "{%", "%}", "{{", "}}"):
            assert token not in html, (url, token)


def test_worktrees_inside_the_repository_are_refused(alice, repo, settings):
    settings.QUORUM_WORKTREE_ROOT = str(repo / "var" / "worktrees")
    with pytest.raises(ChangeError, match="inside this repository"):
        start_change(alice, repo=str(repo), base="main", task=TASK, models=OFFLINE,
                     enqueue=False)
    assert not Run.objects.exists()


def test_a_live_update_too_large_for_one_frame_asks_to_load_the_page(alice, repo, started,
                                                                      monkeypatch):
    from agents_app import live
    from agents_app.models import Event

    run = started(auto_approve_plan=True)
    events = list(Event.objects.filter(run=run, kind="execution_reported"))
    whole = live.render_live(run, events, {"header"})
    assert 'id="mr-panel"' in whole and "too large to update live" not in whole
    monkeypatch.setattr(live, "LIVE_MESSAGE_LIMIT", len(whole.encode()) - 1)
    cut = live.render_live(run, events, {"header"})
    assert "too large to update live" in cut and 'id="rounds-panel"' not in cut
    assert 'id="run-header"' in cut and len(cut) < len(whole)


# --- the merge request: send back, commit message, squash or merge commit ----------------------
SCRIPTED = {role: "scripted/main" for role in ("planner", "executor", "reviewer")}


def test_a_send_back_comment_reaches_the_executor_the_reviewer_the_page_and_the_trace(
        alice_client, alice, repo, scripted):
    from agents_app.models import ModelCall

    run = start_change(alice, repo=str(repo), base="main", task=TASK, models=SCRIPTED,
                       enqueue=False, auto_approve_plan=True)
    run = run_to_gate(run)
    assert run.status == "awaiting_merge_request", run.error
    comment = "Please also mention the licence in the README."
    assert decide(alice_client, run, "reject", feedback=comment).status_code == 200
    run = run_to_gate(run)
    # The offline-like executor cannot act on it: rounds 2 and 3 change nothing, so each is
    # sent back (never approved), and at the round cap the person decides.
    assert run.status == "awaiting_escalation", run.error
    # The model received it: the executor as the person's comment to act on, the reviewer to
    # check that the round addressed it.
    prompts = {role: [c.messages for c in scripted.calls if c.role == role]
               for role in ("executor", "reviewer")}
    executor_round_2 = prompts["executor"][-1][1]["content"]
    assert "The person's comments to address" in executor_round_2
    assert f"- alice: {comment}" in executor_round_2
    assert comment not in prompts["executor"][0][1]["content"]
    assert f"- alice: {comment}" in prompts["reviewer"][-1][1]["content"]
    # The trace: the recorded prompt of round 2's model calls.
    recorded = ModelCall.objects.filter(run=run, stage="execute:1:2").first()
    assert comment in recorded.messages[1]["content"]
    # The page: with the round it was sent back to, and why that round went back.
    page = alice_client.get(run.get_absolute_url()).content.decode()
    trail = page[page.index('id="stage-execute12"'):]
    assert "Comments this round had to address:" in trail and f"alice: “{comment}”" in trail
    assert f"Round 2 made no change after the comment of alice: “{comment}”" in page
    assert list(AgentReport.objects.filter(run=run, kind="review").values_list(
        "answer__approve", "answer__rejection_kind")) == [(True, None), (False, "fixup"),
                                                          (False, "fixup")]
    # The offline executor says it could not act on the comment, rather than pass it over.
    skipped = AgentReport.objects.get(run=run, stage="execute:1:2").answer["skipped"]
    assert any(s.startswith(f"The person's comment (alice: {comment})") for s in skipped)


def merged_graph(repo):
    parents = git(repo, "rev-list", "--parents", "-n", "1", "main").split()[1:]
    return parents, git(repo, "log", "-1", "--format=%B", "main")


LONG_GOAL = ("Fix the greeting typo in the README so that every visitor of the project reads "
             "it right")


def at_merge_gate_with_a_long_goal(client, started) -> Run:
    """A run at its merge gate whose plan goal (the person's edit) is over 72 characters."""
    run = started()
    assert decide(client, run, "approve", **{**shown_plan(run), "goal": LONG_GOAL}) \
        .status_code == 200
    run = run_to_gate(run)
    assert run.status == "awaiting_merge_request", run.error
    return run


@pytest.mark.parametrize("mode, parent_count", [("squash", 1), ("merge", 2)])
def test_merge_with_an_edited_message_in_either_mode(alice_client, repo, started, mode,
                                                     parent_count):
    run = at_merge_gate_with_a_long_goal(alice_client, started)
    page = alice_client.get(run.get_absolute_url()).content.decode()
    # The proposal is prefilled, subject whole (the goal is longer than 72 characters).
    goal = run.plan_versions.last().goal
    assert goal == LONG_GOAL and len(goal) > 72
    assert f'name="commit_message" rows="6" maxlength="10000">{goal}\n' in page
    # The page says the commit will name the person who merges.
    assert "Quorum adds the line <code>Approved-by: alice</code>" in page
    assert 'value="squash" checked' in page
    base = git(repo, "rev-parse", "main")
    message = ("Fix the README greeting so that the project introduces itself without a typo "
               "in the very first line\n\nReviewed by alice.")
    r = decide(alice_client, run, "approve", commit_message=message, merge_mode=mode)
    assert r.status_code == 200
    run = run_to_gate(run)
    assert run.status == "completed", run.error
    parents, body = merged_graph(repo)
    assert len(parents) == parent_count and parents[0] == base
    assert body == message + "\n\nApproved-by: alice"
    assert "Hello world" in git(repo, "show", "main:README.md")
    assert MergeRequest.objects.get(run=run).merged_sha == git(repo, "rev-parse", "main")


def test_merge_without_a_message_field_squashes_with_the_whole_proposed_subject(
        alice_client, repo, started):
    run = at_merge_gate_with_a_long_goal(alice_client, started)
    assert decide(alice_client, run, "approve").status_code == 200
    run = run_to_gate(run)
    parents, body = merged_graph(repo)
    assert len(parents) == 1 and body.split("\n", 1)[0] == LONG_GOAL


def test_the_merge_commit_names_the_person_and_not_the_offline_label(alice_client, alice, repo,
                                                                     started):
    """QA (issue 32): the merge commit did not say who approved it, and its subject carried
    the offline model's disclaimer."""
    alice.first_name, alice.last_name, alice.email = "Alice", "Example", "alice@example.com"
    alice.save()
    run = started(auto_approve_plan=True)
    assert "(Offline model:" in run.plan_versions.last().goal
    assert decide(alice_client, run, "approve").status_code == 200
    run = run_to_gate(run)
    assert run.status == "completed", run.error
    message = git(repo, "log", "-1", "--format=%B", "main")
    assert message.split("\n", 1)[0] == "Apply 1 explicit edit(s) from the request"
    assert message.endswith("\n\nApproved-by: Alice Example <alice@example.com>")
    assert git(repo, "log", "-1", "--format=%cn <%ce>", "main") == \
        "Alice Example <alice@example.com>"
    # The body still says which model did the work.
    assert "(Offline model:" in message


@pytest.mark.parametrize("fields, message", [
    ({"commit_message": ""}, "Write a commit message"),
    ({"commit_message": "  \n\t "}, "Write a commit message"),
    ({"commit_message": "Fix\0it"}, "NUL byte"),
    ({"commit_message": "Fix\x1b[31m it"}, "control characters"),
    ({"commit_message": "x" * 10_001}, "the limit is 10,000"),
    ({"commit_message": "x" * 200_000}, "too long"),
    ({"commit_message": "Fix it", "merge_mode": "rebase"}, "squashed commit or a merge commit"),
])
def test_bad_merge_choices_are_refused_and_nothing_is_merged(alice_client, repo, started,
                                                             fields, message):
    run = started(auto_approve_plan=True)
    base = git(repo, "rev-parse", "main")
    r = decide(alice_client, run, "approve", **fields)
    body = r.content.decode()
    assert r.status_code == 400 and message in body and 'role="alert"' in body
    assert "Nothing was merged" in body or "merge commit" in body
    assert git(repo, "rev-parse", "main") == base
    run.refresh_from_db()
    assert run.status == "awaiting_merge_request"
    assert MergeRequest.objects.get(run=run).status == "open"
    assert not Approval.objects.filter(run=run, gate="merge_request").exists()


@pytest.mark.parametrize("feedback, message", [
    ("", "Say what should change"),
    ("   \n ", "Say what should change"),
    ("Add\0docs", "NUL byte"),
    ("x" * 4001, "comment is too long"),
])
def test_bad_send_back_comments_are_refused(alice_client, repo, started, feedback, message):
    run = started(auto_approve_plan=True)
    seq = run.stage_seq
    r = decide(alice_client, run, "reject", feedback=feedback)
    assert r.status_code == 400 and message in r.content.decode()
    assert "<details class=\"reject\" open>" in r.content.decode()  # the comment box stays open
    run.refresh_from_db()
    assert run.status == "awaiting_merge_request" and run.stage_seq == seq
    assert not Approval.objects.filter(run=run, gate="merge_request").exists()


@pytest.mark.parametrize("first, second", [("approve", "approve"), ("discard", "approve"),
                                           ("reject", "discard"), ("approve", "reject")])
def test_double_submit_at_the_merge_gate_does_one_thing(alice_client, repo, started, first,
                                                        second):
    run = started(auto_approve_plan=True)
    stale = run.stage_seq
    r = decide(alice_client, run, first, feedback="Say hello twice.")
    assert r.status_code == 200
    r = alice_client.post(reverse("change_decision", args=[run.pk]),
                          {"action": second, "seq": stale, "feedback": "again",
                           "commit_message": "x"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 409 and "no longer waiting" in r.content.decode()
    assert list(Approval.objects.filter(run=run).values_list("action", flat=True)) == [
        "auto_approve", first]


def test_the_plan_shows_once(alice_client, repo, started):
    run = started(test_command=f"{sys.executable} -c \"print('tests ok')\"")
    step = 'Replace &quot;Helo world&quot; with &quot;Hello world&quot; in README.md'
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert page.count(step) == 1  # in the editor, not again in the plan panel or the trail
    assert decide(alice_client, run, "approve", **shown_plan(run)).status_code == 200
    run = run_to_gate(run)
    page = alice_client.get(run.get_absolute_url()).content.decode()
    below_the_gate = page[page.index('id="plan-panel"'):page.index('<aside')]
    assert below_the_gate.count(run.plan_versions.last().goal) == 1  # the plan, not the trail
    assert below_the_gate.count(f"<li>{step}</li>") == 1
    # The latest round's test output is in the merge request; the trail does not repeat it.
    assert "<summary>Test output</summary>" not in page and "tests ok" in page


def test_approving_without_the_plan_on_screen_is_refused(alice_client, repo, started):
    """An approval that carries no plan (an old page, a crafted post) does not approve a plan
    the person did not see; an emptied field stays empty (it does not fall back)."""
    run = started()
    r = decide(alice_client, run, "approve")
    assert r.status_code == 400 and "The plan was not sent" in r.content.decode()
    r = decide(alice_client, run, "approve", **{**shown_plan(run), "goal": "   "})
    assert r.status_code == 400 and "goal" in r.content.decode()
    r = decide(alice_client, run, "approve", **{**shown_plan(run), "steps": "Fix\x07it"})
    assert r.status_code == 400 and "control characters" in r.content.decode()
    r = decide(alice_client, run, "approve", **{**shown_plan(run), "steps": " \n \n"})
    body = r.content.decode()
    assert r.status_code == 400 and "reject the plan with feedback" in body
    assert "<details class=\"reject\" open>" in body
    run.refresh_from_db()
    assert run.status == "awaiting_plan_approval" and run.plan_versions.count() == 1
    assert not Approval.objects.filter(run=run).exists()


# --- the list of changes ---------------------------------------------------------------------------
def test_the_changes_page_lists_the_persons_change_runs_and_merge_requests(client, alice, bob,
                                                                           repo, started):
    merged = started(auto_approve_plan=True)
    client.force_login(alice)
    decide(client, merged, "approve", commit_message="Fix the README greeting")
    merged = run_to_gate(merged)
    waiting = started()
    other = engine.create_run(alice, "reflective", "Not a change", options={}, models={},
                              enqueue=False)
    url = reverse("change_list")
    page = client.get(url).content.decode()
    assert f'href="{url}">Changes</a>' in page  # in the navigation
    rows = page[page.index("<tbody>"):page.index("</tbody>")]
    assert rows.index(f"#{waiting.pk}") < rows.index(f"#{merged.pk}")  # newest first
    assert f'href="/changes/{merged.pk}/"' in rows and f"quorum/run-{merged.pk}" in rows
    assert "Completed" in rows and "Merged" in rows and "<code>main</code>" in rows
    assert "Awaiting plan approval" in rows
    assert "In progress" in rows  # the waiting run's merge request (a draft)
    assert f"#{other.pk}" not in rows and "Not a change" not in rows
    assert "Plan, execute, review (git)" in page and "plan_execute_review" not in page
    # Bob sees none of Alice's changes; anonymous people are sent to sign in.
    client.force_login(bob)
    page = client.get(url).content.decode()
    assert "No change runs yet" in page and f"quorum/run-{merged.pk}" not in page
    client.logout()
    r = client.get(url)
    assert r.status_code == 302 and "/accounts/login/" in r.url


@pytest.mark.parametrize("before", ["1", "99999999999999999999", "-5", "abc", "\0"])
def test_the_changes_pager_takes_any_value(alice_client, repo, started, before):
    started()
    r = alice_client.get(reverse("change_list"), {"before": before})
    assert r.status_code == 200


@pytest.mark.parametrize("gate, action, fields, message", [
    ("plan", "reject", {"feedback": " \n "}, "Say what is wrong"),
    ("plan", "reject", {"feedback": "Wrong\0file"}, "NUL byte"),
    ("plan", "reject", {"feedback": "x" * 5000}, "comment is too long"),
    ("plan", "approve", {"goal": "Fix\0it"}, "goal contains a NUL byte"),
    ("plan", "approve", {"steps": "y" * 60001}, "steps is too long"),
    ("escalation", "replan", {"feedback": "Redo\0it"}, "NUL byte"),
    ("escalation", "another_round", {"feedback": "z" * 4001}, "comment is too long"),
])
def test_bad_input_at_the_plan_and_escalation_gates(alice_client, repo, started, gate, action,
                                                    fields, message):
    run = started() if gate == "plan" else started("Make it faster.", auto_approve_plan=True)
    assert run.status == ("awaiting_plan_approval" if gate == "plan" else "awaiting_escalation")
    before = (run.status, run.stage_seq, run.plan_versions.count())
    data = {**shown_plan(run), **fields} if action == "approve" else fields
    r = decide(alice_client, run, action, **data)
    body = r.content.decode()
    assert r.status_code == 400 and message in body and 'role="alert"' in body
    assert "\0" not in body
    run.refresh_from_db()
    assert (run.status, run.stage_seq, run.plan_versions.count()) == before
    assert not Approval.objects.filter(run=run).exclude(action="auto_approve").exists()


def test_a_stale_plan_page_cannot_approve_the_new_plan(alice_client, repo, started):
    run = started()
    seen = run.stage_seq
    shown = shown_plan(run)
    assert decide(alice_client, run, "reject", feedback="Name the file.").status_code == 200
    run = run_to_gate(run)
    assert run.status == "awaiting_plan_approval" and run.plan_versions.count() == 2
    r = alice_client.post(reverse("change_decision", args=[run.pk]),
                          {"action": "approve", "seq": seen, **shown}, HTTP_HX_REQUEST="true")
    assert r.status_code == 409 and "out of date" in r.content.decode()
    run.refresh_from_db()
    assert run.status == "awaiting_plan_approval"
    assert list(Approval.objects.filter(run=run).values_list("action", flat=True)) == ["reject"]


def test_a_skipped_step_is_never_approved_and_the_page_says_so_at_its_top(alice_client, repo,
                                                                          started):
    """QA (issue 32): one of two steps was skipped (its text occurs twice), the other committed,
    and the merge request said "The reviewer approved round 1". Now the round goes back, and
    the page's top says which step was not done and why."""
    (repo / "README.md").write_text("# Project\n\nHelo world.\nThe colour of the colour.\n")
    git(repo, "commit", "-qam", "colour")
    run = started('replace "Helo world" with "Hello world" in README.md, then replace "colour" '
                  'with "color" in README.md', auto_approve_plan=True)
    assert run.status == "awaiting_escalation", run.error
    assert list(AgentReport.objects.filter(run=run, kind="review").values_list(
        "answer__approve", "answer__rejection_kind")) == [(False, "fixup"), (False, "fixup")]
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "The reviewer approved" not in page
    top = page[:page.index('id="gate-panel"')]
    assert 'id="not-done"' in top and "1 of 2 plan steps not done" in top
    assert "Step 2: <q>Replace &quot;colour&quot; with &quot;color&quot; in README.md</q>" in top
    assert "“colour” occurs 2 times in README.md" in top
    assert "replace all “colour” with “color” in README.md" in top
    assert "Hello world" in git(repo, "show", f"quorum/run-{run.pk}:README.md")


# --- where worktrees live (issue 32) ------------------------------------------------------------
def settings_default(tmp_path, **env) -> str:
    """QUORUM_WORKTREE_ROOT as a fresh process reads it from ``env`` (HOME in tmp_path)."""
    import os

    from django.conf import settings as django_settings

    child = {k: v for k, v in os.environ.items()
             if k not in ("QUORUM_WORKTREE_ROOT", "XDG_STATE_HOME")}
    child.update({"HOME": str(tmp_path / "home"), "QUORUM_VAR_DIR": str(tmp_path / "var"),
                  **env})
    out = subprocess.run([sys.executable, "-c", "import config.settings as s; "
                          "print(s.QUORUM_WORKTREE_ROOT)"], env=child, check=True,
                         capture_output=True, text=True, cwd=django_settings.BASE_DIR)
    return str(Path(out.stdout.strip()))


@pytest.mark.parametrize("env, expected", [
    ({}, "home/.local/state/quorum/worktrees"),
    ({"XDG_STATE_HOME": "{tmp}/state"}, "state/quorum/worktrees"),
    ({"XDG_STATE_HOME": "relative/state"}, "home/.local/state/quorum/worktrees"),  # ignored
    ({"QUORUM_WORKTREE_ROOT": "{tmp}/mine"}, "mine"),
])
def test_the_default_worktree_folder_is_outside_any_project(tmp_path, env, expected):
    from django.conf import settings as django_settings

    from agents_app.repos.roots import project_file_above

    root = settings_default(tmp_path, **{k: v.format(tmp=tmp_path) for k, v in env.items()})
    assert root == str(tmp_path / expected)
    assert not Path(root).is_relative_to(django_settings.BASE_DIR)
    assert project_file_above(Path(root)) is None


def user_repo(root):
    """A repository whose tests pass in it, but not under Quorum's pytest settings (its own
    ``tests`` package clashes with the ``tests.settings`` Quorum's pyproject.toml names)."""
    path = root / "calc"
    (path / "tests").mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    (path / "pyproject.toml").write_text('[project]\nname = "calc"\nversion = "0"\n')
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (path / "tests" / "__init__.py").write_text("")
    (path / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def test_the_users_tests_in_a_worktree_see_only_their_repository(alice, repo, settings,
                                                                 tmp_path):
    """QA (issue 32): worktrees lived in var/worktrees inside Quorum's checkout, so the user's
    test command picked up Quorum's pyproject.toml (its pytest options and --strict-markers)."""
    settings.QUORUM_WORKTREE_ROOT = settings_default(tmp_path)  # the default, HOME in tmp_path
    assert not Path(settings.QUORUM_WORKTREE_ROOT).is_relative_to(settings.BASE_DIR)
    command = f"{sys.executable} -m pytest -p no:cacheprovider tests"
    settings.QUORUM_TEST_COMMANDS = [command]
    calc = user_repo(repo.parent)
    run = start_change(alice, repo=str(calc), base="main", models=OFFLINE, enqueue=False,
                       task='replace "a + b" with "b + a" in calc.py', test_command=command,
                       auto_approve_plan=True)
    run = run_to_gate(run)
    assert run.status == "awaiting_merge_request", run.error
    worktree = run.options["worktree"]
    assert worktree.startswith(str(tmp_path / "home" / ".local" / "state" / "quorum"))
    execute = AgentReport.objects.get(run=run, kind="execute")
    assert execute.test_exit == 0, execute.test_output
    assert f"rootdir: {worktree}\n" in execute.test_output
    assert "configfile: pyproject.toml" in execute.test_output
    assert "1 passed" in execute.test_output and "tests.settings" not in execute.test_output


def test_a_worktree_folder_inside_a_project_is_refused(alice, repo, settings):
    settings.QUORUM_WORKTREE_ROOT = str(Path(settings.BASE_DIR) / "var" / "worktrees")
    with pytest.raises(ChangeError, match="lies inside a project") as info:
        start_change(alice, repo=str(repo), base="main", task=TASK, models=OFFLINE,
                     enqueue=False)
    assert str(Path(settings.BASE_DIR) / "pyproject.toml") in str(info.value)
    assert "outside any project" in str(info.value)
    assert not Run.objects.exists()
