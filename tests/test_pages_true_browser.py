"""Issue 32 in Chromium, at 1280 px and on a phone (390 px): pages that stay true and a start
form that says what each pattern is for. Everything real (Daphne, the Celery worker, Redis,
the offline model at 0.4 s a call); the layout is measured (boxes, computed styles, counts).

- The status line follows the run (a rejection's "writing a new version" gives way to the new
  plan waiting, an approval's "carrying out" to the run completed), keeps the focus a
  decision gave it, and the timeline keeps its newest event in sight.
- "Reject with feedback" stays open beside its error.
- A second tab with an unsent edit stops offering the decision once it was made elsewhere and
  gives the edit back; a tab without live updates is refused naming who decided, its edit
  given back too, never applied.
- Step boxes grow with their text; merge-method radio buttons sit beside their labels.
- The start form shows the chosen pattern's purpose and only its options; a three-voter run
  names three voters; a missing page is the app's own 404 under DEBUG."""

import re

import pytest

from agents_app.models import Approval, Run
from agents_app.patterns import PATTERNS, task_patterns
from tests.conftest import sign_in
from tests.test_change_browser import make_repo, start_to_merge_gate

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 390)
TIME = r"\d\d:\d\d:\d\d"


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def start(page, base: str, pattern: str, task: str) -> None:
    page.goto(base + "/")
    page.select_option("select[name=pattern]", pattern)
    page.fill("textarea[name=task]", task)
    page.click("#start-form button.primary")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))


def line(page) -> str:
    return " ".join(page.inner_text("#gate-status").split())


def wait_line(page, text: str) -> None:
    page.wait_for_function("t => document.getElementById('gate-status').innerText.includes(t)",
                           arg=text, timeout=20_000)


def focus_in(page, selector: str) -> bool:
    return page.evaluate("s => { const r = document.querySelector(s); return !!r && "
                         "r.contains(document.activeElement); }", selector)


def box(page, selector: str) -> dict:
    return page.eval_on_selector(selector, "e => { const r = e.getBoundingClientRect(); return "
                                 "{x: r.x, y: r.y, w: r.width, h: r.height, right: r.right, "
                                 "bottom: r.bottom}; }")


def test_the_status_line_follows_the_run_and_the_timeline_its_newest_event(
        live_stack, page, alice):
    page.set_viewport_size({"width": 1280, "height": 560})  # the timeline overflows its card
    sign_in(page, live_stack)
    start(page, live_stack, "plan_execute", "Collect logs, then find the error.")
    page.wait_for_selector("#plan-steps textarea", timeout=30_000)
    assert line(page) == ""  # nobody has decided anything yet

    # Rejecting without feedback: the error, and the box that takes the feedback, open.
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 560})
        if not page.evaluate("document.querySelector('#plan-panel details.reject').open"):
            page.click("#plan-panel details.reject summary")
        page.fill("#plan-panel textarea[name=feedback]", "")
        page.click("#plan-form button[value=reject]")
        page.wait_for_selector("#plan-panel p.error", timeout=10_000)
        assert "Say what is wrong with the plan" in page.inner_text("#plan-panel p.error")
        assert page.evaluate("document.querySelector('#plan-panel details.reject').open")
        feedback = box(page, "#plan-panel textarea[name=feedback]")
        assert feedback["h"] > 30 and feedback["w"] > 150, feedback
        assert page.locator("#plan-panel textarea[name=feedback]").is_visible()
        page.reload()
        page.wait_for_selector("#plan-steps textarea")
    assert not Approval.objects.exists()

    # A rejection: the line says the planner is at work, then that the new plan waits.
    page.set_viewport_size({"width": 1280, "height": 560})
    page.click("#plan-panel details.reject summary")
    page.fill("#plan-panel textarea[name=feedback]", "Add a step that checks the disk.")
    page.click("#plan-form button[value=reject]")
    wait_line(page, "Waiting for you: approve, edit or reject the plan.")
    said = line(page)
    assert re.fullmatch(rf"At {TIME}, alice rejected plan v1: Add a step that checks the disk\. "
                        r"Waiting for you: approve, edit or reject the plan\.", said), said
    assert "writing a new version" not in said
    assert focus_in(page, "#gate-status")  # the decision's focus stayed on the line
    assert page.get_attribute("#gate-status", "aria-live") == "polite"
    page.wait_for_function("() => document.querySelector('#plan-panel h2').innerText"
                           ".includes('v2')", timeout=10_000)

    # An approval: carried out, then completed; the line never says "carrying out" after.
    page.click("#plan-form button[value=approve]")
    page.wait_for_function("() => document.querySelector('#run-header').innerText"
                           ".includes('Completed')", timeout=30_000)
    wait_line(page, "The run completed; its answer is below.")
    said = line(page)
    assert re.fullmatch(rf"At {TIME}, alice approved plan v2\. The run completed; its answer is "
                        r"below\.", said), said
    assert focus_in(page, "#gate-status")
    focused = " ".join(page.evaluate("document.activeElement.innerText").split())
    assert focused == said  # what a screen reader on the focused line hears is the truth

    # The timeline keeps its newest event in sight, at both widths.
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 560})
        page.wait_for_timeout(300)
        page.evaluate("document.getElementById('timeline').scrollTop = 0")
        page.reload()
        page.wait_for_selector("#timeline li")
        tl = page.eval_on_selector("#timeline", "t => ({top: t.scrollTop, height: "
                                   "t.scrollHeight, shown: t.clientHeight})")
        assert tl["height"] > tl["shown"] + 50, tl  # it does overflow its card
        assert tl["top"] + tl["shown"] >= tl["height"] - 2, tl
        last, lst = box(page, "#timeline li:last-child"), box(page, "#timeline")
        assert last["bottom"] <= lst["bottom"] + 1 and last["y"] >= lst["y"], (last, lst)
        assert "Run completed" in page.inner_text("#timeline li:last-child")
    assert page.errors == []


def test_the_timeline_follows_events_as_they_arrive(live_stack, page, alice):
    page.set_viewport_size({"width": 390, "height": 600})
    sign_in(page, live_stack)
    page.select_option("select[name=pattern]", "plan_execute")
    page.check("input[name=auto_approve]")
    page.fill("textarea[name=task]", "Collect the logs, then find the error, then fix it, then "
                                     "test the fix, then write a report.")
    page.click("#start-form button.primary")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.wait_for_function("() => { const t = document.getElementById('timeline'); return "
                           "t.scrollHeight > t.clientHeight + 50; }", timeout=30_000)
    page.wait_for_function("() => document.querySelector('#run-header').innerText"
                           ".includes('Completed')", timeout=30_000)
    page.wait_for_timeout(500)
    tl = page.eval_on_selector("#timeline", "t => ({top: t.scrollTop, height: t.scrollHeight, "
                               "shown: t.clientHeight})")
    assert tl["top"] + tl["shown"] >= tl["height"] - 2, tl
    assert "Run completed" in page.inner_text("#timeline li:last-child")
    assert page.errors == []


def test_a_tab_the_run_moved_on_from_gives_its_edit_back(live_stack, page, alice):
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, live_stack)
    start(page, live_stack, "plan_execute", "Collect logs, then find the error.")
    page.wait_for_selector("#plan-steps textarea", timeout=30_000)
    url = page.url
    errors: list[str] = []
    # Other tabs of the same person: the same session (the fixture's page has a browser
    # context of its own, which takes no second page).
    tabs = page.context.browser.new_context()
    tabs.add_cookies(page.context.cookies())
    live_tab = tabs.new_page()
    live_tab.set_viewport_size({"width": 390, "height": 800})
    deaf_tab = tabs.new_page()  # its live channel never reaches the server
    for tab in (live_tab, deaf_tab):
        tab.on("pageerror", lambda e: errors.append(str(e)))
    deaf_tab.route_web_socket(re.compile(r".*/ws/runs/\d+/$"), lambda ws: None)
    for tab in (live_tab, deaf_tab):
        tab.goto(url)
        tab.wait_for_selector("#plan-steps textarea")
        tab.locator("#plan-steps textarea").first.fill("Read the <b>last</b> lines of the log")
    assert live_tab.locator("#plan-form button[value=approve]").count() == 1

    page.click("#plan-form button[value=approve]")  # decided in the first tab

    # The live tab stops offering the decision and gives the edit back, saying who decided.
    live_tab.wait_for_function("() => !document.querySelector('#plan-form')", timeout=10_000)
    assert live_tab.locator("button[value=approve]").count() == 0
    kept = live_tab.locator("#unsent textarea")
    assert kept.count() == 1
    assert kept.input_value() == "1. Read the <b>last</b> lines of the log\n2. Find the error"
    assert kept.get_attribute("readonly") is not None
    said = " ".join(live_tab.inner_text("#unsent").split())
    assert re.search(rf"The run moved on while you were typing\. At {TIME}, alice approved plan "
                     r"v1\. None of this was sent or applied", said), said
    assert re.search(rf"At {TIME}, alice approved plan v1\.", line(live_tab))
    assert focus_in(live_tab, "#unsent")
    # It fits the phone's width.
    assert box(live_tab, "#unsent textarea")["right"] <= 390
    live_tab.click("#unsent [data-dismiss-unsent]")
    assert live_tab.locator("#unsent *").count() == 0

    # The tab without live updates still offers it; sending is refused, naming who decided,
    # and the edit comes back, never applied.
    deaf_tab.click("#plan-form button[value=approve]")
    error = deaf_tab.locator("#plan-panel p.error")
    error.wait_for(timeout=10_000)
    assert re.search(rf"no longer waiting for that decision.*At {TIME}, alice approved plan "
                     r"v1\.", error.inner_text()), error.inner_text()
    assert deaf_tab.locator("#unsent textarea").input_value().startswith(
        "1. Read the <b>last</b> lines of the log\n")
    assert deaf_tab.locator("#plan-form").count() == 0
    run = Run.objects.get()
    assert list(Approval.objects.values_list("edited", flat=True)) == [False]
    assert run.plan_versions.count() == 1
    assert page.errors == [] and errors == []


def test_step_boxes_grow_with_their_text(live_stack, page, alice):
    sign_in(page, live_stack)
    start(page, live_stack, "plan_execute",
          "Collect the logs of every service that ran during last night's outage together with "
          "their timestamps, host names, the versions deployed at the time, the configuration "
          "each one read at start-up and the alerts it raised, from the first warning to the "
          "last restart of the database cluster, then find the error.")
    page.wait_for_selector("#plan-steps textarea", timeout=30_000)
    typed = "Read the last hundred lines of every log file under /var/log, " * 8
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(200)
        sizes = page.eval_on_selector_all(
            "#plan-steps textarea", "els => els.map(t => ({h: t.getBoundingClientRect().height,"
            " scroll: t.scrollHeight, client: t.clientHeight, len: t.value.length}))")
        long_step, short_step = sizes[0], sizes[-1]
        assert long_step["len"] > 250 and short_step["len"] < 40, sizes
        for s in sizes:  # every step shows all its text: no scroll bar inside the box
            assert s["scroll"] <= s["client"] + 1, sizes
        assert long_step["h"] > short_step["h"] * 1.4, sizes
        first = page.locator("#plan-steps textarea").first
        first.fill(typed)
        grown = page.eval_on_selector("#plan-steps textarea", "t => ({h: t.getBoundingClientRect()"
                                      ".height, scroll: t.scrollHeight, client: t.clientHeight})")
        assert grown["scroll"] <= grown["client"] + 1 and grown["h"] > long_step["h"], grown
        # The move and delete buttons stay inside the card, beside or under the step.
        card = box(page, "#plan-panel")
        for tools in page.eval_on_selector_all(
                "#plan-steps .step-tools", "els => els.map(e => e.getBoundingClientRect().right)"):
            assert tools <= card["right"], (tools, card)
        page.reload()
        page.wait_for_selector("#plan-steps textarea")
    assert page.errors == []


def test_merge_method_radios_sit_beside_their_labels(live_stack, page, alice,
                                                       stack_repo_root):
    start_to_merge_gate(page, live_stack, make_repo(stack_repo_root / "proj"))
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(200)
        labels = page.eval_on_selector_all("fieldset.merge-mode label", """els => els.map(l => {
            const radio = l.querySelector('input[type=radio]');
            const r = radio.getBoundingClientRect(), lr = l.getBoundingClientRect();
            const text = document.createRange();
            text.setStartAfter(radio); text.setEndAfter(l.lastChild);
            const first = text.getClientRects()[0];
            return {radio: {x: r.x, y: r.y, w: r.width, h: r.height}, label: {x: lr.x, w: lr.width},
                    text: {x: first.x, y: first.y, h: first.height},
                    width: getComputedStyle(radio).width}; })""")
        assert len(labels) == 2
        for m in labels:
            radio, text = m["radio"], m["text"]
            assert radio["w"] < 30, m  # a radio's own size, not the label's width
            assert radio["x"] + radio["w"] <= text["x"] + 1, m  # on the left of its words
            centre = radio["y"] + radio["h"] / 2
            assert text["y"] <= centre <= text["y"] + text["h"], m  # on their first line
    assert page.errors == []


def test_the_start_form_shows_the_chosen_patterns_purpose_and_only_its_options(
        live_stack, page, alice):
    sign_in(page, live_stack)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        form = box(page, "#start-form")
        for pattern in task_patterns():
            page.select_option("select[name=pattern]", pattern.name)
            shown = page.locator("#start-form p.purpose:visible")
            assert shown.count() == 1, pattern.name
            assert shown.inner_text() == pattern.purpose
            assert shown.get_attribute("id") == \
                page.get_attribute("select[name=pattern]", "aria-describedby")
            purpose = box(page, f"#purpose-{pattern.name}")
            assert form["x"] <= purpose["x"] and purpose["right"] <= form["right"], pattern.name
        page.select_option("select[name=pattern]", "rewoo")
        tools = page.locator("fieldset.tool-choice label:visible")
        names = [t.strip() for t in tools.all_inner_texts()]
        assert "ask person" not in names and "calculator" in names
        assert page.locator("input[name=tools][value=ask_person]").is_disabled()
        page.select_option("select[name=pattern]", "react")
        assert page.locator("input[name=tools][value=ask_person]").is_visible()

    # A three-voter run names three voters (and its aggregator) in its header.
    page.set_viewport_size({"width": 1280, "height": 900})
    start(page, live_stack, "vote", "Which sorting algorithm suits nearly sorted data?")
    page.wait_for_selector("#run-header dd.models span")
    roles = [s.split(":")[0] for s in page.locator("#run-header dd.models span").all_inner_texts()]
    assert roles == ["voter_1", "voter_2", "voter_3", "aggregator"]
    assert len(PATTERNS["vote"].roles) == 8

    # The shared stack runs with DEBUG=true, as make dev does: a missing page is the app's.
    response = page.goto(live_stack + "/no/such/page/")
    assert response.status == 404
    assert page.inner_text("#not-found h1") == "There is no page here"
    assert "URLconf" not in page.content() and page.locator("nav").count() >= 1
    assert page.errors == []
