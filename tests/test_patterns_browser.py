"""Patterns in Chromium: a ReWOO run started from the dashboard shows its evidence table and
an answer whose citations link to the evidence; a ReAct tool-approval gate is answered on the
page; a debate's rounds and a team's subtasks arrive on the open page as they happen.
Everything real: Daphne, the Celery worker, Redis, the offline model through LiteLLM."""

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


def _completed(page):
    page.wait_for_function("() => document.querySelector('#run-header').innerText"
                           ".includes('Completed')", timeout=30_000)


def _watch(page, expression: str) -> None:
    """Record every distinct value of ``expression`` as the page changes (live swaps)."""
    page.evaluate("""expr => { window.__seen = []; const read = new Function('return ' + expr);
        const note = () => { const v = read(); if (window.__seen.at(-1) !== v) window.__seen.push(v); };
        note(); new MutationObserver(note).observe(document.body, {childList: true, subtree: true}); }""",
                  expression)


def _seen(page) -> list:
    return page.evaluate("window.__seen")


def test_debate_rounds_arrive_on_the_open_page(live_stack, page, alice):
    sign_in(page, live_stack)
    page.select_option("select[name=pattern]", "debate")
    assert page.locator("textarea[name=positions]").is_visible()
    assert not page.locator("textarea[name=team]").is_visible()
    page.fill("textarea[name=task]", "Should we rewrite the monolith?")
    page.fill("textarea[name=positions]", "Optimist: in favour\nSkeptic: against")
    page.fill("input[name=max_rounds]", "4")
    page.click("#start-form button.primary")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.evaluate("window.__noReload = true")
    _watch(page, "document.querySelector('#items-panel h2').innerText")
    page.wait_for_selector("#items-panel article.conclusion", timeout=30_000)
    _completed(page)
    panel = page.locator("#items-panel")
    assert "4 of 4 rounds" in panel.locator("h2").inner_text()
    # Four rounds and the judge take five slowed model calls: the page opened before the end
    # and showed rounds arriving one by one, not only the last state when the run finished.
    rounds = [int(re.search(r"(\d+) of 4 rounds", text).group(1)) for text in _seen(page)]
    assert rounds[-1] == 4 and len(rounds) >= 3 and rounds == sorted(rounds), rounds
    assert panel.locator("section.argument").count() == 8
    assert "Skeptic" in panel.locator("article.round").nth(3).inner_text()
    assert "favours no one" in page.locator("#answer-panel").inner_text()
    assert page.evaluate("window.__noReload") is True  # swapped in live, never reloaded
    assert page.errors == []


def test_team_subtasks_arrive_on_the_open_page(live_stack, page, alice):
    sign_in(page, live_stack)
    page.select_option("select[name=pattern]", "team_lead")
    assert page.locator("textarea[name=team]").is_visible()
    assert not page.locator("textarea[name=positions]").is_visible()
    page.fill("textarea[name=task]", "Collect the facts, then write the report")
    page.fill("textarea[name=team]", "analyst: finds facts\neditor: writes")
    page.select_option("select[name=strategy]", "dynamic")
    page.click("#start-form button.primary")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.evaluate("window.__noReload = true")
    _watch(page, "[...document.querySelectorAll('#items-panel table.subtasks tbody tr')]"
                 ".map(r => r.className).join(' ')")
    # The lead's review asks for one more subtask: a third row arrives after the first two.
    page.wait_for_function("() => document.querySelectorAll('#items-panel table.subtasks "
                           "tbody tr').length === 3", timeout=30_000)
    _completed(page)
    # Delegation, work, review, more work: each shows as it happens (seven slowed calls).
    states = _seen(page)
    assert "pending pending" in states and states[-1] == "done done done", states
    rows = page.locator("#items-panel table.subtasks tbody tr")
    assert [rows.nth(i).locator("td").nth(1).inner_text() for i in range(3)] == \
        ["analyst", "editor", "analyst"]
    assert "Check the results" in rows.nth(2).inner_text()
    assert page.locator("#items-panel .badge.ok").count() == 3
    assert "T3 by analyst" in page.locator("#answer-panel").inner_text()
    assert page.evaluate("window.__noReload") is True
    assert page.errors == []
