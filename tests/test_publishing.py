"""Publishing a review to its pull request (reviews_app/publishing): the policy matrix, one
review with the new inline comments only, the summary updated in place, no duplicate comment
across re-publication or a retry after a failure half-way, retries with backoff and
Retry-After, failures at once for 401/403/404/422, the claim, the button and the panel.

The provider is tests/fake_host.py's FakeHost: ``reviews_app.hosting.client_for`` and the
connection's ``repo_ref`` are patched (the hosts and hooks parts write the real ones)."""

from __future__ import annotations

import importlib
import logging
import sys
import types
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from agents_app import engine
from agents_app.models import Run
from reviews_app import triage
from reviews_app.hosting import render
from reviews_app.hosting.base import FINGERPRINT_MARKER, SUMMARY_MARKER, HostError, RepoRef
from reviews_app.models import (
    Connection,
    Finding,
    Publication,
    PublishedComment,
    PullRequest,
    Review,
)
from reviews_app.publishing import dispatch, worker
from reviews_app.views import render_live_update
from tests.fake_host import FakeHost
from tests.test_review_triage import finalise_all
from tests.test_review_views import start

pytestmark = pytest.mark.django_db
TOKEN = "ghp_Sup3rS3cretT0kenValue1234567890abcd"  # noqa: S105 - a test value
HEAD = "c0ffee00" * 5
BASE = "ba5e0000" * 5
HTMX = {"HTTP_HX_REQUEST": "true"}
FILES = [{"path": "app.py", "hunks": [{"header": "@@ -1,3 +1,4 @@", "lines": [
    {"kind": "ctx", "old": 1, "new": 1, "text": "import os"},
    {"kind": "add", "old": None, "new": 2, "text": "x = eval(data)"},
    {"kind": "add", "old": None, "new": 3, "text": "y = x"},
    {"kind": "ctx", "old": 2, "new": 4, "text": "print(y)"},
]}, {"header": "@@ -20,2 +21,2 @@", "lines": [
    {"kind": "ctx", "old": 20, "new": 21, "text": "def f():"},
    {"kind": "add", "old": None, "new": 22, "text": "    return 1"},
]}], "old_path": "app.py", "status": "modified", "language": "Python", "lexer": "python",
    "is_python": True, "added": 3, "removed": 0, "content": None, "mode": "light",
    "clipped": False, "no_newline_at_end": False}]
# key, severity, category, confidence, line, end_line, suggestion
FINDINGS = [
    ("SEC-1", "high", "security", 0.9, 2, 3, "```python\nx = int(data)\ny = x\n```"),
    ("STY-1", "medium", "style", 0.8, 22, None, "Name it better."),
    ("STY-2", "low", "style", 0.95, 4, None, ""),
    ("SEC-2", "critical", "security", 0.4, 3, None, "x = 0"),
    ("ARC-1", "high", "architecture", 0.9, 40, None, ""),   # not on the diff: summary only
]


@pytest.fixture
def host(monkeypatch):
    fake = FakeHost()
    fake.set_pull(7, base={"app.py": "x = 1\n"}, head={"app.py": "x = 2\n"}, head_sha=HEAD,
                  base_sha=BASE)
    import reviews_app.hosting as hosting

    monkeypatch.setattr(hosting, "client_for", lambda ref: fake, raising=False)
    try:  # the hooks part's module; a stand-in until it is merged
        secrets = importlib.import_module("reviews_app.connections.secrets")
    except ModuleNotFoundError:
        package = types.ModuleType("reviews_app.connections")
        package.__path__ = []
        secrets = types.ModuleType("reviews_app.connections.secrets")
        monkeypatch.setitem(sys.modules, "reviews_app.connections", package)
        monkeypatch.setitem(sys.modules, "reviews_app.connections.secrets", secrets)
    monkeypatch.setattr(secrets, "repo_ref", lambda conn: RepoRef(
        conn.provider, conn.api_url, conn.repository, token=TOKEN), raising=False)
    return fake


@pytest.fixture
def sent(monkeypatch):
    """The publish tasks sent (publication id, countdown), instead of the broker."""
    calls: list[tuple[int, float | None]] = []
    monkeypatch.setattr(dispatch, "send", lambda pk, countdown=None: calls.append(
        (pk, countdown)))
    return calls


def make_pr(owner, policy="after_triage", **conn) -> PullRequest:
    connection, _ = Connection.objects.get_or_create(
        owner=owner, provider="github", api_url="https://api.github.com",
        repository="octo/demo", defaults={"publish_policy": policy, **conn})
    return PullRequest.objects.get_or_create(
        connection=connection, number=7, defaults={
            "url": "https://github.com/octo/demo/pull/7", "head_sha": HEAD,
            "base_sha": BASE})[0]


def make_review(owner, *, policy="after_triage", repo_config=None, coverage=None,
                reviewers=None, proposed="request_changes", decisions=None, **conn) -> Review:
    pr = make_pr(owner, policy, **conn)
    run = Run.objects.create(owner=owner, pattern="code_review", task="octo/demo#7",
                             status="completed")
    review = Review.objects.create(
        run=run, owner=owner, source_kind="pull_request", source_label="octo/demo#7",
        diff_text="", files=FILES, coverage=coverage or [], total_files=1,
        reviewers=reviewers or {"security": {"status": "ok"}, "style": {"status": "ok"}},
        proposed_verdict=proposed, summary="Summary.", pull_request=pr, pr_round=1,
        base_sha=BASE, head_sha=HEAD, repo_config=repo_config or {})
    decisions = decisions or {}
    for i, (key, sev, cat, conf, line, end, sugg) in enumerate(FINDINGS):
        Finding.objects.create(
            review=review, key=key, position=i, category=cat, severity=sev, file="app.py",
            line=line, end_line=end, title=f"{key} title", description=f"{key} text",
            suggestion=sugg, confidence=conf, reviewer=cat, reviewers=[cat],
            fingerprint=f"{i + 1:x}" * 40, decision=decisions.get(key, "pending"))
    return review


ACCEPT_TWO = {"SEC-1": "accepted", "STY-1": "rejected", "STY-2": "accepted",
              "SEC-2": "rejected", "ARC-1": "rejected"}


def finalise(review, user, verdict="request_changes", capture=None):
    review.refresh_from_db()
    with capture(execute=True):
        triage.record_final(review, user, verdict, "")
    review.refresh_from_db()
    return review


def reopen(review):
    Review.objects.filter(pk=review.pk).update(final_verdict="", verdict_decided_by=None)
    review.refresh_from_db()


def inline_fingerprints(host) -> list[str]:
    return [fp for c in host.inline for fp in render.fingerprints_in(c.body)]


# --- the policy matrix -------------------------------------------------------------------------
def test_after_triage_publishes_only_after_finalise_and_only_accepted_findings(
        alice, host, sent, django_capture_on_commit_callbacks):
    review = make_review(alice, decisions=ACCEPT_TWO)
    dispatch.after_synthesis(review)
    assert not Publication.objects.exists() and not sent  # not before triage
    review = finalise(review, alice, capture=django_capture_on_commit_callbacks)
    [pub] = Publication.objects.all()
    assert (pub.trigger, pub.triage_version, pub.status, pub.created_by) == (
        "triage", 1, "pending", alice)
    assert sent == [(pub.pk, None)]
    assert worker.run(pub.pk) == "published"
    [(number, posted)] = host.posted_reviews
    assert number == 7 and posted.event == "request_changes" and posted.commit_sha == HEAD
    assert [(c.path, c.start_line, c.line) for c in posted.comments] == [
        ("app.py", 2, 3), ("app.py", None, 4)]                    # SEC-1 and STY-2 only
    assert "```suggestion\nx = int(data)\ny = x\n```" in posted.comments[0].body
    assert FINGERPRINT_MARKER.format("1" * 40) in posted.comments[0].body
    pub.refresh_from_db()
    assert pub.status == "published" and pub.attempts == 1 and pub.last_error == ""
    assert pub.result["comments"] == 2 and pub.result["suggestions"] == 1
    assert pub.result["skipped"] == 0 and pub.result["review"]
    assert set(PublishedComment.objects.values_list("fingerprint", flat=True)) == {
        "1" * 40, "3" * 40}
    [summary] = host.posted_comments
    assert summary.body.startswith(SUMMARY_MARKER)
    assert "SEC-1 title" in summary.body and "STY-2 title" in summary.body
    assert "STY-1 title" not in summary.body and "SEC-2 title" not in summary.body
    assert PullRequest.objects.get().summary_comment_id == summary.id


def test_automatic_publishes_at_synthesis_above_the_connection_thresholds(
        alice, host, sent, django_capture_on_commit_callbacks):
    review = make_review(alice, policy="automatic", auto_min_severity="high",
                         auto_min_confidence=0.7)
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.after_synthesis(review)
    [pub] = Publication.objects.all()
    assert pub.trigger == "automatic" and sent == [(pub.pk, None)]
    worker.run(pub.pk)
    [(_, posted)] = host.posted_reviews
    # SEC-1 (high, 0.9) on the diff; ARC-1 (high, 0.9) is off the diff: in the summary only;
    # SEC-2 is critical but 0.4 confident; STY-1 and STY-2 are below high.
    assert [c.line for c in posted.comments] == [3]
    assert "ARC-1 title" in host.posted_comments[0].body
    assert "not on a changed line" in host.posted_comments[0].body
    assert "proposed by the reviewers and published automatically" in host.posted_comments[0].body
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    assert Publication.objects.count() == 1  # finalising does not publish under automatic


def test_repo_config_thresholds_and_policy_override_the_connection(
        alice, host, sent, django_capture_on_commit_callbacks):
    review = make_review(alice, policy="never", repo_config={"publish": {
        "policy": "automatic", "min_severity": "low", "min_confidence": 0.3}})
    dispatch.after_synthesis(review)
    [pub] = Publication.objects.all()
    worker.run(pub.pk)
    [(_, posted)] = host.posted_reviews
    assert len(posted.comments) == 4  # everything on the diff (medium, low, 0.4 included)


@pytest.mark.parametrize(("conn_policy", "config"), [("never", {}),
                                                      ("after_triage", {"publish": {
                                                          "policy": "never"}})])
def test_never_publishes_nothing_and_the_page_says_so(
        alice, alice_client, host, sent, django_capture_on_commit_callbacks, conn_policy,
        config):
    review = make_review(alice, policy=conn_policy, repo_config=config, decisions=ACCEPT_TWO)
    dispatch.after_synthesis(review)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    assert not Publication.objects.exists() and not sent and not host.calls
    page = alice_client.get(review.get_absolute_url()).content.decode()
    assert "never: the findings stay in Quorum" in page
    assert "Nothing is published to the pull request" in page and "Publish now" not in page
    response = alice_client.post(reverse("publish_review", args=[review.run_id]), **HTMX)
    assert response.status_code == 409 and "“never”" in response.content.decode()
    assert not Publication.objects.exists()


def test_a_review_of_no_pull_request_is_never_published(alice, alice_client, sent,
                                                        django_capture_on_commit_callbacks):
    review = make_review(alice, decisions=ACCEPT_TWO)
    Review.objects.filter(pk=review.pk).update(pull_request=None)
    review.refresh_from_db()
    dispatch.after_synthesis(review)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    assert not Publication.objects.exists() and not sent
    page = alice_client.get(review.get_absolute_url()).content.decode()
    assert 'id="publication-panel"' not in page
    assert alice_client.post(reverse("publish_review", args=[review.run_id])).status_code == 404


# --- what is posted --------------------------------------------------------------------------
@pytest.mark.parametrize("partial", [
    {"coverage": [{"path": "big.py", "reason": "not_examined", "reviewed": False,
                   "detail": "Not reviewed: nobody read it."}]},
    {"reviewers": {"security": {"status": "ok"}, "style": {"status": "timeout"}}},
])
def test_a_partial_review_is_never_an_approval(alice, host, sent, partial,
                                               django_capture_on_commit_callbacks):
    review = make_review(alice, policy="automatic", proposed="approve", **partial)
    worker.run(dispatch.after_synthesis(review).pk)
    [(_, posted)] = host.posted_reviews
    assert posted.event == "comment" and "Not approved because the review is incomplete" in \
        posted.body
    assert "**Incomplete review:**" in host.posted_comments[0].body
    if "coverage" in partial:
        assert "### Not reviewed (1)" in host.posted_comments[0].body
        assert "`big.py`" in host.posted_comments[0].body


def test_a_complete_approval_is_an_approval(alice, host, sent,
                                            django_capture_on_commit_callbacks):
    review = make_review(alice, proposed="approve", decisions=ACCEPT_TWO)
    finalise(review, alice, "approve", capture=django_capture_on_commit_callbacks)
    worker.run(Publication.objects.get().pk)
    assert host.posted_reviews[0][1].event == "approve"
    assert "Every file of the change was reviewed." in host.posted_comments[0].body


def test_summary_updated_in_place_and_no_comment_posted_twice_across_versions(
        alice, host, sent, django_capture_on_commit_callbacks):
    review = make_review(alice, decisions=ACCEPT_TWO)
    review = finalise(review, alice, capture=django_capture_on_commit_callbacks)
    worker.run(Publication.objects.get().pk)
    reopen(review)
    Finding.objects.filter(review=review, key="STY-1").update(decision="accepted")
    review = finalise(review, alice, capture=django_capture_on_commit_callbacks)
    second = Publication.objects.get(triage_version=2)
    assert worker.run(second.pk) == "published"
    assert len(host.posted_comments) == 1                   # one summary, updated
    assert host.calls.count("create_comment") == 1 and "update_comment" in host.calls
    assert len(host.inline) == 3                           # SEC-1, STY-2, then STY-1 only
    assert inline_fingerprints(host) == ["1" * 40, "3" * 40, "2" * 40]
    second.refresh_from_db()
    assert second.result["comments"] == 1 and second.result["skipped"] == 2
    assert "STY-1 title" in host.posted_comments[0].body


def test_markers_on_the_provider_prevent_duplicates_when_the_database_is_behind(
        alice, alice_client, host, sent, django_capture_on_commit_callbacks):
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    worker.run(Publication.objects.get().pk)
    PublishedComment.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("publish_review", args=[review.run_id]), **HTMX)
    assert response.status_code == 200 and "Publishing is queued." in response.content.decode()
    manual = Publication.objects.get(trigger="manual")
    assert worker.run(manual.pk) == "published"
    assert len(host.inline) == 2                             # nothing re-posted
    manual.refresh_from_db()
    assert manual.result["comments"] == 0 and manual.result["skipped"] == 2
    assert len(host.posted_reviews) == 1  # same state at the same commit: no empty review


def test_a_marker_in_someone_elses_comment_does_not_silence_a_finding(
        alice, host, sent, django_capture_on_commit_callbacks):
    review = make_review(alice, decisions=ACCEPT_TWO)
    PullRequest.objects.update(summary_comment_id=host.create_comment(7, SUMMARY_MARKER))
    host.posted_comments[0].author = "quorum-bot"
    from reviews_app.hosting.base import HostComment
    host.inline.append(HostComment(id="1", body=FINGERPRINT_MARKER.format("1" * 40),
                                   path="app.py", line=3, author="mallory"))
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    worker.run(Publication.objects.get().pk)
    assert [c.line for c in host.posted_reviews[0][1].comments] == [3, 4]  # SEC-1 posted


# --- failures and retries --------------------------------------------------------------------
def test_retry_after_a_failure_half_way_posts_no_comment_twice(
        alice, host, sent, django_capture_on_commit_callbacks, settings):
    settings.QUORUM_PUBLISH_RETRY_BASE_SECONDS = 30
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    host.fail_next("create_comment", HostError("GitHub answered 502.", status=502,
                                               retryable=True))
    sent.clear()
    before = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        assert worker.run(pub.pk) == "retrying"
    pub.refresh_from_db()
    assert pub.status == "retrying" and pub.attempts == 1
    assert pub.last_error == "GitHub answered 502."
    assert before + timedelta(seconds=29) < pub.next_attempt_at < before + timedelta(seconds=40)
    assert sent == [(pub.pk, 30.0)]
    assert len(host.inline) == 2 and not host.posted_comments   # review out, summary not
    # The database is behind too (as if the rows were lost): the markers still hold.
    PublishedComment.objects.all().delete()
    Publication.objects.filter(pk=pub.pk).update(result={}, next_attempt_at=timezone.now())
    assert worker.run(pub.pk) == "published"
    assert len(host.inline) == 2                             # no comment posted twice
    pub.refresh_from_db()
    assert pub.attempts == 2 and pub.last_error == "" and pub.result["skipped"] == 2
    assert len(host.posted_comments) == 1


def test_retry_keeps_the_review_it_posted(alice, host, sent,
                                          django_capture_on_commit_callbacks):
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    host.fail_next("create_comment", HostError("down", status=503, retryable=True))
    worker.run(pub.pk)
    Publication.objects.filter(pk=pub.pk).update(next_attempt_at=timezone.now())
    assert worker.run(pub.pk) == "published"
    assert len(host.posted_reviews) == 1 and len(host.inline) == 2
    pub.refresh_from_db()
    assert pub.result["comments"] == 2 and pub.result["skipped"] == 0


def test_rate_limit_waits_at_least_retry_after_and_backoff_doubles(
        alice, host, sent, django_capture_on_commit_callbacks, settings):
    settings.QUORUM_PUBLISH_RETRY_BASE_SECONDS = 30
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    sent.clear()
    host.fail_next("review_comments", HostError("Rate limited.", status=429, retry_after=120,
                                                retryable=True))
    host.fail_next("review_comments", HostError("Rate limited.", status=429, retry_after=5,
                                                retryable=True))
    with django_capture_on_commit_callbacks(execute=True):
        worker.run(pub.pk)
    Publication.objects.filter(pk=pub.pk).update(next_attempt_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        worker.run(pub.pk)
    assert sent == [(pub.pk, 120.0), (pub.pk, 60.0)]  # Retry-After, then 30 × 2
    assert not host.posted_reviews


@pytest.mark.parametrize("status", [401, 403, 404, 422])
def test_errors_that_cannot_pass_fail_at_once_with_the_plain_message(
        alice, host, sent, django_capture_on_commit_callbacks, status, caplog):
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    sent.clear()
    host.fail_next("post_review", HostError(f"GitHub refused the token {TOKEN} ({status}).",
                                            status=status))
    with caplog.at_level(logging.DEBUG), django_capture_on_commit_callbacks(execute=True):
        assert worker.run(pub.pk) == "failed"
    pub.refresh_from_db()
    assert pub.status == "failed" and pub.attempts == 1 and not sent
    assert pub.last_error == f"GitHub refused the token … ({status})."
    assert TOKEN not in caplog.text and TOKEN not in str(pub.result)
    assert not PublishedComment.objects.exists()


def test_max_attempts_then_failed(alice, host, sent, django_capture_on_commit_callbacks,
                                  settings):
    settings.QUORUM_PUBLISH_MAX_ATTEMPTS = 2
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    for _ in range(3):
        host.fail_next("review_comments", HostError("502", status=502, retryable=True))
    assert worker.run(pub.pk) == "retrying"
    Publication.objects.filter(pk=pub.pk).update(next_attempt_at=timezone.now())
    assert worker.run(pub.pk) == "failed"
    pub.refresh_from_db()
    assert pub.attempts == 2 and pub.last_error == "502 (gave up after 2 attempts)"
    assert worker.run(pub.pk) == "skipped"  # a failed publication is not claimed again


def test_an_unexpected_error_is_retried_without_its_text(alice, host, sent, monkeypatch,
                                                         django_capture_on_commit_callbacks):
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    host.fail_next("post_review", ConnectionError(f"https://x:{TOKEN}@api.invalid refused"))
    assert worker.run(pub.pk) == "retrying"
    pub.refresh_from_db()
    assert pub.last_error == "Unexpected error while publishing (ConnectionError)."


def test_the_claim_prevents_a_double_run(alice, host, sent,
                                         django_capture_on_commit_callbacks, settings):
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    assert worker.run(pub.pk) == "published"
    assert worker.run(pub.pk) == "skipped"                   # a redelivered task
    assert len(host.posted_reviews) == 1 and host.calls.count("create_comment") == 1
    # Claimed by another worker just now: not taken; its lease expired: taken again.
    Publication.objects.filter(pk=pub.pk).update(status="publishing")
    assert worker.run(pub.pk) == "skipped"
    Publication.objects.filter(pk=pub.pk).update(
        updated_at=timezone.now() - timedelta(seconds=settings.QUORUM_PUBLISH_LEASE_SECONDS + 5))
    assert worker.run(pub.pk) == "published"
    assert len(host.inline) == 2


def test_the_task_is_registered_by_name_and_runs_the_worker(alice, host, sent,
                                                            django_capture_on_commit_callbacks):
    from celery import current_app

    from reviews_app import tasks

    assert "reviews_app.tasks.publish" in current_app.tasks
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    assert tasks.publish.run(Publication.objects.get().pk) == "published"


def test_a_triage_publication_after_a_reopen_fails_plainly(alice, host, sent,
                                                           django_capture_on_commit_callbacks):
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    reopen(review)
    pub = Publication.objects.get()
    assert worker.run(pub.pk) == "failed"
    pub.refresh_from_db()
    assert "no longer the final one" in pub.last_error and not host.posted_reviews


def test_lost_messages_are_sent_again(alice, sent):
    review = make_review(alice)
    old = timezone.now() - timedelta(hours=1)
    stale = Publication.objects.create(review=review, trigger="triage", triage_version=1)
    fresh = Publication.objects.create(review=review, trigger="triage", triage_version=2)
    done = Publication.objects.create(review=review, trigger="manual", triage_version=1,
                                      status="published")
    Publication.objects.filter(pk__in=[stale.pk, done.pk]).update(updated_at=old)
    assert dispatch.resend_due() == [stale.pk]
    assert sent == [(stale.pk, None)] and fresh.pk != stale.pk


# --- the button and the panel ----------------------------------------------------------------
def final_review(alice, capture):
    review = make_review(alice, decisions=ACCEPT_TWO)
    return finalise(review, alice, capture=capture)


@pytest.mark.parametrize("htmx", [True, False])
def test_publish_button_owner_only(alice, bob, client, host, sent, htmx,
                                   django_capture_on_commit_callbacks):
    review = final_review(alice, django_capture_on_commit_callbacks)
    url = reverse("publish_review", args=[review.run_id])
    extra = HTMX if htmx else {}
    anonymous = client.post(url, **extra)
    assert anonymous.status_code == 302 and reverse("login") in anonymous["Location"]
    client.force_login(bob)
    assert client.post(url, **extra).status_code == 404
    assert not Publication.objects.filter(trigger="manual").exists()
    client.force_login(alice)
    assert client.get(url).status_code == 405
    response = client.post(url, **extra)
    if htmx:
        assert response.status_code == 200 and 'id="publication-panel"' in response.content.decode()
    else:
        assert response.status_code == 302
        assert response["Location"].endswith(f"{review.get_absolute_url()}#publication-panel")
    assert Publication.objects.filter(trigger="manual", created_by=alice).count() == 1


def test_double_submit_makes_one_publication(alice, alice_client, host, sent,
                                             django_capture_on_commit_callbacks):
    review = final_review(alice, django_capture_on_commit_callbacks)
    url = reverse("publish_review", args=[review.run_id])
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        first = alice_client.post(url, **HTMX)
        second = alice_client.post(url, **HTMX)
    assert first.status_code == second.status_code == 200
    assert "under way already; nothing changed" in second.content.decode()
    [manual] = Publication.objects.filter(trigger="manual")
    assert sent == [(manual.pk, None)]
    worker.run(manual.pk)
    with django_capture_on_commit_callbacks(execute=True):  # done: publish again
        again = alice_client.post(url, **HTMX)
    assert "Publishing again is queued." in again.content.decode()
    manual.refresh_from_db()
    assert manual.status == "pending" and manual.attempts == 0 and sent[-1] == (manual.pk, None)


def test_publish_now_before_the_verdict_is_final_is_refused(alice, alice_client, host, sent):
    review = make_review(alice, decisions=ACCEPT_TWO)
    response = alice_client.post(reverse("publish_review", args=[review.run_id]), **HTMX)
    assert response.status_code == 409
    assert "Finalise the verdict first" in response.content.decode()
    plain = alice_client.post(reverse("publish_review", args=[review.run_id]))
    assert plain.status_code == 409 and "Finalise the verdict first" in plain.content.decode()
    assert not Publication.objects.exists() and not sent


def test_page_shows_policy_status_attempts_and_errors_escaped(
        alice, alice_client, host, sent, django_capture_on_commit_callbacks):
    review = final_review(alice, django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    Publication.objects.filter(pk=pub.pk).update(
        status="retrying", attempts=2, last_error="<script>alert(1)</script> 502",
        next_attempt_at=timezone.now() + timedelta(minutes=1))
    page = alice_client.get(review.get_absolute_url()).content.decode()
    panel = page[page.index('id="publication-panel"'):page.index('id="findings-panel"')]
    assert "after triage: the findings you accept are published" in panel
    assert "Failed, will retry" in panel and "<dd>2</dd>" in panel and "Next try" in panel
    assert "&lt;script&gt;alert(1)&lt;/script&gt; 502" in panel and "<script>alert" not in page
    assert "Publish again" in panel
    assert worker.run(pub.pk) == "skipped"  # a retry is not taken before its time
    Publication.objects.filter(pk=pub.pk).update(next_attempt_at=timezone.now())
    assert worker.run(pub.pk) == "published"
    page = alice_client.get(review.get_absolute_url()).content.decode()
    assert "2 new inline comments (1 with a suggestion), 0 already on the pull request" in page
    assert 'href="https://github.com/octo/demo/pull/7"' in page
    assert TOKEN not in page


def test_publication_events_refresh_the_panel_live(alice, host, sent,
                                                   django_capture_on_commit_callbacks):
    review = final_review(alice, django_capture_on_commit_callbacks)
    worker.run(Publication.objects.get().pk)
    run = Run.objects.get(pk=review.run_id)
    events = list(run.events.filter(kind="publication").order_by("seq"))
    assert [e.message for e in events][-1].startswith("Published to the pull request: 2 new")
    html = render_live_update(run, events[-1:], set())
    assert 'id="publication-panel" hx-swap-oob="true"' in html and "Published" in html


# --- the hooks, through the real engine and the offline model ----------------------------------
@pytest.fixture
def no_broker(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda run_id, countdown=None: None)


@pytest.mark.django_db(transaction=True)
def test_finalising_on_the_page_publishes_the_accepted_findings(alice, alice_client, host,
                                                                 sent, no_broker):
    run = engine.run_inline(start(alice).pk)
    assert run.status == "awaiting_triage", run.error
    Review.objects.filter(run=run).update(pull_request=make_pr(alice), head_sha=HEAD,
                                          base_sha=BASE)
    assert not Publication.objects.exists()  # after triage: nothing at synthesis
    review = finalise_all(alice_client, run)
    [pub] = Publication.objects.all()
    assert (pub.trigger, pub.triage_version, sent) == ("triage", 1, [(pub.pk, None)])
    assert worker.run(pub.pk) == "published"
    accepted = review.findings.filter(kept=True, decision="accepted").count()
    pub.refresh_from_db()
    assert accepted and pub.result["findings"] == accepted
    assert len(host.posted_comments) == 1 and len(host.posted_reviews) == 1


@pytest.mark.django_db(transaction=True)
def test_the_automatic_policy_publishes_when_the_synthesis_is_persisted(alice, host, sent,
                                                                        no_broker):
    run = start(alice)
    Review.objects.filter(run=run).update(pull_request=make_pr(
        alice, "automatic", auto_min_severity="info", auto_min_confidence=0.0), head_sha=HEAD)
    run = engine.run_inline(run.pk)
    [pub] = Publication.objects.all()
    assert pub.trigger == "automatic" and sent == [(pub.pk, None)]
    review = Review.objects.get(run=run)
    assert worker.run(pub.pk) == "published"
    pub.refresh_from_db()
    assert pub.result["findings"] == review.findings.filter(kept=True).count() > 0


def test_one_publication_at_a_time_per_pull_request(alice, host, sent,
                                                    django_capture_on_commit_callbacks):
    review = final_review(alice, django_capture_on_commit_callbacks)
    first = Publication.objects.get()
    other = Publication.objects.create(review=review, trigger="manual", triage_version=1)
    Publication.objects.filter(pk=first.pk).update(status="publishing")  # another worker's
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert worker.run(other.pk) == "waiting"
    other.refresh_from_db()
    assert other.status == "pending" and other.attempts == 0 and not host.calls
    assert sent == [(other.pk, worker.BUSY_DELAY)]
    Publication.objects.filter(pk=first.pk).update(status="published")
    assert worker.run(other.pk) == "published"
