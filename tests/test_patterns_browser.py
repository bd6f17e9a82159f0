"""The tool-using patterns in Chromium: a ReWOO run started from the dashboard shows its
evidence table and an answer whose citations link to the evidence; a ReAct tool-approval gate
is answered on the page. Everything real: Daphne, the Celery worker, Redis, the offline model
through LiteLLM."""

import re

import pytest

from agents_app.models import Run, RunItem
from tests.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def test_rewoo_shows_evidence_and_linked_citations(live_stack, page, alice):
    sign_in(page, live_stack)
    page.select_option("select[name=pattern]", "rewoo")
    # Only ReWOO's own options are shown.
    assert page.locator("input[name=top_k_sketches]").is_visible()
    assert not page.locator("input[name=max_steps]").is_visible()
    assert not page.locator("textarea[name=positions]").is_visible()
    page.fill("textarea[name=task]", "What is (3 + 4) * 6, and what time is it?")
    page.click("#start-form button.primary")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.evaluate("window.__noReload = true")
    # The draft answer shows beside the evidence as soon as it is written; once the verify
    # pass completes the run it is the answer, shown once, in the answer panel.
    page.wait_for_selector("#items-panel a.cite, #answer-panel a.cite", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#run-header').innerText.includes('Completed')",
                           timeout=30_000)
    rows = page.locator("#items-panel table.evidence tbody tr")
    assert rows.count() == 2
    assert "(3 + 4) * 6 = 42" in rows.nth(0).inner_text()
    assert "current_time" in rows.nth(1).inner_text()
    assert page.locator("#items-panel a.cite").count() == 0
    cite = page.locator("#answer-panel a.cite").first
    assert cite.get_attribute("href") == "#evidence-E1"
    cite.click()
    assert page.evaluate("location.hash") == "#evidence-E1"
    assert "Verification 1: supported" in page.locator("#items-panel").inner_text()
    assert page.evaluate("window.__noReload") is True
    run = Run.objects.get()
    assert run.status == "completed"
    assert RunItem.objects.filter(run=run, kind="evidence").count() == 2
    assert page.errors == []


def test_react_tool_approval_on_the_page(live_stack, page, alice):
    sign_in(page, live_stack)
    page.select_option("select[name=pattern]", "react")
    page.fill("textarea[name=task]", "What is 6*7?")
    page.check("input[name=approval][value=calculator]")
    page.click("#start-form button.primary")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.wait_for_selector("text=Approve this tool call?", timeout=30_000)
    page.fill("#items-panel textarea[name=args]", '{"expression": "6*8"}')
    page.click("#items-panel button[value=approve]")
    page.wait_for_selector("#items-panel pre.observation", timeout=30_000)
    assert "6*8 = 48" in page.locator("#items-panel pre.observation").first.inner_text()
    page.wait_for_function("() => document.querySelector('#run-header').innerText.includes('Completed')",
                           timeout=30_000)
    assert "approved by alice" in page.locator("#items-panel").inner_text()
    assert page.errors == []
