"""A person reviews a change in Chromium: paste a diff, watch the three reviewers and the
synthesis arrive over the WebSocket, accept and reject findings, override the verdict and
download the SARIF export. Everything real: Daphne, the Celery worker, Redis, ruff and
bandit, and the offline model through LiteLLM (slowed to 0.4 s a call)."""

import json
import re

import jsonschema
import pytest

from reviews_app.models import Review
from tests.conftest import sign_in
from tests.review_corpus import GOOD, JS
from tests.test_review_export import SARIF_SCHEMA_PATH

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def test_paste_watch_triage_override_and_export(live_stack, page, alice):
    sign_in(page, live_stack)
    page.click("nav >> text=Reviews")
    page.wait_for_url(live_stack + "/reviews/")

    # Bad input: a clear message in place, nothing saved.
    page.fill("textarea[name=diff]", "this is not a diff")
    page.click("text=Start review")
    page.wait_for_selector("#new-review p.error")
    assert "does not look like a unified diff" in page.locator("#new-review p.error").inner_text()
    assert not Review.objects.exists()

    page.fill("textarea[name=diff]", GOOD + JS)
    page.click("text=Start review")
    page.wait_for_url(re.compile(r".*/reviews/\d+/$"))
    page.evaluate("window.__noReload = true")
    # The reviewers are still at work when the page first renders…
    assert page.locator("#reviewers-panel .badge.busy").count() >= 1
    # …and each one's result arrives live.
    for name in ("security", "architecture", "style"):
        page.wait_for_selector(f"#reviewer-{name} .badge.ok", timeout=30_000)
    page.wait_for_selector("#verdict-panel button[value=accept]", timeout=30_000)
    assert page.evaluate("window.__noReload") is True, "the page reloaded"
    assert "Request changes" in page.locator("#verdict-panel .verdict").inner_text()
    assert page.locator("#diff-panel .diff-file").count() == 2
    assert page.locator("#diff-panel tr.marker a").count() >= 1

    cards = page.locator("#findings-panel li.finding")
    assert cards.count() >= 2
    first_id, second_id = cards.nth(0).get_attribute("id"), cards.nth(1).get_attribute("id")
    first = page.locator(f"#{first_id}")
    first.locator("input[name=comment]").fill("Real problem, fix before merge")
    first.locator("button[value=accepted]").click()
    page.wait_for_selector(f"#{first_id} .badge.ok")
    assert "Real problem, fix before merge" in page.locator(f"#{first_id}").inner_text()
    page.locator(f"#{second_id} button[value=rejected]").click()
    page.wait_for_selector(f"#{second_id} .badge.bad")
    assert "2 of" in page.locator("#triage-summary").inner_text()
    # The verdict is final only once every finding is triaged: reject the rest at once.
    if cards.count() > 2:
        page.on("dialog", lambda dialog: dialog.accept())
        page.click("#verdict-panel button:has-text('Reject all remaining')")
        page.wait_for_selector("#verdict-panel p.notice")

    # Override the verdict: first without a reason (refused), then with one.
    page.click("#verdict-panel details.reject summary")
    page.click("#verdict-panel button[value=override]")
    page.wait_for_selector("#verdict-panel p.error")
    assert "Choose the verdict" in page.locator("#verdict-panel p.error").inner_text()
    # The error replaced the verdict panel only, not the page (nor its live channel).
    assert page.locator("#findings-panel li.finding").count() >= 2
    assert page.locator("#diff-panel").count() == 1
    page.select_option("#verdict-panel select[name=verdict]", "needs_discussion")
    page.click("#verdict-panel button[value=override]")
    page.wait_for_function("() => document.querySelector('#verdict-panel p.error')"
                           ".innerText.includes('Say why')")
    assert re.search(r"/reviews/\d+/$", page.url), "the second error left the review page"
    page.select_option("#verdict-panel select[name=verdict]", "needs_discussion")
    page.fill("#verdict-panel textarea[name=reason]", "Internal tool, discuss in standup")
    page.click("#verdict-panel button[value=override]")
    page.wait_for_selector("#verdict-panel .decided")
    assert re.search(r"/reviews/\d+/$", page.url), "the override left the review page"
    assert "overridden by alice" in page.locator("#verdict-panel .decided").inner_text()
    from tests.stack import wait_until
    wait_until(lambda: Review.objects.get().run.status == "completed", what="review completed")
    page.wait_for_selector("#run-header .badge.ok", timeout=20_000)  # arrives live
    page.reload()
    assert page.locator("#run-header .badge.ok").inner_text() == "Completed"

    review = Review.objects.get()
    assert review.final_verdict == "needs_discussion"
    assert review.findings.filter(decision="accepted").count() == 1
    assert review.findings.filter(kept=True, decision="rejected").count() == cards.count() - 1

    with page.expect_download() as info:
        page.locator("#run-header .exports a", has_text="SARIF").last.click()
    download = info.value
    assert download.suggested_filename == f"review-{review.run_id}-accepted.sarif"
    sarif = json.loads(open(download.path(), encoding="utf-8").read())
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA_PATH.read_text())).validate(sarif)
    assert len(sarif["runs"][0]["results"]) == 1
    assert page.errors == []


def test_a_large_review_opens_file_diffs_on_demand(live_stack, page, alice):
    from reviews_app import services
    from tests.test_review_views import big_diff

    inp = services.from_text(big_diff())
    run = services.start_review(alice, inp, services.prepare(inp), enqueue=False)
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/reviews/{run.pk}/")
    assert page.locator("#file-5 table.diff-code").count() == 0
    page.click("#file-5 > summary")
    page.wait_for_selector("#file-5 table.diff-code tr.add")
    assert "line 99" in page.locator("#file-5 table.diff-code").inner_text()
    assert page.errors == []
