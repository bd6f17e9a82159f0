"""The run gates in Chromium, everything real (Daphne, the Celery worker, Redis, the offline
model through LiteLLM): deleting every step of the plan and pressing Approve is refused on the
page and runs nothing; an edited plan, approved, is the plan carried out. After each decision
the focus is in the region that changed and the status region is a live region. The
ask-a-person gate is answered on the page and the answer reaches the final answer."""

import re
import time

import pytest

from agents_app.models import Approval, Run, StepResult
from tests.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def focus_inside(page, selector: str) -> bool:
    return page.evaluate("s => { const r = document.querySelector(s); "
                         "return !!r && r.contains(document.activeElement) && "
                         "document.activeElement !== document.body; }", selector)


def live_region(page) -> dict:
    return page.evaluate("() => { const r = document.getElementById('gate-status'); "
                         "return {live: r.getAttribute('aria-live'), role: r.getAttribute('role'),"
                         " text: r.innerText.trim()}; }")


def answer_after_live_update(page, path: str) -> None:
    """Hold the answer to the gate's form until the decision's own live update has reached
    the page (it replaces the gate's panel), the order a busy server often gives."""
    def late(route):
        response = route.fetch()
        time.sleep(2)
        route.fulfill(response=response)

    page.route(re.compile(rf".*/runs/\d+/{path}/$"), late)


def start(page, base: str, pattern: str, task: str) -> None:
    sign_in(page, base)
    page.select_option("select[name=pattern]", pattern)
    page.fill("textarea[name=task]", task)
    page.click("#start-form button.primary")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))


def wait_completed(page) -> None:
    page.wait_for_function("() => document.querySelector('#run-header').innerText"
                           ".includes('Completed')", timeout=30_000)


def test_empty_plan_is_refused_and_the_edited_plan_is_the_one_carried_out(live_stack, page,
                                                                          alice):
    start(page, live_stack, "plan_execute", "Collect logs, then find the error.")
    page.wait_for_selector("#plan-steps textarea", timeout=30_000)
    run = Run.objects.get()
    original = run.state["plan"]["steps"]
    assert len(original) >= 2

    # Delete every step, then approve: refused, said on the page, the reject form offered.
    while page.locator("#plan-steps [data-delete]").count():
        page.locator("#plan-steps [data-delete]").first.click()
    assert page.locator("#plan-steps textarea").count() == 0
    page.click("#plan-form button[value=approve]")
    error = page.locator("#plan-panel p.error")
    error.wait_for(timeout=10_000)
    assert "The plan has no steps left to carry out" in error.inner_text()
    assert error.is_visible() and error.get_attribute("role") == "alert"
    assert page.locator("#plan-panel details.reject").get_attribute("open") is not None
    assert focus_inside(page, "#plan-panel")
    assert page.evaluate("document.activeElement.classList.contains('error')")
    time.sleep(1.5)  # the worker would have started a step by now, had anything been approved
    run.refresh_from_db()
    assert run.status == "awaiting_plan_approval"
    assert not Approval.objects.exists() and not StepResult.objects.exists()

    # The page as it was: edit the first step, approve.
    page.reload()
    page.wait_for_selector("#plan-steps textarea")
    first = page.locator("#plan-steps textarea").first
    first.fill("Read the last hundred lines of the log")
    edited = page.eval_on_selector_all("#plan-steps textarea", "els => els.map(e => e.value)")
    assert edited[0] == "Read the last hundred lines of the log" and edited[1:] == original[1:]
    answer_after_live_update(page, "plan")
    page.click("#plan-form button[value=approve]")
    page.wait_for_function("() => document.getElementById('gate-status').innerText"
                           ".includes('alice edited and approved plan v2')", timeout=10_000)
    page.wait_for_function("() => document.getElementById('gate-status')"
                           ".contains(document.activeElement)", timeout=10_000)
    region = live_region(page)
    assert region["live"] == "polite" and region["role"] == "status"
    assert focus_inside(page, "#gate-status")

    wait_completed(page)
    # Live updates replaced the panels; the focus stayed on the status.
    assert focus_inside(page, "#gate-status")
    shown = page.eval_on_selector_all("#plan-panel ol.plan-steps li",
                                      "els => els.map(e => e.innerText.trim())")
    assert shown == edited
    carried_out = [s.description for s in StepResult.objects.filter(run=run).order_by("index")]
    assert carried_out == edited
    titles = page.locator("#steps-panel article.step h3").all_inner_texts()
    assert len(titles) == len(edited)
    assert all(title.endswith(step) for title, step in zip(titles, edited, strict=True))
    assert page.errors == []


def test_a_plan_form_past_the_field_limit_is_said_beside_the_form_and_saves_nothing(
        live_stack, page, alice):
    """QA 2026-11-26: 5,000 fields gave Django's TooManyFieldsSent page, swapped into the
    panel with DEBUG on. Now a 413 the page says beside the form; the panel is kept."""
    start(page, live_stack, "plan_execute", "Collect logs, then find the error.")
    page.wait_for_selector("#plan-steps textarea", timeout=30_000)
    page.evaluate("""() => { const f = document.getElementById('plan-form');
        for (let i = 0; i < 1200; i++) { const s = document.createElement('input');
          s.type = 'hidden'; s.name = 'steps'; s.value = 'step ' + i; f.appendChild(s); } }""")
    page.click("#plan-form button[value=approve]")
    alert = page.locator("#plan-panel p.request-error")
    alert.wait_for(timeout=10_000)
    assert "more than 1,000 fields" in alert.inner_text() and "nothing was saved" in \
        alert.inner_text()
    assert alert.is_visible() and alert.get_attribute("role") == "alert"
    assert page.locator("#plan-steps textarea").count() >= 2  # the panel is still there
    time.sleep(1.5)
    run = Run.objects.get()
    assert run.status == "awaiting_plan_approval"
    assert not Approval.objects.exists() and not StepResult.objects.exists()
    assert page.errors == []


def test_ask_a_person_is_answered_on_the_page(live_stack, page, alice):
    start(page, live_stack, "react", "What time is it where I am?")
    page.wait_for_selector("text=The agent asks you", timeout=30_000)
    assert "Which time zone are you in" in page.locator("#items-panel blockquote").inner_text()
    page.fill("#items-panel textarea[name=feedback]", "Europe/Paris")
    answer_after_live_update(page, "tool")
    page.click("#items-panel button.primary")
    page.wait_for_function("() => document.getElementById('gate-status').innerText"
                           ".includes('alice answered the agent')", timeout=10_000)
    # The live update says it first; the answer, 2 s later, puts the focus on it.
    page.wait_for_function("() => document.getElementById('gate-status')"
                           ".contains(document.activeElement)", timeout=10_000)
    assert live_region(page)["live"] == "polite"
    wait_completed(page)
    answer = page.locator("#answer-panel").inner_text()
    assert "You told me: Europe/Paris" in answer and "(Europe/Paris," in answer
    assert "answered by alice" in page.locator("#items-panel").inner_text()
    assert page.errors == []
