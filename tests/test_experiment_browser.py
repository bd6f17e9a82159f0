"""An experiment in Chromium, offline (issue 34): a person uploads a dataset, previews and
launches a grid of two patterns × two model assignments × two repetitions, watches it
progress on its page while the Celery worker runs it, then reads the table with intervals and
the charts, and downloads the exports — at 1280 px and on a 390 px phone. Everything real:
Daphne, the Celery worker, Redis and the offline model through LiteLLM (0.4 s a call)."""

from __future__ import annotations

import json
import re

import pytest

from agents_app.models import Experiment
from tests.conftest import sign_in
from tests.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

TASKS = ["Name the capital of France.", "List two prime numbers.", "Say hello."]


def test_upload_launch_watch_and_read_an_experiment(live_stack, page, browser_alice, tmp_path):
    data = tmp_path / "tasks.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"t{i}", "task": t, "reference": t})
                              for i, t in enumerate(TASKS)) + "\n")
    sign_in(page, live_stack)
    page.click("nav >> text=Experiments")
    page.click("text=Upload a dataset")
    page.fill("input[name=name]", "Three small tasks")
    page.set_input_files("input[name=file]", str(data))
    page.click("#dataset-new button.primary")
    page.wait_for_url(re.compile(r".*/datasets/\d+/$"))
    assert page.locator("#dataset-items tbody tr").count() == 3
    page.click("text=Start an experiment on it")

    page.fill("input[name=name]", "First grid")
    for pattern in ("plan_execute", "reflective"):
        page.check(f"input[name=patterns][value={pattern}]")
    page.fill("textarea[name=assignments]",
              "*=offline/default\nbrief: *=offline/default, executor=offline/brief")
    page.fill("input[name=repetitions]", "2")
    page.fill("textarea[name=evaluators]", '[{"kind": "regex", "pattern": "\\\\w+"}]')
    page.check("input[name=gate_plan_approval][value=approve]")
    page.fill("input[name=concurrency]", "8")
    page.click("button[value=preview]")
    preview = page.locator("#experiment-preview").inner_text()
    assert "4 cells × 3 tasks × 2 repetitions = 24 runs." in preview
    assert Experiment.objects.count() == 0
    page.click("button[value=launch]")
    page.wait_for_url(re.compile(r".*/experiments/\d+/$"))
    experiment = Experiment.objects.get()

    # It follows the runs: the count of ended runs goes up without a reload.
    page.evaluate("window.__noReload = true")
    page.wait_for_function("() => Number(document.querySelector('#experiment-progress')"
                           ".dataset.ended) > 0", timeout=60_000)
    wait_until(lambda: Experiment.objects.get(pk=experiment.pk).status == "completed",
               timeout=240, what="the experiment to complete")
    page.wait_for_selector("#experiment-finished", state="attached", timeout=10_000)
    assert page.evaluate("window.__noReload") is True, "the page reloaded"
    status = page.locator("#experiment-progress .status-line").inner_text()
    assert "Completed" in status and "24 of 24 runs ended" in status
    rows = page.locator("#cell-table tbody tr")
    assert rows.count() == 4
    first = rows.first.inner_text()
    assert "6 / 6" in first and "±" in first and "[" in first
    # The charts load as images (matplotlib's SVG), each with its numbers also in a table.
    for chart in ("#chart-cost-score", "#chart-heatmap", "#chart-latency"):
        img = page.locator(chart)
        img.scroll_into_view_if_needed()
        page.wait_for_function(f"() => document.querySelector('{chart}').complete && "
                               f"document.querySelector('{chart}').naturalWidth > 0",
                               timeout=20_000)
    assert page.locator("#task-table tbody tr").count() == 3
    with page.expect_download() as download:
        page.click("text=CSV (one row per run)")
    assert download.value.suggested_filename == f"experiment-{experiment.pk}.csv"
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    import os
    if os.environ.get("QUORUM_SCREENSHOTS"):
        page.screenshot(path=os.environ["QUORUM_SCREENSHOTS"] + "/experiment-390.png",
                        full_page=True)
        page.set_viewport_size({"width": 1280, "height": 900})
        page.screenshot(path=os.environ["QUORUM_SCREENSHOTS"] + "/experiment-1280.png",
                        full_page=True)
    assert page.errors == []
