"""The inbox in Chromium (issue 35's first part): a plan gate opened by the worker appears in
an open inbox without a reload, the navigation counts it, and it leaves when decided
elsewhere — at 1280 px and on a 390 px phone."""

from __future__ import annotations

import time

import pytest

from agents_app import engine
from agents_app.models import Run
from agents_app.patterns.base import Decision
from tests.conftest import OFFLINE, sign_in
from tests.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 390])
def test_a_gate_appears_live_and_leaves_when_decided(live_stack, page, browser_alice, width):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/inbox/")
    page.wait_for_selector("#inbox-empty")
    page.evaluate("window.__noReload = true")
    run = engine.create_run(browser_alice, "plan_execute",
                            "Collect the logs, then find the error.", options={},
                            models=OFFLINE)  # the worker runs it to its plan gate
    wait_until(lambda: Run.objects.get(pk=run.pk).status == "awaiting_plan_approval",
               timeout=30, what="the plan gate")
    opened = time.monotonic()
    card = page.locator(f"#gate-{run.pk}")
    card.wait_for(timeout=10_000)
    seen = time.monotonic() - opened
    assert seen < 5, f"the card took {seen:.1f} s"
    assert "Awaiting plan approval" in card.inner_text() and "Plan v1" in card.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.reload()
    assert page.locator("#nav-inbox .badge.count").inner_text() == "1"
    page.evaluate("window.__noReload = true")
    run.refresh_from_db()
    engine.decide(run, browser_alice, run.stage_seq, Decision(action="approve",
                                                              author="alice"))
    page.wait_for_selector("#inbox-empty", timeout=10_000)
    assert page.evaluate("window.__noReload") is True
    card.wait_for(state="detached", timeout=1000)
    assert page.locator("#inbox a.button", has_text="Decide").count() == 0
    assert page.errors == []


def test_a_tick_survives_the_lists_refresh_and_a_batch_approves_each(live_stack, page,
                                                                    browser_alice):
    runs = [engine.run_inline(engine.create_run(
        browser_alice, "plan_execute", f"Collect the logs of host {i}, then find the error.",
        options={}, models=OFFLINE, enqueue=False).pk) for i in range(2)]
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/inbox/")
    for run in runs:
        page.check(f"#pick-{run.pk}-{run.stage_seq}")
    page.wait_for_timeout(4500)  # two refreshes of the list
    assert all(page.is_checked(f"#pick-{r.pk}-{r.stage_seq}") for r in runs)
    page.click("#batch-form button[value=approve]")
    outcomes = page.locator("#batch-outcomes").inner_text()
    for run in runs:
        assert f"Run {run.pk}: approved." in outcomes
        wait_until(lambda r=run: Run.objects.get(pk=r.pk).status != "awaiting_plan_approval",
                   timeout=10, what="the decision")
    assert page.errors == []
