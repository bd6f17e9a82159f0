"""The comparison page's extra sections (issue 33): the code between two change runs'
branches (real git, a real repository), and the findings each code review kept that the
other lacks (matched by fingerprint, escaped)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents_app.models import MergeRequest, Run
from reviews_app.models import Finding, Review
from tests.test_change_views import git

pytestmark = pytest.mark.django_db


@pytest.fixture
def repo(tmp_path, settings):
    root = tmp_path / "repos"
    path = root / "proj"
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    (path / "app.py").write_text("print('helo')\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    for branch, text in (("quorum/run-1", "print('hello')\n"),
                         ("quorum/run-2", "print('hello, world')\n")):
        git(path, "checkout", "-q", "-b", branch, "main")
        (path / "app.py").write_text(text)
        git(path, "commit", "-q", "-am", f"change on {branch}")
    git(path, "checkout", "-q", "main")
    settings.QUORUM_REPO_ROOTS = [str(root)]
    return path


def change_run(owner, repo, branch, head="") -> Run:
    run = Run.objects.create(owner=owner, pattern="plan_execute_review", task="Fix the greeting",
                             status="awaiting_merge_request")
    MergeRequest.objects.create(run=run, repo=str(repo), base_branch="main", branch=branch,
                                head_sha=head)
    return run


def page(client, *runs):
    return client.get(reverse("compare_runs"), {"runs": ",".join(str(r.pk) for r in runs)})


def test_two_change_runs_show_the_diff_between_their_branches(alice_client, alice, repo):
    a, b = change_run(alice, repo, "quorum/run-1"), change_run(alice, repo, "quorum/run-2")
    resp = page(alice_client, a, b)
    assert resp.status_code == 200
    section = resp.content.decode().split('id="compare-code"')[1]
    assert "-print(&#x27;hello&#x27;)" in section
    assert "+print(&#x27;hello, world&#x27;)" in section
    assert "quorum/run-1" in section and "quorum/run-2" in section


def test_a_deleted_branch_falls_back_to_the_recorded_head_then_says_it_is_gone(
        alice_client, alice, repo):
    head = git(repo, "rev-parse", "quorum/run-2")
    a = change_run(alice, repo, "quorum/run-1")
    b = change_run(alice, repo, "quorum/discarded", head=head)
    body = page(alice_client, a, b).content.decode()
    assert "+print(&#x27;hello, world&#x27;)" in body  # the recorded commit still exists
    c = change_run(alice, repo, "quorum/never", head="")
    body = page(alice_client, a, c).content.decode()
    assert "is gone from the repository" in body and "quorum/never" in body


def test_a_repository_outside_the_roots_is_not_read(alice_client, alice, repo, settings,
                                                    tmp_path):
    a, b = change_run(alice, repo, "quorum/run-1"), change_run(alice, repo, "quorum/run-2")
    settings.QUORUM_REPO_ROOTS = [str(tmp_path / "elsewhere")]
    body = page(alice_client, a, b).content.decode()
    assert "The repository cannot be read" in body
    assert "hello, world" not in body


def test_three_change_runs_say_the_code_is_compared_two_at_a_time(alice_client, alice, repo):
    runs = [change_run(alice, repo, "quorum/run-1"), change_run(alice, repo, "quorum/run-2"),
            change_run(alice, repo, "quorum/run-1")]
    body = page(alice_client, *runs).content.decode()
    assert "compared two runs at a time" in body


def review_run(owner, findings: list[tuple[str, str, int, str]], verdict="") -> Run:
    run = Run.objects.create(owner=owner, pattern="code_review", task="a diff",
                             status="completed")
    review = Review.objects.create(run=run, owner=owner, source_kind="paste", source_label="x",
                                   diff_text="", proposed_verdict=verdict)
    for i, (fp, file, line, title) in enumerate(findings):
        Finding.objects.create(review=review, key=f"F-{i}", position=i, category="security",
                               severity="high", file=file, line=line, title=title,
                               reviewer="security", fingerprint=fp)
    return run


def test_findings_each_review_has_that_the_other_lacks(alice_client, alice):
    shared = ("a" * 40, "app.py", 3, "SQL built from input")
    a = review_run(alice, [shared, ("b" * 40, "app.py", 9, "<script>alert(1)</script>")],
                   verdict="request_changes")
    # The same problem in other words is the same finding: the fingerprint decides.
    b = review_run(alice, [("a" * 40, "app.py", 3, "Query concatenates user input"),
                           ("c" * 40, "util.py", 1, "Secret in source")], verdict="approve")
    body = page(alice_client, a, b).content.decode()
    section = body.split('id="compare-findings"')[1]
    left, right = section.split(f"Only in run {b.pk}")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in left and "<script>alert" not in body
    assert "Secret in source" in right and "util.py:1" in right
    assert "SQL built from input" not in section and "Query concatenates" not in section
    assert f"run {a.pk}: no final verdict (proposed: Request changes)" in section


def test_a_plan_run_has_no_extra_sections(alice_client, alice):
    a = Run.objects.create(owner=alice, pattern="plan_execute", task="t", status="completed")
    b = Run.objects.create(owner=alice, pattern="plan_execute", task="t", status="completed")
    body = page(alice_client, a, b).content.decode()
    assert 'id="compare-code"' not in body and 'id="compare-findings"' not in body
