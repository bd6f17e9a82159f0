"""Proven fixes through Django (issue 16): the review option that proving reads, the fix card
(escaped), and "Apply accepted fixes" end to end on a temporary git repository: one branch,
one commit, one merge request at the change pattern's gate; access and bad cases."""

from __future__ import annotations

import subprocess

import pytest
from django.test import Client
from django.urls import reverse

from agents_app import engine
from agents_app.models import MergeRequest, Run
from reviews_app import services
from reviews_app.fixes import config as fix_config
from reviews_app.fixes import proof as fixproof
from reviews_app.models import Finding, Review

V0 = "def parse(text):\n    return text\n"
V1 = "def parse(text):\n    return eval(text)\n"


def git(cwd, *args) -> str:
    return subprocess.run(["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com",
                           *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(autouse=True)
def no_schedule(monkeypatch):
    """Runs are driven here with engine.run_inline; nothing goes to a broker."""
    scheduled = []
    monkeypatch.setattr(engine.scheduling, "schedule", scheduled.append)
    return scheduled


@pytest.fixture
def repo(tmp_path, settings):
    root = tmp_path / "repos"
    path = root / "proj"
    (path / "app").mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "app" / "run.py").write_text(V0)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    git(path, "checkout", "-qb", "feature")
    (path / "app" / "run.py").write_text(V1)
    git(path, "commit", "-qam", "parse with eval")
    git(path, "checkout", "-q", "main")
    settings.QUORUM_REPO_ROOTS = [str(root)]
    settings.QUORUM_WORKTREE_ROOT = str(tmp_path / "worktrees")
    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS,
                                   **dict.fromkeys(services.ROLES, "offline/default")}
    return path


def reviewed(alice, repo) -> Review:
    inp = services.from_git(str(repo), "main..feature")
    run = services.start_review(alice, inp, services.prepare(inp), enqueue=False)
    # as if synthesized: the findings show (the pipeline's own tests run it for real)
    Review.objects.filter(run=run).update(proposed_verdict="request_changes")
    return Review.objects.get(run=run)


def with_proven_fix(review: Review, *, accepted=True, code="return int(text)") -> Finding:
    patch, _ = fixproof.make_patch({"key": "FIX-1", "file": "app/run.py", "line": 2,
                                    "end_line": 2, "suggestion": f"```python\n{code}\n```"}, V1)
    return Finding.objects.create(
        review=review, key="FIX-1", position=99, category="security", severity="high",
        file="app/run.py", line=2, end_line=2, title="eval on input", reviewer="security",
        suggestion=f"```python\n{code}\n```",
        decision=Finding.Decision.ACCEPTED if accepted else Finding.Decision.PENDING,
        fix={"status": "proven", "diff": patch.diff, "reason": "Applies cleanly.",
             "checks": [{"name": "applies", "ok": True, "detail": "ok"}]})


def finalised(review: Review) -> Review:
    Review.objects.filter(pk=review.pk).update(final_verdict="request_changes")
    review.refresh_from_db()
    return review


def apply_url(review: Review) -> str:
    return reverse("review_apply_fixes", args=[review.run_id])


# --- the option proving reads ---------------------------------------------------------------------
@pytest.mark.django_db
def test_a_git_review_carries_its_checkout_and_no_test_command_by_default(alice, repo):
    opts = reviewed(alice, repo).run.options["fixes"]
    assert opts["repo"] == str(repo) and len(opts["head"]) == 40
    assert opts["test_command"] == [] and "no test command is configured" in opts["note"]


@pytest.mark.django_db
def test_a_pasted_review_says_tests_need_a_checkout(alice):
    inp = services.from_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    run = services.start_review(alice, inp, services.prepare(inp), enqueue=False)
    assert "pasted diff only" in run.options["fixes"]["note"]
    assert "repo" not in run.options["fixes"]


def _toml(repo, text: str) -> dict:
    git(repo, "checkout", "-q", "main")
    (repo / ".quorum.toml").write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    git(repo, "checkout", "-q", "feature")
    git(repo, "rebase", "-q", "main")
    git(repo, "checkout", "-q", "main")
    inp = services.from_git(str(repo), "main..feature")
    return fix_config.options_for(inp.kind, inp.meta)


@pytest.mark.django_db
def test_the_repository_test_command_runs_only_when_the_server_allows_it(repo, settings):
    opts = _toml(repo, '[fixes]\ntest_command = "python -m pytest -q"\n')
    assert opts["test_command"] == [] and "not one the server allows" in opts["note"]
    settings.QUORUM_TEST_COMMANDS = ["python -m pytest -q"]
    inp = services.from_git(str(repo), "main..feature")
    opts = fix_config.options_for(inp.kind, inp.meta)
    assert opts["test_command"] == ["python", "-m", "pytest", "-q"] and opts["note"] == ""


@pytest.mark.django_db
@pytest.mark.parametrize(("server", "words"), [
    ("pytest\x00 -q", "control characters"), ("   ", "is empty"),
    ('pytest "-q', "could not be read")])
def test_a_bad_server_test_command_is_a_note(repo, settings, server, words):
    settings.QUORUM_FIX_TEST_COMMAND = server
    inp = services.from_git(str(repo), "main..feature")
    opts = fix_config.options_for(inp.kind, inp.meta)
    assert opts["test_command"] == [] and words in opts["note"]


@pytest.mark.django_db
def test_a_bad_repository_fixes_section_is_a_note(repo):
    opts = _toml(repo, "[fixes]\ntest_command = 3\nother = 1\n")
    assert opts["test_command"] == []
    assert "should be a text" in opts["note"] and "unknown key" in opts["note"]


# --- the card ------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_fix_card_shows_the_diff_escaped(alice, alice_client, repo):
    review = reviewed(alice, repo)
    with_proven_fix(review, code='return "<script>alert(1)</script>"')
    page = alice_client.get(reverse("review_detail", args=[review.run_id])).content.decode()
    assert "Proven fix" in page
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'class="add"' in page and "✓" in page


@pytest.mark.django_db
def test_a_not_proven_fix_says_why(alice, alice_client, repo):
    review = reviewed(alice, repo)
    f = with_proven_fix(review)
    f.fix = {"status": "not_proven", "diff": "", "checks": [],
             "reason": "Not proven: the full file is not available."}
    f.save()
    page = alice_client.get(reverse("review_detail", args=[review.run_id])).content.decode()
    assert "No fix offered: Not proven: the full file is not available." in page


# --- apply accepted fixes ------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_apply_accepted_fixes_end_to_end(alice, alice_client, bob, repo):
    review = finalised(reviewed(alice, repo))
    with_proven_fix(review)
    page = alice_client.get(reverse("review_detail", args=[review.run_id])).content.decode()
    assert "Apply accepted fixes" in page
    # another user: 404, and nothing is made; anonymous: the login page
    other = Client()
    other.force_login(bob)
    assert other.post(apply_url(review)).status_code == 404
    anonymous = Client().post(apply_url(review))
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    assert not Run.objects.filter(pattern="apply_fixes").exists()
    assert Client().get(apply_url(review)).status_code == 302  # GET: login first
    assert alice_client.get(apply_url(review)).status_code == 405

    r = alice_client.post(apply_url(review))
    run = Run.objects.get(pattern="apply_fixes")
    assert r.status_code == 302 and r["Location"] == run.get_absolute_url()
    run = engine.run_inline(run.pk)
    assert run.status == "awaiting_merge_request", run.error
    mr = MergeRequest.objects.get(run=run)
    assert (mr.status, mr.branch, mr.base_branch) == ("open", f"quorum/fixes-{review.run_id}",
                                                      "feature")
    head = git(repo, "rev-parse", "feature")
    assert git(repo, "rev-list", "--count", f"{head}..{mr.branch}") == "1"
    assert git(repo, "show", f"{mr.branch}:app/run.py") == "def parse(text):\n    return int(text)"
    assert "FIX-1" in git(repo, "log", "-1", "--format=%B", mr.branch)
    # the person's checkout is untouched
    assert git(repo, "status", "--porcelain") == "" and (repo / "app/run.py").read_text() == V0

    # pressing again: the same run, no second branch or merge request
    again = alice_client.post(apply_url(review), HTTP_HX_REQUEST="true")
    assert again.status_code == 200 and again["HX-Redirect"] == run.get_absolute_url()
    assert Run.objects.filter(pattern="apply_fixes").count() == 1
    assert MergeRequest.objects.count() == 1
    page = alice_client.get(reverse("review_detail", args=[review.run_id])).content.decode()
    assert run.get_absolute_url() in page

    # the change page shows the diff; sending back is refused plainly; merging works
    change = alice_client.get(run.get_absolute_url())
    shown = change.content.decode()
    assert change.status_code == 200 and "app/run.py" in shown and mr.branch in shown
    assert other.get(run.get_absolute_url()).status_code == 404
    sent = alice_client.post(reverse("change_decision", args=[run.pk]),
                             {"action": "reject", "seq": run.stage_seq, "feedback": "redo"},
                             HTTP_HX_REQUEST="true")
    assert "no executor to send it back to" in sent.content.decode()
    run.refresh_from_db()
    alice_client.post(reverse("change_decision", args=[run.pk]),
                      {"action": "approve", "seq": run.stage_seq, "commit_message": "Fix eval",
                       "merge_mode": "squash"}, HTTP_HX_REQUEST="true")
    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    assert git(repo, "show", "feature:app/run.py") == "def parse(text):\n    return int(text)"
    assert MergeRequest.objects.get(run=run).status == "merged"


@pytest.mark.django_db(transaction=True)
def test_a_base_that_moved_in_the_same_place_is_a_plain_conflict(alice, alice_client, repo):
    review = finalised(reviewed(alice, repo))
    with_proven_fix(review)
    alice_client.post(apply_url(review))
    run = engine.run_inline(Run.objects.get(pattern="apply_fixes").pk)
    git(repo, "checkout", "-q", "feature")
    (repo / "app" / "run.py").write_text("def parse(text):\n    return eval(text, {})\n")
    git(repo, "commit", "-qam", "moved on")
    git(repo, "checkout", "-q", "main")
    alice_client.post(reverse("change_decision", args=[run.pk]),
                      {"action": "approve", "seq": run.stage_seq, "commit_message": "Fix eval",
                       "merge_mode": "squash"}, HTTP_HX_REQUEST="true")
    run = engine.run_inline(run.pk)
    assert run.status == "awaiting_merge_request"
    mr = MergeRequest.objects.get(run=run)
    assert mr.status == "conflict" and "changed in the same places" in mr.message
    assert "eval(text, {})" in git(repo, "show", "feature:app/run.py")  # nothing changed


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["not_finalised", "none_accepted", "pasted", "not_a_branch"])
def test_apply_refuses_plainly_and_makes_nothing(alice, alice_client, repo, case):
    if case == "pasted":
        inp = services.from_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
        review = Review.objects.get(run=services.start_review(
            alice, inp, services.prepare(inp), enqueue=False))
        words = "pasted or uploaded"
    elif case == "not_a_branch":
        sha = git(repo, "rev-parse", "feature")
        inp = services.from_git(str(repo), f"main..{sha}")
        review = Review.objects.get(run=services.start_review(
            alice, inp, services.prepare(inp), enqueue=False))
        words = "is not a branch"
    else:
        review = reviewed(alice, repo)
        words = "Finish the triage first" if case == "not_finalised" else "No accepted finding"
    if case != "not_finalised":
        finalised(review)
    if case != "pasted":
        with_proven_fix(review, accepted=case != "none_accepted")
    r = alice_client.post(apply_url(review))
    assert r.status_code == 400 and words in r.content.decode()
    assert not Run.objects.filter(pattern="apply_fixes").exists()
    assert "quorum/fixes" not in git(repo, "branch", "--list")


@pytest.mark.django_db
def test_a_pull_request_review_offers_suggestion_blocks_instead(alice, alice_client, repo):
    review = finalised(reviewed(alice, repo))
    with_proven_fix(review)
    Review.objects.filter(pk=review.pk).update(source_kind=Review.Source.GITHUB)
    r = alice_client.post(apply_url(review))
    assert r.status_code == 400 and "suggestion blocks" in r.content.decode()
    assert not Run.objects.filter(pattern="apply_fixes").exists()
