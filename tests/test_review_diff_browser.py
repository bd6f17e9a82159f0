"""A new user triages a review from the diff itself, with the keyboard, in Chromium at 1280 and
390 px: the diff is the main view (above the fold, a file list, each finding threaded under its
line with accept and reject there), j / k move between findings, a / r / u decide through the
finding's own form, nothing fires while typing in a field, every move is said in the live
region, the verdict stays in view while the diff scrolls, and approving over an accepted
critical finding asks first, naming it. Everything real: Daphne, the Celery worker, Redis and
the offline model (offline, as a new user without a key would be)."""

import re

import pytest

from reviews_app.models import Finding, Review, TriageDecision
from tests.conftest import sign_in
from tests.review_corpus import review_at_triage

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

LIVE = "() => document.getElementById('live-status').textContent"
FOCUSED = "() => document.activeElement.id"


@pytest.fixture
def alice(browser_alice):
    return browser_alice


def said(page, pattern: str) -> str:
    """Wait until the live region says something matching ``pattern``; return it."""
    page.wait_for_function(f"() => new RegExp({pattern!r}).test(({LIVE})())", timeout=10_000)
    return page.evaluate(LIVE)


def box(page, selector: str) -> dict:
    return page.evaluate(f"() => {{ const r = document.querySelector({selector!r})"
                         ".getBoundingClientRect(); return {top: r.top, bottom: r.bottom, "
                         "left: r.left, right: r.right}; }")


def decision(key: str, run) -> Finding:
    return Finding.objects.get(review__run=run, key=key)


def test_a_new_user_triages_from_the_diff_by_keyboard_at_1280(live_stack, page, alice):
    run, review, keys = review_at_triage(alice)
    dialogs: list[str] = []
    answer = {"accept": True}

    def on_dialog(dialog):
        dialogs.append(dialog.message)
        dialog.accept() if answer["accept"] else dialog.dismiss()

    page.on("dialog", on_dialog)
    page.set_viewport_size({"width": 1280, "height": 800})
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/reviews/{run.pk}/")
    order = page.locator("#diff-panel [data-finding]").evaluate_all(
        "els => els.map(e => e.dataset.finding)")
    assert sorted(order) == sorted(keys)  # every kept finding once, on the diff

    # The diff is the main view, above the fold: its first line and the first finding's
    # accept and reject, without scrolling; the cards come after it.
    assert page.evaluate("() => scrollY") == 0
    assert box(page, "#diff-panel table.diff-code tr.add")["top"] < 800
    first = f"#thread-{order[0]}"
    assert box(page, f"{first} button[value=accepted]")["bottom"] <= 800
    assert box(page, f"{first} button[value=rejected]")["bottom"] <= 800
    assert box(page, "#findings-panel")["top"] > box(page, "#diff-panel")["top"]
    assert page.locator("#file-list li").count() == 2

    # Each finding's decision sits next to its line: its row follows the line's row at once,
    # and the line is the finding's own.
    rows = page.evaluate("""() => Array.from(document.querySelectorAll('#diff-panel tr.thread-row'))
      .map(row => { const line = row.previousElementSibling, a = line.getBoundingClientRect(),
                    b = row.getBoundingClientRect(),
                    btn = row.querySelector('button[value=accepted]').getBoundingClientRect();
        return {gap: b.top - a.bottom, line: line.id, inside: btn.top >= b.top && btn.bottom <= b.bottom,
                keys: Array.from(row.querySelectorAll('[data-finding]')).map(t => [t.dataset.finding, t.dataset.where])}; })""")
    assert rows
    for row in rows:
        assert abs(row["gap"]) <= 1 and row["inside"], row
        for key, where in row["keys"]:
            assert row["line"].endswith(f"-L{where.rsplit(':', 1)[1].split('-')[0]}"), row

    # The shortcuts are written on the page and on the buttons.
    assert "next finding" in page.locator("#keys-hint").inner_text()
    assert page.locator(f"{first} button[value=accepted]").get_attribute("aria-keyshortcuts") == "a"

    # j / k move the focus from finding to finding, and each move is said.
    page.keyboard.press("j")
    assert page.evaluate(FOCUSED) == f"thread-{order[0]}"
    said(page, f"^Finding 1 of {len(order)}: {order[0]}, ")
    page.keyboard.press("j")
    assert page.evaluate(FOCUSED) == f"thread-{order[1]}"
    said(page, f"^Finding 2 of {len(order)}: {order[1]}, .*Not triaged\\. A to accept")
    page.keyboard.press("k")
    assert page.evaluate(FOCUSED) == f"thread-{order[0]}"
    page.keyboard.press("k")
    said(page, "^No previous finding: this is the first")

    # a accepts the finding in focus, through its own form; the card in the list follows.
    page.keyboard.press("a")
    page.wait_for_selector(f"#thread-{order[0]} .badge.ok")
    said(page, f"^{order[0]} accepted\\.$")
    assert page.evaluate(FOCUSED) == f"thread-{order[0]}"
    page.wait_for_selector(f"#finding-{order[0]} .badge.ok")
    assert decision(order[0], run).decision == "accepted"
    page.keyboard.press("a")  # once more: nothing is sent, and it says why
    said(page, f"^{order[0]} is accepted already: U to undo it first\\.$")
    assert TriageDecision.objects.filter(review=review).count() == 1

    # r rejects the next one; u undoes it.
    page.keyboard.press("j")
    page.keyboard.press("r")
    page.wait_for_selector(f"#thread-{order[1]} .badge.bad")
    assert decision(order[1], run).decision == "rejected"
    page.keyboard.press("u")
    page.wait_for_selector(f"#thread-{order[1]} button[value=rejected]")
    assert decision(order[1], run).decision == "pending"
    # The redrawn thread takes the focus back once htmx settles it: wait for that, or a key
    # pressed meanwhile lands before the focus moves (seen once on a loaded machine).
    page.wait_for_function(f"() => document.activeElement && "
                           f"document.activeElement.id === 'thread-{order[1]}'")

    # Typing in a field is typing: c goes to the comment, and j, a, r are letters there.
    page.keyboard.press("c")
    field = page.locator(f"#thread-{order[1]} input[name=comment]")
    assert page.evaluate("() => document.activeElement.name") == "comment"
    page.keyboard.type("jar")
    assert field.input_value() == "jar"
    assert page.evaluate("() => document.activeElement.name") == "comment"
    assert decision(order[1], run).decision == "pending"
    assert TriageDecision.objects.filter(review=review).count() == 3
    # Out of the field (Tab to its Accept button), r rejects with the comment typed.
    page.keyboard.press("Tab")
    page.keyboard.press("r")
    page.wait_for_selector(f"#thread-{order[1]} .badge.bad")
    assert (decision(order[1], run).decision, decision(order[1], run).comment) == \
        ("rejected", "jar")
    assert "2 of" in page.locator("#triage-bar").inner_text()

    # Those who prefer the list: the same keys move through the cards there.
    cards = page.locator("#findings-panel [data-finding]").evaluate_all(
        "els => els.map(e => e.id)")
    page.locator(f"#{cards[0]} a.where").focus()
    page.keyboard.press("j")
    assert page.evaluate(FOCUSED) == cards[1]
    said(page, "^Finding 2 of ")
    # A decision key with the focus elsewhere (on the verdict) decides nothing.
    count = TriageDecision.objects.filter(review=review).count()
    page.locator("#verdict-panel details.reject summary").focus()
    page.keyboard.press("a")
    said(page, "^Move to a finding first")
    assert TriageDecision.objects.filter(review=review).count() == count

    # The verdict stays in view while the page scrolls to its end, and so does the triage bar.
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_timeout(200)
    assert page.evaluate("() => scrollY") > 300
    panel = box(page, "#verdict-panel .verdict-line")
    assert 0 <= panel["top"] and panel["bottom"] <= 800
    assert abs(box(page, "#triage-bar")["top"]) <= 1

    # Approving over the accepted critical finding asks first, naming it.
    # (the first critical finding on the page: under one rubric, issue 36, both the shell
    # command and the eval of the review's diff are code execution, so critical)
    criticals = {f.key: f for f in Review.objects.get(pk=review.pk).findings.filter(kept=True)
                 if f.severity == "critical"}
    critical = criticals[next(k for k in order if k in criticals)]
    page.locator(f"#thread-{order[0]}").focus()  # back on the diff
    for _ in order:
        if page.evaluate(FOCUSED) == f"thread-{critical.key}":
            break
        page.keyboard.press("j")
    assert page.evaluate(FOCUSED) == f"thread-{critical.key}"
    if decision(critical.key, run).decision == "rejected":  # rejected above: undo it first
        page.keyboard.press("u")
        page.wait_for_selector(f"#thread-{critical.key} button[value=accepted]")
    if decision(critical.key, run).decision == "pending":
        page.keyboard.press("a")
        page.wait_for_selector(f"#thread-{critical.key} .badge.ok")
    verdict = page.locator("#verdict-panel")
    verdict.locator("button", has_text="Reject all remaining").click()
    page.wait_for_selector("#verdict-panel p.notice")
    assert verdict.locator("#critical-confirm").inner_text().count(critical.key) == 1
    verdict.locator("details.reject summary").click()
    verdict.locator("select[name=verdict]").select_option("approve")
    verdict.locator("textarea[name=reason]").fill("Internal tool, sandboxed")
    answer["accept"] = False
    verdict.locator("button[value=override]").click()
    said(page, "^Not approved: nothing was sent")
    assert critical.key in dialogs[-1] and critical.title[:30] in dialogs[-1]
    assert Review.objects.get(pk=review.pk).final_verdict == ""
    answer["accept"] = True
    verdict.locator("button[value=override]").click()
    page.wait_for_selector("#verdict-panel .decided")
    final = Review.objects.get(pk=review.pk)
    assert (final.final_verdict, final.verdict_reason) == ("approve", "Internal tool, sandboxed")
    assert len([d for d in dialogs if critical.key in d]) == 2
    assert page.errors == []


def test_a_new_user_triages_from_the_diff_by_keyboard_at_390(live_stack, page, alice):
    run, review, keys = review_at_triage(alice)
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/reviews/{run.pk}/")
    overflow = "() => document.documentElement.scrollWidth - window.innerWidth"
    assert page.evaluate(overflow) <= 0
    wide = page.evaluate("""() => Array.from(document.querySelectorAll('main *'))
      .filter(e => e.getBoundingClientRect().right > innerWidth + 0.5 && !e.closest('.visually-hidden'))
      .map(e => e.tagName + '.' + e.className)""")
    assert wide == []
    order = page.locator("#diff-panel [data-finding]").evaluate_all(
        "els => els.map(e => e.dataset.finding)")

    # j goes to the first finding: it is on screen, its buttons inside the width.
    page.keyboard.press("j")
    assert page.evaluate(FOCUSED) == f"thread-{order[0]}"
    said(page, f"^Finding 1 of {len(order)}: {order[0]}")
    accept = box(page, f"#thread-{order[0]} button[value=accepted]")
    reject = box(page, f"#thread-{order[0]} button[value=rejected]")
    for b in (accept, reject):
        assert 0 <= b["left"] and b["right"] <= 390 and 0 <= b["top"] and b["bottom"] <= 844
    page.keyboard.press("a")
    page.wait_for_selector(f"#thread-{order[0]} .badge.ok")
    said(page, f"^{order[0]} accepted\\.$")
    page.keyboard.press("j")
    page.keyboard.press("r")
    page.wait_for_selector(f"#thread-{order[1]} .badge.bad")
    assert [decision(k, run).decision for k in order[:2]] == ["accepted", "rejected"]
    assert page.evaluate(overflow) <= 0

    # Scrolled down the diff, the triage bar (count, next/previous, the verdict) stays on top.
    page.evaluate("() => window.scrollBy(0, 1200)")
    page.wait_for_timeout(200)
    bar = box(page, "#triage-bar")
    assert abs(bar["top"]) <= 1 and bar["right"] <= 390
    assert re.search(r"2 of \d+ triaged", page.locator("#triage-bar").inner_text())
    assert "Request changes" in page.locator("#triage-bar .bar-verdict").inner_text()
    page.locator("#triage-bar button[data-go=next]").click()  # a tap works as j does
    said(page, f"^Finding 3 of {len(order)}: {order[2]}")
    page.locator("#triage-bar .bar-verdict").click()
    page.wait_for_timeout(300)
    assert box(page, "#verdict-panel")["top"] < 844
    assert page.errors == []


def test_a_live_redraw_of_a_finding_keeps_the_focus_in_its_comment_field(live_stack, page,
                                                                          alice):
    # C put the focus in the finding's comment field; a live update then redraws that
    # finding's thread whole, out of band (the thread its own region): the focus stays in the
    # comment field of the new thread, not on the thread (the flake the keyboard test hit
    # once under load, where the undo's own live update landed after C).
    run, _review, _keys = review_at_triage(alice)
    page.set_viewport_size({"width": 1280, "height": 800})
    sign_in(page, live_stack)
    page.goto(f"{live_stack}/reviews/{run.pk}/")
    key = page.locator("#diff-panel [data-finding]").first.get_attribute("data-finding")
    page.keyboard.press("j")
    page.wait_for_function(f"() => document.activeElement.id === 'thread-{key}'")
    page.keyboard.press("c")
    assert page.evaluate("() => document.activeElement.name") == "comment"
    redrawn = page.evaluate("""key => {
        const old = document.getElementById('thread-' + key);
        old.dataset.old = 'yes';
        const html = old.outerHTML.replace(' data-old="yes"', '')
          .replace('id="thread-' + key + '"', 'id="thread-' + key + '" hx-swap-oob="true"');
        htmx.swap(document.body, html, {swapStyle: 'none'});
        const now = document.getElementById('thread-' + key);
        return now !== old && !now.dataset.old;
    }""", key)
    assert redrawn  # the thread was replaced, not patched
    assert page.evaluate("() => document.activeElement.name") == "comment"
    assert page.evaluate(f"() => document.getElementById('thread-{key}')"
                         ".contains(document.activeElement)")
