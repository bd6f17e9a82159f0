"""A person triages a review in Chromium: decides some findings, is told why the verdict
cannot be finalised yet, settles the rest, finalises, reads the history (who and when), finds
triage locked, reopens it and sees the reopening in the history. Everything real: Daphne, the
Celery worker, Redis and the offline model."""

import re

import pytest

from agents_app.models import Run
from reviews_app.models import TriageDecision
from tests.conftest import sign_in
from tests.review_corpus import review_at_triage

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d alice"


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def test_triage_finalise_history_lock_and_reopen(live_stack, page, alice):
    run, review, keys = review_at_triage(alice)
    page.on("dialog", lambda dialog: dialog.accept())  # the confirmations (hx-confirm)
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/reviews/{run.pk}/")
    panel = page.locator("#verdict-panel")

    # Triage two findings.
    page.locator(f"#finding-{keys[0]} button[value=accepted]").click()
    page.wait_for_selector(f"#finding-{keys[0]} .badge.ok")
    page.locator(f"#finding-{keys[1]} button[value=rejected]").click()
    page.wait_for_selector(f"#finding-{keys[1]} .badge.bad")
    assert f"{len(keys) - 2} finding" in panel.locator(".untriaged").inner_text()

    # Finalising now is refused, with the reason and the two ways to settle the rest.
    panel.locator("button[value=accept]").click()
    page.wait_for_selector("#verdict-panel p.error")
    error = panel.locator("p.error").inner_text()
    assert "cannot be finalised yet" in error and keys[2] in error
    assert panel.locator("button", has_text="Accept all remaining").count() == 1
    assert panel.locator("button", has_text="Reject all remaining").count() == 1
    assert Run.objects.get(pk=run.pk).status == "awaiting_triage"

    # Settle the rest, then finalise.
    panel.locator("button", has_text="Accept all remaining").click()
    page.wait_for_selector("#verdict-panel p.notice")
    assert "You can finalise the verdict now" in panel.locator("p.notice").inner_text()
    assert panel.locator(".untriaged").count() == 0
    assert "accepted all remaining findings" in page.locator("#history-panel").inner_text()
    panel.locator("button[value=accept]").click()
    page.wait_for_selector("#verdict-panel .decided")
    assert "accepted by alice" in panel.locator(".decided").inner_text()

    # The history says who did what, and when, oldest first.
    history = page.locator("#triage-history li")
    texts = [history.nth(i).inner_text() for i in range(history.count())]
    assert len(texts) == 4, texts
    assert all(re.match(WHEN, t) for t in texts), texts
    assert f"accepted {keys[0]}" in texts[0] and f"rejected {keys[1]}" in texts[1]
    assert "accepted all remaining findings" in texts[2]
    assert "finalised the verdict as version 1" in texts[3]

    # Triage is locked: no decision buttons, and the page says why.
    assert page.locator("#findings-panel form.decide").count() == 0
    assert "triage is locked" in page.locator("#findings-panel .locked").inner_text()
    assert "triage version 1, finalised by alice" in panel.inner_text()

    # Once the worker has closed the review, it can be reopened (with a confirmation).
    page.wait_for_selector("#verdict-panel details.reopen", timeout=30_000)  # arrives live
    panel.locator("details.reopen summary").click()
    panel.locator("textarea[name=note]").fill("A colleague disagrees")
    panel.locator("button", has_text="Reopen triage").click()
    # (The reopening's live update may redraw the panel: what it says comes from the state.)
    page.wait_for_selector("#verdict-panel p.reopened")
    assert "Triage is open again: alice reopened version 1" in panel.inner_text()
    last = page.locator("#triage-history li").last.inner_text()
    assert re.match(WHEN, last) and "reopened triage after version 1" in last
    assert "A colleague disagrees" in last
    assert page.locator(f"#finding-{keys[0]} button[value=pending]").count() == 1
    assert panel.locator("button[value=accept]").count() == 1

    review.refresh_from_db()
    assert review.final_verdict == "" and review.triage_version == 1
    assert list(TriageDecision.objects.filter(review=review).values_list("kind", flat=True)) \
        == ["accept", "reject", "accept_rest", "finalise", "reopen"]
    assert page.errors == []


def test_a_decision_in_one_tab_shows_live_in_another(live_stack, page, alice):
    """Two pages open on one review (two people, or one in two tabs): a finding decided in
    one appears decided in the other without a reload, with the history and the count."""
    run, _, keys = review_at_triage(alice, min_kept=1)
    other = page.context.browser.new_page(viewport={"width": 1300, "height": 900})
    other_errors: list[str] = []
    other.on("pageerror", lambda e: other_errors.append(str(e)))
    for p in (page, other):
        sign_in(p, live_stack)
        with p.expect_websocket() as socket:
            p.goto(f"{live_stack}/reviews/{run.pk}/")
        # Open, and the consumer told the last event this page has.
        socket.value.wait_for_event("framesent", timeout=10_000)
    before = other.locator("#verdict-panel .untriaged").inner_text()
    page.locator(f"#finding-{keys[0]} button[value=accepted]").click()
    other.wait_for_selector(f"#finding-{keys[0]} .badge.ok", timeout=10_000)
    assert other.locator("#verdict-panel .untriaged").inner_text() != before
    assert f"accepted {keys[0]}" in other.locator("#history-panel").inner_text()
    # The other tab's own form still works on the page it now shows.
    other.locator(f"#finding-{keys[1]} button[value=rejected]").click()
    page.wait_for_selector(f"#finding-{keys[1]} .badge.bad", timeout=10_000)
    assert TriageDecision.objects.filter(review__run=run).count() == 2
    assert page.errors == [] and other_errors == []
