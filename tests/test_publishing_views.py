"""The publish button (owner only, htmx and plain form, double submits, refusals) and the
publication panel on the review page (status, attempts, errors escaped, live refresh)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from agents_app.models import Run
from reviews_app.models import Publication
from reviews_app.prflow.publishing import worker
from reviews_app.views import render_live_update
from tests import publishing_fixtures as fixtures
from tests.publishing_fixtures import (
    ACCEPT_TWO,
    HTMX,
    TOKEN,
    final_review,
    make_review,
)

pytestmark = pytest.mark.django_db
host, sent = fixtures.host, fixtures.sent  # the fake provider, the tasks sent


# --- the button and the panel ----------------------------------------------------------------
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
    panel = page[page.index('id="publication-panel"'):]
    panel = panel[:panel.index("</section>")]
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


def test_a_published_review_stays_shown_as_published_after_the_policy_changes(
        alice, alice_client, host, sent, django_capture_on_commit_callbacks):
    review = final_review(alice, django_capture_on_commit_callbacks)
    assert worker.run(Publication.objects.get().pk) == "published"
    review.pull_request.connection.publish_policy = "never"
    review.pull_request.connection.save()
    page = alice_client.get(review.get_absolute_url()).content.decode()
    panel = page[page.index('id="publication-panel"'):]
    panel = panel[:panel.index("</section>")]
    assert "Published" in panel and "2 new inline comments" in panel
    assert "Nothing is published" not in panel


def test_publication_events_refresh_the_panel_live(alice, host, sent,
                                                   django_capture_on_commit_callbacks):
    review = final_review(alice, django_capture_on_commit_callbacks)
    worker.run(Publication.objects.get().pk)
    run = Run.objects.get(pk=review.run_id)
    events = list(run.events.filter(kind="publication").order_by("seq"))
    assert [e.message for e in events][-1].startswith("Published to the pull request: 2 new")
    html = render_live_update(run, events[-1:], set())
    assert 'id="publication-panel" hx-swap-oob="true"' in html and "Published" in html


@pytest.mark.parametrize("data", [{}, {"publish": "\x00"}, {"publish": "9" * 100_000},
                                  {"publish": ["1", "1"], "review": "other"}])
def test_bad_input_to_the_button_publishes_once_and_nothing_else(
        alice, alice_client, host, sent, data, django_capture_on_commit_callbacks):
    review = final_review(alice, django_capture_on_commit_callbacks)
    url = reverse("publish_review", args=[review.run_id])
    for _ in range(2):  # a resubmit too
        response = alice_client.post(url, data, **HTMX)
        assert response.status_code == 200
    assert Publication.objects.filter(trigger="manual").count() == 1
    assert Publication.objects.count() == 2  # the triage one and the manual one
