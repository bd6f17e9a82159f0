"""A person rejects a finding with one click on a reason in Chromium (htmx sends the reason
button), follows the suggestion to the memories page and approves it there. Everything real:
Daphne, the Celery worker, Redis and the offline model."""

import pytest

from agents_app.models import Run
from reviews_app import services
from reviews_app.models import Memory, Review
from tests.conftest import sign_in
from tests.review_corpus import GOOD
from tests.stack import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def test_reject_with_a_reason_then_approve_the_suggested_memory(live_stack, page, alice):
    inp = services.from_text(GOOD)
    run = services.start_review(alice, inp, services.prepare(inp))
    wait_until(lambda: Run.objects.get(pk=run.pk).status == "awaiting_triage", timeout=60,
               what="the review at its triage gate")
    key = Review.objects.get(run=run).findings.filter(kept=True).first().key
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/reviews/{run.pk}/")
    card = page.locator(f"#finding-{key}")
    card.locator("input[name=comment]").fill("only admins call it")
    card.locator("button[name=reason][value=intended]").click()
    page.wait_for_selector(f"#finding-{key} .reject-reason")
    assert card.locator(".reject-reason").inner_text() == "intended"
    assert "1 memory suggested from this review" in card.inner_text()
    [memory] = Memory.objects.all()
    assert memory.status == "pending" and "only admins call it" in memory.text

    card.locator("a", has_text="review it").click()
    page.wait_for_url(f"**/reviews/memories/#memory-{memory.pk}")
    item = page.locator(f"#memory-{memory.pk}")
    item.locator("button", has_text="Approve").click()
    page.wait_for_selector(f"#memory-{memory.pk} .badge.ok")
    assert "approved" in page.locator(f"#memory-{memory.pk} .notice").inner_text()
    memory.refresh_from_db()
    assert memory.status == "active" and memory.decided_by == alice
