"""A person in Chromium: sign in, start a run, edit and approve the plan, and watch the
steps arrive over the WebSocket without reloading. Everything real: Daphne, the Celery
worker, Redis and the offline model through LiteLLM."""

import re

import pytest

from agents_app.models import Approval, PlanVersion, Run, StepResult
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def test_sign_in_start_edit_approve_and_watch_steps_stream(live_stack, page, alice):
    page.goto(live_stack + "/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "wrong")
    page.click("button.primary")
    assert page.locator("p.error").inner_text().startswith("Wrong username or password")
    page.fill("input[name=password]", PASSWORD)
    page.click("button.primary")
    page.wait_for_url(live_stack + "/")

    # A bad start shows its message in place and creates nothing.
    page.fill("textarea[name=task]", "   ")
    page.click("text=Start run")
    page.wait_for_selector("#start-form .error")
    assert not Run.objects.exists()

    page.fill("textarea[name=task]", "Collect the logs, then find the error, and finally "
                                     "write a report.")
    page.click("text=Start run")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    # The plan arrives live: the page was rendered before the planner finished.
    page.wait_for_selector("#plan-form", timeout=20_000)
    assert page.locator(".badge.offline").first.is_visible()
    steps = page.locator("#plan-steps textarea")
    assert [steps.nth(i).input_value() for i in range(steps.count())] == [
        "Collect the logs", "Find the error", "Write a report"]

    # Edit: reword, delete, add, move.
    steps.nth(0).fill("Collect the server logs")
    page.locator("#plan-steps li").nth(1).locator("[data-delete]").click()
    page.click("#add-step")
    page.locator("#plan-steps textarea").last.fill("Email the report")
    page.locator("#plan-steps li").last.locator("[data-move=up]").click()
    page.evaluate("window.__noReload = true")
    page.click("button[value=approve]")

    page.wait_for_selector("#steps-panel article.step", timeout=20_000)
    first_count = page.locator("#steps-panel article.step").count()
    page.wait_for_selector("#answer-panel .md", timeout=30_000)
    assert page.evaluate("window.__noReload") is True, "the page reloaded"
    assert first_count < 3, "steps should arrive one by one, not all at once"
    titles = page.locator("#steps-panel article.step h3").all_inner_texts()
    assert [re.sub(r".*— ", "", t) for t in titles] == [
        "Collect the server logs", "Email the report", "Write a report"]
    assert page.locator(".progress span").inner_text() == "3 of 3 steps"
    assert page.locator("#calls-panel tbody tr:not(.call-detail)").count() == 5
    assert page.locator("#run-header .badge.ok").inner_text() == "Completed"

    run = Run.objects.get()
    assert run.status == "completed"
    assert PlanVersion.objects.get(run=run, version=2).author == "alice"
    assert Approval.objects.get(run=run).edited is True
    assert StepResult.objects.filter(run=run).count() == 3

    # A reload shows the same timeline, with nothing duplicated.
    live_seqs = page.locator("#timeline li").evaluate_all("els => els.map(e => e.dataset.seq)")
    page.reload()
    assert page.locator("#timeline li").evaluate_all("els => els.map(e => e.dataset.seq)") == live_seqs
    assert live_seqs == [str(i) for i in range(1, len(live_seqs) + 1)]
    assert page.errors == []


def test_reject_with_feedback_shows_a_new_version_with_the_change(live_stack, page, alice):
    page.goto(live_stack + "/accounts/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("button.primary")
    page.fill("textarea[name=task]", "Write a short guide to brewing green tea")
    page.click("text=Start run")
    page.wait_for_selector("#plan-form", timeout=20_000)
    page.click("details.reject summary")
    page.fill("textarea[name=feedback]", "Add a step about water temperature")
    page.click("button[value=reject]")
    page.wait_for_function("() => document.querySelectorAll('#plan-panel .plan-diff .added').length > 0",
                           timeout=20_000)
    assert "v2" in page.locator("#plan-panel h2").inner_text()
    added = page.locator("#plan-panel .plan-diff .added").all_inner_texts()
    assert any("water temperature" in a for a in added)
    page.wait_for_selector("#plan-form")
    assert page.errors == []
