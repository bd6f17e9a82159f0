"""A person in Chromium, with a screen reader's ears: after an action the focus is in the
region that changed and the status is said in an aria-live region; a live status change is
said too. And the trace opens each call's prompt and reply in place."""

import re

import pytest

from agents_app.models import Run
from tests.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

LIVE_TEXT = "() => document.getElementById('live-status').textContent"


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def test_cancel_moves_focus_to_the_header_and_says_so(live_stack, page, alice):
    sign_in(page, live_stack)
    page.fill("textarea[name=task]", "Collect the logs, then find the error, and finally "
                                     "write a report.")
    page.click("text=Start run")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    live = page.locator("#live-status")
    assert live.get_attribute("aria-live") == "polite" and live.get_attribute("role") == "status"

    # A live update of the status (the plan arrives over the WebSocket) is said, focus stays.
    page.wait_for_selector("#plan-form", timeout=20_000)
    page.wait_for_function(f"() => ({LIVE_TEXT})().includes('Awaiting plan approval')",
                           timeout=10_000)

    page.on("dialog", lambda dialog: dialog.accept())  # "Cancel this run?"
    page.click("#run-header button.danger")
    page.wait_for_function(f"() => ({LIVE_TEXT})() === 'Run cancelled.'", timeout=10_000)
    assert page.evaluate("() => !!document.activeElement.closest('#run-header')")
    # The live update that follows (the header again, now "Cancelled") keeps the focus there.
    page.wait_for_function("() => document.querySelector('#run-header .badge').textContent"
                           " === 'Cancelled'", timeout=10_000)
    page.wait_for_timeout(1000)
    assert page.evaluate("() => !!document.activeElement.closest('#run-header')")
    assert Run.objects.get().status == "cancelled"

    # The trace: a call's prompt and reply load in place when opened.
    page.locator("#calls-panel details summary").first.click()
    page.wait_for_selector("#calls-panel .call-io pre.response", timeout=5_000)
    assert "Planning (plan v1)" in page.locator("#calls-panel").inner_text()
    assert page.errors == []
