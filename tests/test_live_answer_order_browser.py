"""A live update and the answer to a form, arriving in the order a busy server gives them, in
Chromium. The page is the real review page from Daphne; its WebSocket is played by the test
(Playwright's ``route_web_socket``), which sends what the consumer would send
(``agents_app.live.render_live``, read from the database at that moment), and the answer to
the form is held until the live update has been handled. Everything else is real: Daphne,
the Celery worker that brought the review to its gate, the offline model.

The rules under test (static/quorum/app.js): a live update for a panel whose form is being
sent is kept, and applied after the answer when it is newer than the answer; the decision's
own update is not applied over the answer; a panel is never replaced by an older render of
itself."""

import re

import pytest

from agents_app.live import panels_for, render_live
from agents_app.models import Event, Run
from reviews_app.triage import service as triage
from tests.conftest import sign_in
from tests.review_corpus import review_at_triage

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]


@pytest.fixture
def alice(browser_alice):
    return browser_alice


class PlayedSocket:
    """The page's live channel, played by the test: it records the page's hello and sends
    what the consumer would send."""

    def __init__(self, page):
        self.route = None
        self.hellos: list[str] = []
        page.route_web_socket(re.compile(r".*/ws/runs/\d+/$"), self._connect)

    def _connect(self, ws) -> None:
        self.route = ws
        ws.on_message(lambda message: self.hellos.append(str(message)))

    def send_events(self, run: Run, after: int) -> int:
        """Send the consumer's message for the run's events after ``after``; the newest."""
        run = Run.objects.get(pk=run.pk)
        events = list(Event.objects.filter(run=run, seq__gt=after, seq__lte=run.last_event_seq)
                      .order_by("seq"))
        assert events, "nothing to send"
        assert self.route is not None, "the page has not connected"
        self.route.send(render_live(run, events, panels_for(run, {e.kind for e in events})))
        return events[-1].seq


class HeldAnswers:
    """Answers to the page's posts to ``pattern``, held until the test lets them through."""

    def __init__(self, page, pattern: str):
        self.page = page
        self.routes: list = []
        page.route(re.compile(pattern), lambda route: self.routes.append(route))

    def next(self):
        pump_until(self.page, lambda: self.routes, "the form sent")
        return self.routes.pop(0)


def pump_until(page, condition, what: str) -> None:
    """Wait for ``condition``, letting Playwright deliver its events (the played socket's
    connection and messages, held requests) meanwhile."""
    for _ in range(200):
        if condition():
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"timed out waiting for {what}")


def open_review(page, base: str, run: Run, socket: PlayedSocket) -> int:
    sign_in(page, base)
    page.goto(f"{base}/reviews/{run.pk}/")
    page.wait_for_function("() => document.querySelector('#timeline') !== null")
    pump_until(page, lambda: socket.route is not None and socket.hellos,
               "the page's hello on its live channel")
    return int(page.evaluate("() => document.getElementById('timeline').dataset.lastSeq || "
                             "document.getElementById('timeline').lastElementChild.dataset.seq"))


def settled(page) -> None:
    """The page has handled the answer and what it kept back (a task after the request)."""
    page.wait_for_timeout(300)


def badge(page, key: str) -> str:
    """The classes of the finding's decision badge ("" while it has none)."""
    return page.evaluate("k => { const b = document.querySelector('#finding-' + k + ' .decide .badge');"
                         " return b ? b.className : ''; }", key)


def test_a_newer_update_kept_back_during_the_answer_is_applied_after_it(live_stack, page,
                                                                        alice):
    run, review, keys = review_at_triage(alice)
    socket = PlayedSocket(page)
    held = HeldAnswers(page, rf".*/reviews/{run.pk}/findings/[^/]+/$")
    cursor = open_review(page, live_stack, run, socket)

    # The person accepts the first finding; the answer is rendered, and held.
    page.locator(f"#finding-{keys[0]} button[value=accepted]").click()
    route = held.next()
    answer = route.fetch()
    assert answer.status == 200
    # Meanwhile the second finding is rejected elsewhere (another tab), after the answer was
    # rendered, and that live update reaches the page first: the findings panel holds the
    # form being sent, so its update is kept back; the other panels take it at once.
    triage.decide_finding(review, keys[1], alice, "rejected")
    newest = socket.send_events(run, cursor)
    page.wait_for_selector(f"#timeline [data-seq='{newest}']")
    assert "bad" not in badge(page, keys[1])  # kept back, not applied yet
    untriaged = page.locator("#verdict-panel .untriaged").inner_text()
    assert f"{len(keys) - 2} finding" in untriaged, untriaged

    route.fulfill(response=answer)
    settled(page)
    # The answer's card, then the kept update (newer than the answer): both decisions show.
    assert "ok" in badge(page, keys[0]), badge(page, keys[0])
    assert "bad" in badge(page, keys[1]), badge(page, keys[1])
    # The answer's own verdict and history panels (older than the page's) were not swapped in.
    untriaged = page.locator("#verdict-panel .untriaged").inner_text()
    assert f"{len(keys) - 2} finding" in untriaged, untriaged
    assert f"rejected {keys[1]}" in page.locator("#history-panel").inner_text()
    assert page.errors == []


def test_the_decisions_own_update_does_not_replace_the_answer(live_stack, page, alice):
    run, review, keys = review_at_triage(alice)
    socket = PlayedSocket(page)
    held = HeldAnswers(page, rf".*/reviews/{run.pk}/settle/$")
    cursor = open_review(page, live_stack, run, socket)

    # Settling the rest is answered with a message in the verdict panel.
    page.locator(f"#finding-{keys[0]} button[value=accepted]").click()
    page.wait_for_selector(f"#finding-{keys[0]} .decide .badge.ok")
    panel = page.locator("#verdict-panel")
    panel.locator("button[value=accept]").click()
    page.wait_for_selector("#verdict-panel p.error")  # refused: findings still untriaged
    page.on("dialog", lambda dialog: dialog.accept())  # its confirmation (hx-confirm)
    panel.locator("button", has_text="Accept all remaining").click()
    route = held.next()
    answer = route.fetch()
    assert answer.status == 200
    # The decision's own events reach the page before its answer: the verdict panel's part
    # is kept back, and once the answer is in, it is not applied over it (it is no newer).
    newest = socket.send_events(run, cursor)
    page.wait_for_selector(f"#timeline [data-seq='{newest}']")
    route.fulfill(response=answer)
    page.wait_for_selector("#verdict-panel p.notice")
    settled(page)
    # The answer's own message (a live render has only the state's "Every finding is
    # triaged") is still there.
    said = page.locator("#verdict-panel").inner_text()
    assert f"{len(keys) - 1} remaining findings accepted" in said, said
    assert page.locator("#verdict-panel .untriaged").count() == 0
    assert page.errors == []


def test_a_cards_answer_makes_its_panel_as_new_as_the_answer(live_stack, page, alice):
    """The answer to one finding's form replaces only its card; the findings panel around it is
    then as new as the answer, so the decision's own update (kept back meanwhile) does not
    redraw the panel over the answer."""
    run, review, keys = review_at_triage(alice)
    socket = PlayedSocket(page)
    held = HeldAnswers(page, rf".*/reviews/{run.pk}/findings/[^/]+/$")
    cursor = open_review(page, live_stack, run, socket)
    page.evaluate("() => { document.getElementById('findings-panel').dataset.marker = 'page'; }")

    page.locator(f"#finding-{keys[0]} button[value=accepted]").click()
    route = held.next()
    answer = route.fetch()
    newest = socket.send_events(run, cursor)
    page.wait_for_selector(f"#timeline [data-seq='{newest}']")
    route.fulfill(response=answer)
    page.wait_for_selector(f"#finding-{keys[0]} .decide .badge.ok")
    settled(page)
    assert page.evaluate("() => document.getElementById('findings-panel').dataset.marker") \
        == "page", "the decision's own update redrew the panel after its answer"
    assert page.evaluate(f"() => document.getElementById('finding-{keys[0]}')"
                         ".contains(document.activeElement)")
    assert page.errors == []


def test_a_live_update_older_than_the_page_is_ignored(live_stack, page, alice):
    run, review, keys = review_at_triage(alice)
    socket = PlayedSocket(page)
    cursor = open_review(page, live_stack, run, socket)
    # Two decisions elsewhere; the page is sent the newer state, then (late, out of order)
    # a render made between them.
    triage.decide_finding(review, keys[0], alice, "accepted")
    run.refresh_from_db()
    between = run.last_event_seq
    old_events = list(Event.objects.filter(run=run, seq__gt=cursor).order_by("seq"))
    old = render_live(run, old_events, panels_for(run, {e.kind for e in old_events}))
    triage.decide_finding(review, keys[1], alice, "rejected")
    newest = socket.send_events(run, cursor)
    page.wait_for_selector(f"#timeline [data-seq='{newest}']")
    assert "bad" in badge(page, keys[1])
    assert newest > between
    socket.route.send(old)
    settled(page)
    assert "bad" in badge(page, keys[1]), "an older render replaced a newer panel"
    assert page.errors == []
