"""Quorum vote in Chromium, everything real (Daphne, the Celery worker, Redis, the offline
model through LiteLLM): a run started from the dashboard stops at the vote gate with its
groups side by side; a refused edit says why on the page; another round with feedback reaches
the voters and settles the vote live; an edited answer, picked, is the run's answer."""

import re

import pytest

from agents_app.models import Run, RunItem
from tests.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

TASK = "Compare three vector databases, then recommend one"


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def start_vote(page, base_url: str, **options) -> None:
    sign_in(page, base_url)
    page.select_option("select[name=pattern]", "vote")
    # Only the vote's own options and roles are shown.
    assert page.locator("input[name=voters]").is_visible()
    assert page.locator("input[name=model_voter_2]").is_visible()
    assert not page.locator("input[name=max_steps]").is_visible()
    for name, value in options.items():
        page.fill(f"input[name={name}]", value)
    page.fill("textarea[name=task]", TASK)
    page.click("#start-form button.primary")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.wait_for_selector("#items-panel .vote-group form", timeout=30_000)


def status_says(page, text: str) -> None:
    page.wait_for_function(
        "t => document.querySelector('#run-header').innerText.includes(t)", arg=text,
        timeout=30_000)


def test_another_round_then_the_vote_settles_live(live_stack, page, alice):
    start_vote(page, live_stack)
    page.evaluate("window.__noReload = true")
    panel = page.locator("#items-panel")
    assert "2 of 3 voters agree (67%; 75% needed)" in panel.inner_text()
    groups = page.locator("#items-panel .vote-group")
    assert groups.count() == 2
    assert "Start from “compare”" in groups.nth(0).inner_text()
    assert "2 of 3 voters" in groups.nth(0).inner_text()
    # A refused edit: the reason on the page, the run still waiting.
    groups.nth(1).locator("summary").click()
    groups.nth(1).locator("textarea[name=answer]").fill("   ")
    groups.nth(1).locator("button[value=edit]").click()
    page.wait_for_selector("#items-panel p.error", timeout=10_000)
    assert "The edited answer is empty" in page.locator("#items-panel p.error").inner_text()
    page.fill("#items-panel textarea[name=feedback]", "Name one database.")
    page.click("#items-panel button[value=again]")
    page.wait_for_function("() => document.getElementById('gate-status').innerText"
                           ".includes('alice asked for round 2 with feedback.')",
                           timeout=10_000)
    status_says(page, "Completed")
    page.wait_for_selector("#items-panel #vote-round-2 .badge.ok", timeout=30_000)
    assert "The voters read your feedback: “Name one database.”" in panel.inner_text()
    assert "Name one database." in page.locator("#answer-panel").inner_text()
    assert page.evaluate("window.__noReload") is True  # it all came over the live channel
    run = Run.objects.get()
    assert run.status == "completed"
    assert RunItem.objects.filter(run=run, kind="answer").count() == 6
    assert page.errors == []


def test_an_edited_answer_picked_is_the_answer(live_stack, page, alice):
    start_vote(page, live_stack, max_rounds="1")
    assert page.locator("#items-panel button[value=again]").count() == 0
    assert "Round 1 was the last of 1" in page.locator("#items-panel").inner_text()
    second = page.locator("#items-panel .vote-group").nth(1)
    second.locator("summary").click()
    second.locator("textarea[name=answer]").fill("Use **pgvector**: it is already in Postgres.")
    second.locator("button[value=edit]").click()
    status_says(page, "Completed")
    page.wait_for_selector("#answer-panel strong", timeout=30_000)
    assert "Use pgvector: it is already in Postgres." in page.locator("#answer-panel").inner_text()
    assert "alice edited and picked the answer of group 2" in \
        page.locator("#items-panel").inner_text()
    assert Run.objects.get().answer == "Use **pgvector**: it is already in Postgres."
    assert page.errors == []
