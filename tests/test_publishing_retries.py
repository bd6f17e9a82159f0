"""Publishing when things go wrong: a retry after a failure half-way posts no comment twice,
retryable errors back off (at least Retry-After) up to a maximum of attempts, 401/403/404/422
fail at once with the plain message, the token never shows, the claim prevents a double run,
one publication at a time per pull request, lost messages are sent again."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from reviews_app.hosting.base import HostError
from reviews_app.models import Publication, PublishedComment
from reviews_app.prflow.publishing import dispatch, worker
from tests import publishing_fixtures as fixtures
from tests.publishing_fixtures import (
    ACCEPT_TWO,
    TOKEN,
    final_review,
    finalise,
    make_review,
    reopen,
)

pytestmark = pytest.mark.django_db
host, sent = fixtures.host, fixtures.sent  # the fake provider, the tasks sent


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


def test_retry_after_is_honoured_within_a_floor_and_a_cap_else_backoff_doubles(
        alice, host, sent, django_capture_on_commit_callbacks, settings):
    settings.QUORUM_PUBLISH_RETRY_BASE_SECONDS = 30
    review = make_review(alice, decisions=ACCEPT_TWO)
    finalise(review, alice, capture=django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    sent.clear()
    for wait in (120, 5, 0, 10**6, None):
        host.fail_next("review_comments", HostError("Rate limited.", status=429,
                                                    retry_after=wait, retryable=True))
    settings.QUORUM_PUBLISH_MAX_ATTEMPTS = 10
    for _ in range(5):
        with django_capture_on_commit_callbacks(execute=True):
            worker.run(pub.pk)
        Publication.objects.filter(pk=pub.pk).update(next_attempt_at=timezone.now())
    # The provider's word, however short (a floor of 1 s) or long (a cap of an hour); with
    # none, our backoff: 30 s doubled per attempt (the fifth attempt: 30 × 2⁴).
    assert sent == [(pub.pk, 120.0), (pub.pk, 5.0), (pub.pk, 1.0), (pub.pk, 3600.0),
                    (pub.pk, 480.0)]
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


def test_a_connection_without_its_token_fails_at_once_and_says_so(
        alice, host, sent, monkeypatch, django_capture_on_commit_callbacks):
    from reviews_app.connections import secrets

    def no_token(conn):
        raise secrets.SecretUnavailable(f"Connection {conn.pk} has no token.")

    monkeypatch.setattr(secrets, "repo_ref", no_token)
    review = final_review(alice, django_capture_on_commit_callbacks)
    pub = Publication.objects.get()
    sent.clear()
    assert worker.run(pub.pk) == "failed"
    pub.refresh_from_db()
    conn_pk = review.pull_request.connection_id
    assert pub.last_error == f"Connection {conn_pk} has no token." and not sent
    assert not host.calls
