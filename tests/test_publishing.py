"""Publishing a review to its pull request (reviews_app/prflow/publishing): the policy matrix (after
triage only after finalising and only the accepted findings; automatic above thresholds;
never), what is posted (one review with the new inline comments only, the summary updated in
place, no duplicate across re-publication), and the hooks through the real engine.

The provider is tests/fake_host.py's FakeHost: ``reviews_app.hosting.client_for`` and the
connection's ``repo_ref`` are patched (tests/publishing_fixtures.py)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents_app import engine
from reviews_app.hosting.base import FINGERPRINT_MARKER, SUMMARY_MARKER, HostComment
from reviews_app.models import Finding, Publication, PublishedComment, PullRequest, Review
from reviews_app.prflow.publishing import dispatch, worker
from tests import publishing_fixtures as fixtures
from tests.publishing_fixtures import (
    ACCEPT_TWO,
    BASE,
    HEAD,
    HTMX,
    finalise,
    inline_fingerprints,
    make_pr,
    make_review,
    reopen,
)
from tests.test_review_triage import finalise_all
from tests.test_review_views import start

pytestmark = pytest.mark.django_db
host, sent = fixtures.host, fixtures.sent  # the fake provider, the tasks sent


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
        assert "### Not examined (1)" in host.posted_comments[0].body
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

    host.inline.append(HostComment(id="1", body=FINGERPRINT_MARKER.format("1" * 40),
                                   path="app.py", line=3, author="mallory"))
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    worker.run(Publication.objects.get().pk)
    assert [c.line for c in host.posted_reviews[0][1].comments] == [3, 4]  # SEC-1 posted



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
