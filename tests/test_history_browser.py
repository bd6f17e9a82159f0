"""The history, a run's trace and the usage page as a person sees them in Chromium, at 1280 px
and on a phone (390 px): layout measured in the browser — the history table fits at 1280 px
without a horizontal page scroll and stacks on a phone, the waterfall's bars are as long as the
steps took, the charts are drawn (from our own static files, under the CSP) beside their
tables; and the filters, sorts and pager work by clicking."""

import datetime as dt
import re
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from agents_app.models import Event, ModelCall, Run
from tests.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

WIDE, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}
NO_PAGE_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
LONG_MODEL = "anthropic/claude-3-5-haiku-latest"


@pytest.fixture
def alice(browser_alice):
    return browser_alice


@pytest.fixture
def history(alice):
    """30 finished runs with long tasks and model names, a few failed, costs 0.001…0.030."""
    runs = []
    for i in range(30):
        run = Run.objects.create(
            owner=alice, pattern=["plan_execute", "debate", "react"][i % 3],
            task=f"Move the billing service from MySQL to PostgreSQL, step {i}, and write down "
                 "every risk a reviewer should know about before the migration starts" if i % 2
                 else f"Compare three vector databases for run {i}",
            status="failed" if i % 5 == 0 else "completed",
            models_used={"planner": LONG_MODEL, "executor": "gemini/gemini-2.0-flash",
                         "synthesizer": "gpt-4o-mini"},
            cost_usd=Decimal(i + 1) / 1000, prompt_tokens=1000 * i, completion_tokens=123_456)
        Run.objects.filter(pk=run.pk).update(finished_at=timezone.now())
        runs.append(run)
    return runs


def console_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return errors


def test_the_history_fits_at_1280_stacks_on_a_phone_and_filters_and_sorts_by_clicking(
        live_stack, page, history):
    errors = console_errors(page)
    page.set_viewport_size(WIDE)
    sign_in(page, live_stack)
    table = page.locator("#history table.runs")
    assert table.locator("tbody tr").count() == 25
    assert page.evaluate(NO_PAGE_SCROLL)
    # The table fits its card: no column runs past it, nothing to scroll sideways.
    fit = page.evaluate("""() => { const box = document.getElementById('history');
        const t = box.querySelector('table'); return [t.scrollWidth, box.clientWidth,
        t.getBoundingClientRect().right, box.getBoundingClientRect().right]; }""")
    assert fit[0] <= fit[1] and fit[2] <= fit[3] + 0.5, fit

    # Words, not one phrase: both words somewhere in the task, in any order.
    page.locator("input[name=q]").press_sequentially("postgresql mysql")  # as a person types
    page.wait_for_function("() => document.querySelectorAll('#history tbody tr').length === 15")
    assert all("MySQL" in t and "PostgreSQL" in t for t in
               page.locator("#history td.task").all_inner_texts())
    assert parse_qs(urlsplit(page.url).query)["q"] == ["postgresql mysql"]  # a link to keep
    page.fill("input[name=q]", "")
    page.press("input[name=q]", "Enter")
    page.wait_for_function("() => document.querySelectorAll('#history tbody tr').length === 25")

    # A status group, then the detailed status inside it.
    page.select_option("select[name=status]", "all_failed")
    page.wait_for_function("() => document.querySelectorAll('#history tbody tr').length === 6")
    assert set(page.locator("#history td[data-label=Status] .badge").all_inner_texts()) == {"Failed"}
    page.select_option("select[name=status]", "")
    page.wait_for_function("() => document.querySelectorAll('#history tbody tr').length === 25")

    # Sort by cost from the column header, then page on: the order carries over.
    page.click("#history th a.sort-link:text('Cost')")
    page.wait_for_url(re.compile(r".*sort=-cost.*"))
    first = page.locator("#history td[data-label=Cost]").all_inner_texts()
    assert first[:3] == ["$0.0300", "$0.0290", "$0.0280"]
    page.click("#history nav.pager a:text('Next')")
    page.wait_for_function("() => document.querySelectorAll('#history tbody tr').length === 5")
    assert page.locator("#history td[data-label=Cost]").all_inner_texts() == [
        "$0.0050", "$0.0040", "$0.0030", "$0.0020", "$0.0010"]

    # A bad value in the address: a message, the page still works.
    page.goto(live_stack + "/?sort=owner&from=2025-02-30")
    alert = page.locator("#history p.error[role=alert]").inner_text()
    assert "Sort" in alert and "From" in alert

    # On a phone: no sideways page scroll; each run is a card of labelled lines.
    page.set_viewport_size(PHONE)
    page.goto(live_stack + "/")
    assert page.evaluate(NO_PAGE_SCROLL)
    card = page.evaluate("""() => { const box = document.getElementById('history');
        const t = box.querySelector('table'); const td = t.querySelector('td.task');
        return {fits: t.scrollWidth <= box.clientWidth, display: getComputedStyle(td).display,
                label: getComputedStyle(td, '::before').content,
                header: t.querySelector('thead').getBoundingClientRect().height}; }""")
    assert card == {"fits": True, "display": "grid", "label": '"Task"', "header": 1}, card
    assert page.errors == [] and errors == []


T0 = timezone.now() - dt.timedelta(minutes=5)


@pytest.fixture
def timed_run(alice):
    """Planning 0–3 s with a 2 s call from 0.5 s, a wait 3–10 s, a step 10–12 s with a 1 s call."""
    def at(s):
        return T0 + dt.timedelta(seconds=s)

    run = Run.objects.create(owner=alice, pattern="plan_execute", task="Timed <b>run</b>",
                             status="completed", models_used={"planner": "gpt-4o"})
    Run.objects.filter(pk=run.pk).update(created_at=T0, finished_at=at(12))
    for seq, (kind, when, data) in enumerate([
            ("stage_started", 0, {"stage": "plan:1"}), ("gate_opened", 3, {"gate": "plan_approval"}),
            ("stage_started", 10, {"stage": "step:1:0"}), ("run_finished", 12, {})], 1):
        e = Event.objects.create(run=run, seq=seq, kind=kind, message=kind, data=data)
        Event.objects.filter(pk=e.pk).update(created_at=at(when))
    Run.objects.filter(pk=run.pk).update(last_event_seq=4)
    for stage, role, end, ms in (("plan:1", "planner", 2.5, 2000), ("step:1:0", "executor", 11, 1000)):
        c = ModelCall.objects.create(run=run, stage=stage, key=role, role=role, model="gpt-4o",
                                     latency_ms=ms, prompt_tokens=100, cost_usd=Decimal("0.002"))
        ModelCall.objects.filter(pk=c.pk).update(created_at=at(end))
    return run


BARS = """() => [...document.querySelectorAll('tr.wf-row')].map(r => {
    const track = r.querySelector('svg.wf-track').getBoundingClientRect();
    const bar = r.querySelector('rect.wf-bar').getBoundingClientRect();
    return {kind: r.dataset.kind, start: +r.dataset.start, seconds: +r.dataset.seconds,
            x: bar.left - track.left, width: bar.width, track: track.width}; })"""


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1280px", "390px"])
def test_the_waterfalls_bars_are_as_long_as_the_steps_took(live_stack, page, timed_run, viewport):
    errors = console_errors(page)
    page.set_viewport_size(viewport)
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/runs/{timed_run.pk}/")
    page.click("#run-header a.trace-link")
    page.wait_for_url(re.compile(rf".*/runs/{timed_run.pk}/trace/$"))
    bars = page.evaluate(BARS)
    assert [b["kind"] for b in bars] == ["run", "stage", "call", "wait", "stage", "call"]
    track = bars[0]["track"]
    assert track > 150 and all(abs(b["track"] - track) < 1 for b in bars)  # one scale
    for b in bars:  # each bar starts and lasts in proportion to the 12 s run
        assert b["x"] == pytest.approx(b["start"] / 12 * track, abs=1.5), b
        assert b["width"] == pytest.approx(b["seconds"] / 12 * track, abs=1.5), b
    assert bars[3]["width"] == pytest.approx(7 * bars[5]["width"], rel=0.05)  # 7 s vs 1 s
    assert page.evaluate(NO_PAGE_SCROLL)
    assert page.errors == [] and errors == []


def test_the_usage_charts_are_drawn_beside_their_tables_at_1280_and_on_a_phone(live_stack, page,
                                                                               history):
    errors = console_errors(page)
    ModelCall.objects.bulk_create([
        ModelCall(run=r, stage="s", key="k", role="planner", model=LONG_MODEL if i % 2 else "gpt-4o",
                  prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens,
                  cost_usd=r.cost_usd) for i, r in enumerate(history)])
    for viewport in (WIDE, PHONE):
        page.set_viewport_size(viewport)
        if viewport is WIDE:
            sign_in(page, live_stack)
            page.click("text=Cost and usage over time")
        else:
            page.reload()
        page.wait_for_function("() => document.querySelectorAll('canvas[data-drawn=true]').length === 4")
        drawn = page.evaluate("""() => [...document.querySelectorAll('canvas[data-chart]')].map(c => {
            const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let ink = 0; for (let i = 3; i < data.length; i += 4) if (data[i]) ink++;
            const box = c.closest('.card').getBoundingClientRect(); const r = c.getBoundingClientRect();
            return {chart: c.dataset.chart, ink: ink, height: r.height,
                    inside: r.left >= box.left - 0.5 && r.right <= box.right + 0.5}; })""")
        assert len(drawn) == 4 and all(d["ink"] > 500 and d["height"] > 100 and d["inside"]
                                       for d in drawn), drawn
        assert page.locator("#table-by-model tbody tr").count() == 2
        assert page.locator("#table-by-pattern tbody tr").count() == 3
        assert page.evaluate(NO_PAGE_SCROLL), viewport
    assert page.locator("a:text('Download as CSV')").count() == 3
    assert page.errors == [] and errors == []


def test_a_long_runs_timeline_loads_its_earlier_events_by_clicking(live_stack, page, alice):
    """Issue 37: a run with 250 events shows its newest 100; "Show earlier events" puts the 100
    before them above, in order, then the first 50, and the button goes; no console error."""
    errors = console_errors(page)
    run = Run.objects.create(owner=alice, pattern="plan_execute", task="A long run",
                             status="completed", last_event_seq=250,
                             finished_at=timezone.now())
    Event.objects.bulk_create([Event(run=run, seq=k, kind="note", message=f"event {k}")
                               for k in range(1, 251)])
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/runs/{run.pk}/")
    seqs = "() => [...document.querySelectorAll('#timeline li[data-seq]')].map(e => +e.dataset.seq)"
    assert page.evaluate(seqs) == list(range(151, 251))
    page.click("#timeline .ev-earlier a")
    page.wait_for_function("() => document.querySelectorAll('#timeline li[data-seq]').length == 200")
    assert page.evaluate(seqs) == list(range(51, 251))
    page.click("#timeline .ev-earlier a")
    page.wait_for_function("() => document.querySelectorAll('#timeline li[data-seq]').length == 250")
    assert page.evaluate(seqs) == list(range(1, 251))
    assert page.locator("#timeline .ev-earlier").count() == 0
    assert page.url.endswith(f"/runs/{run.pk}/")  # the page stayed where it was
    assert not errors, errors
