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
    assert "3 cells × 3 tasks × 2 repetitions = 18 runs." in preview
    assert "Left out as the same as another cell: Reflective (actor and critic) · brief" \
        in preview
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
    assert "Completed" in status and "18 of 18 runs ended" in status
    rows = page.locator("#cell-table tbody tr")
    assert rows.count() == 3
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
    assert page.locator("#task-table tbody td", has_text="✓").count() == 9  # 3 tasks × 3 cells
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


def test_the_calibration_page_fits_at_1280_and_on_a_phone(live_stack, page, browser_alice,
                                                          tmp_path):
    """Its scorecard and case tables scroll in their own boxes; the page never runs wider
    than the window (found by hand: 1,632 px at both widths)."""
    import shutil
    from io import StringIO

    from django.core.management import call_command

    from reviews_app.calibration import cases

    folder = tmp_path / "few"
    folder.mkdir()
    for name in ("py-invoice-totals", "py-clean-slugify", "mixed-worker-manifest"):
        for ext in (".json", ".diff"):
            shutil.copy(cases.STARTER / f"{name}{ext}", folder / f"{name}{ext}")
    call_command("calibrate", "--user", "alice", "--set", str(folder), stdout=StringIO(),
                 stderr=StringIO())
    sign_in(page, live_stack)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_stack}/reviews/calibration/")
        page.wait_for_selector("#scorecard table")
        wide = page.evaluate("""() => [...document.querySelectorAll('body *')].filter(
            e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 5).map(
            e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))""")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), \
            (width, wide)
    assert page.errors == []
