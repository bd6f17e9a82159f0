"""Review triage: every accept / reject / undo / settle / verdict / reopen decision is recorded
(who, when, what changed) and shown as a history; a verdict is final only once every finding
is triaged; a final verdict locks triage until someone reopens it; exports say which version
they show. Edges: double submits and stale pages, another user, anonymous, CSRF, bad ids.

Reviews reach the triage gate through the real engine and the offline model (see
tests/test_review_views.py), hence transactional tests."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse
from markdown_it import MarkdownIt

from agents_app import engine
from agents_app.models import Run
from agents_app.patterns.base import Decision
from reviews_app import services
from reviews_app.models import Finding, Review, TriageDecision
from reviews_app.pipeline import export
from reviews_app.triage import service as triage
from reviews_app.views import render_live_update
from tests.test_review_views import start, triage_run  # noqa: F401 - the fixture

HTMX = {"HTTP_HX_REQUEST": "true"}


def review_of(run) -> Review:
    return Review.objects.select_related("run").get(run=run)


def kept(review) -> list[Finding]:
    return list(review.findings.filter(kept=True).order_by("position"))


def post(client, name, run, data=None, *args, htmx=True):
    url = reverse(name, args=[run.pk, *args])
    return client.post(url, data or {}, **(HTMX if htmx else {}))


def finalise_all(client, run, decision="accepted"):
    """Settle the rest and accept the verdict, as the page does."""
    assert post(client, "settle_rest", run, {"decision": decision}).status_code == 200
    run.refresh_from_db()
    response = post(client, "verdict_decision", run, {"action": "accept", "seq": run.stage_seq})
    assert response.status_code == 200, response.content[:400]
    return review_of(run)


def fingerprint(review) -> tuple:
    review.refresh_from_db()
    run = Run.objects.get(pk=review.run_id)
    return (review.final_verdict, review.triage_version, review.verdict_decided_by_id,
            list(review.findings.order_by("pk").values_list("decision", "decided_by", "comment")),
            TriageDecision.objects.filter(review=review).count(), run.status, run.stage_seq,
            run.last_event_seq)


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """The worker's part (closing a decided review) runs in the test, by ``run_inline``."""
    monkeypatch.setattr(engine.scheduling, "schedule", lambda run_id, countdown=None: None)


@pytest.fixture
def final_run(alice_client, triage_run):  # noqa: F811
    finalise_all(alice_client, triage_run)
    run = engine.run_inline(triage_run.pk)
    assert run.status == "completed"
    return run


# --- every decision recorded, shown as a history ---------------------------------------------
def test_accept_reject_and_undo_are_each_recorded_with_who_when_and_what(
        alice_client, alice, triage_run):  # noqa: F811
    review = review_of(triage_run)
    first, second = kept(review)[:2]
    r = post(alice_client, "finding_decision", triage_run,
             {"decision": "accepted", "comment": "real bug", "seen": "pending"}, first.key)
    assert r.status_code == 200
    html = r.content.decode()
    assert 'id="history-panel" hx-swap-oob="true"' in html  # the history updates in place
    post(alice_client, "finding_decision", triage_run, {"decision": "pending"}, first.key)
    post(alice_client, "finding_decision", triage_run,
         {"decision": "rejected", "comment": "test code"}, second.key)
    rows = list(TriageDecision.objects.filter(review=review).order_by("id"))
    assert [(d.kind, d.changes, d.note, d.actor, d.actor_name, d.version) for d in rows] == [
        ("accept", [{"finding": first.key, "before": "pending", "after": "accepted"}],
         "real bug", alice, "alice", 0),
        ("undo", [{"finding": first.key, "before": "accepted", "after": "pending"}],
         "", alice, "alice", 0),
        ("reject", [{"finding": second.key, "before": "pending", "after": "rejected"}],
         "test code", alice, "alice", 0),
    ]
    assert all(d.at is not None for d in rows)
    page = alice_client.get(reverse("review_detail", args=[triage_run.pk])).content.decode()
    history = page[page.index('id="history-panel"'):]
    history = history[:history.index("</section>")]
    items = re.findall(r'<li class="decision kind-(\w+)" id="decision-\d+"><time datetime="'
                       r'([^"]+)">[^<]+</time> <strong class="who">(\w+)</strong> '
                       r'<span class="what">([^<]+)</span>', history)
    assert [(k, who) for k, _, who, _ in items] == [("accept", "alice"), ("undo", "alice"),
                                                   ("reject", "alice")]  # oldest first
    assert f"accepted {first.key} (not triaged → accepted)" in items[0][3]
    assert f"undid the decision on {first.key} (accepted → not triaged)" in items[1][3]
    assert "real bug" in history and "test code" in history


def test_accept_all_of_a_severity_is_recorded_with_the_findings_it_accepted(
        alice_client, triage_run):  # noqa: F811
    review = review_of(triage_run)
    sev = kept(review)[0].severity
    keys = [f.key for f in kept(review) if f.severity == sev]
    assert post(alice_client, "accept_all", triage_run, {"severity": sev}).status_code == 200
    [d] = TriageDecision.objects.filter(review=review)
    assert d.kind == "accept_severity" and d.note == sev
    assert d.changes == [{"finding": k, "before": "pending", "after": "accepted"} for k in keys]


# --- a verdict is final only once nothing is untriaged ----------------------------------------
def test_finalising_with_untriaged_findings_is_refused_and_offers_to_settle(
        alice_client, triage_run):  # noqa: F811
    review = review_of(triage_run)
    findings = kept(review)
    assert len(findings) >= 2
    post(alice_client, "finding_decision", triage_run, {"decision": "accepted"},
         findings[0].key)
    before = fingerprint(review)
    for data in ({"action": "accept", "seq": triage_run.stage_seq},
                 {"action": "override", "verdict": "approve", "reason": "fine",
                  "seq": triage_run.stage_seq}):
        r = post(alice_client, "verdict_decision", triage_run, data)
        assert r.status_code == 409
        html = r.content.decode()
        left = [f.key for f in findings[1:]]
        assert (f"The verdict cannot be finalised yet: {len(left)} finding" in html
                and ", ".join(left) in html), html
        assert "Accept all remaining" in html and "Reject all remaining" in html
        assert reverse("settle_rest", args=[triage_run.pk]) in html
        # An override attempt keeps what was typed; a plain accept leaves that part closed.
        overriding = data["action"] == "override"
        assert ('<details class="reject" open>' in html) is overriding
        assert (">fine</textarea>" in html) is overriding
    # A plain form post (no JavaScript) gets the whole page with the same message.
    r = post(alice_client, "verdict_decision", triage_run,
             {"action": "accept", "seq": triage_run.stage_seq}, htmx=False)
    assert r.status_code == 409 and b"cannot be finalised yet" in r.content
    assert fingerprint(review) == before
    # The page says so before any attempt, too.
    page = alice_client.get(reverse("review_detail", args=[triage_run.pk])).content.decode()
    assert f"{len(findings) - 1} finding" in page and "not triaged yet" in page


@pytest.mark.parametrize("decision", ["accepted", "rejected"])
def test_settling_the_rest_is_recorded_then_the_verdict_is_version_1(
        alice_client, alice, triage_run, decision):  # noqa: F811
    review = review_of(triage_run)
    first, *rest = kept(review)
    post(alice_client, "finding_decision", triage_run, {"decision": "rejected"}, first.key)
    r = post(alice_client, "settle_rest", triage_run,
             {"decision": decision, "seen": ",".join(f.key for f in rest)})
    assert r.status_code == 200 and b"You can finalise the verdict now" in r.content
    assert not review.findings.filter(kept=True, decision="pending").exists()
    assert review.findings.filter(key__in=[f.key for f in rest], decision=decision,
                                  decided_by=alice).count() == len(rest)
    settle = TriageDecision.objects.filter(review=review).order_by("id").last()
    assert settle.kind == ("accept_rest" if decision == "accepted" else "reject_rest")
    assert settle.changes == [{"finding": f.key, "before": "pending", "after": decision}
                              for f in rest]
    triage_run.refresh_from_db()
    r = post(alice_client, "verdict_decision", triage_run,
             {"action": "accept", "seq": triage_run.stage_seq})
    assert r.status_code == 200
    review.refresh_from_db()
    assert review.final_verdict == review.proposed_verdict and review.triage_version == 1
    final = TriageDecision.objects.filter(review=review).order_by("id").last()
    assert (final.kind, final.version, final.actor, final.verdict_before, final.verdict_after) \
        == ("finalise", 1, alice, review.proposed_verdict, review.final_verdict)
    # Settling again has nothing left to do, and says so without recording anything.
    n = TriageDecision.objects.count()
    review.final_verdict = ""  # as a stale page would see it
    with pytest.raises(triage.Refused, match="triage is locked"):
        triage.settle_rest(review, "accepted", alice)
    assert TriageDecision.objects.count() == n


def test_settling_from_a_stale_page_is_refused(alice_client, alice, triage_run):  # noqa: F811
    review = review_of(triage_run)
    findings = kept(review)
    seen = ",".join(f.key for f in findings)  # the page listed them all as pending…
    triage.decide_finding(review, findings[0].key, alice, "rejected")  # …another tab decided
    before = fingerprint(review)
    r = post(alice_client, "settle_rest", triage_run, {"decision": "accepted", "seen": seen})
    assert r.status_code == 409 and b"changed since this page was loaded" in r.content
    assert fingerprint(review) == before
    bad = post(alice_client, "settle_rest", triage_run, {"decision": "pending"})
    assert bad.status_code == 400 and b"accept or to reject the remaining" in bad.content
    assert fingerprint(review) == before


# --- a final verdict locks triage; reopening is explicit and recorded -------------------------
def test_after_the_verdict_is_final_triage_is_locked(alice_client, final_run):
    review = review_of(final_run)
    first = kept(review)[0]
    before = fingerprint(review)
    attempts = [("finding_decision", {"decision": "pending"}, (first.key,)),
                ("finding_decision", {"decision": "rejected"}, (first.key,)),
                ("accept_all", {"severity": first.severity}, ()),
                ("settle_rest", {"decision": "rejected"}, ())]
    for name, data, args in attempts:
        for htmx in (True, False):
            r = post(alice_client, name, final_run, data, *args, htmx=htmx)
            assert r.status_code == 409, (name, r.status_code)
            assert "triage is locked" in r.content.decode(), name
    # Finalising twice (a double submit, or a stale page) changes nothing either.
    r = post(alice_client, "verdict_decision", final_run,
             {"action": "override", "verdict": "approve", "reason": "x", "seq": 0})
    assert r.status_code == 409 and b"The verdict is final already" in r.content
    assert fingerprint(review) == before
    page = alice_client.get(reverse("review_detail", args=[final_run.pk])).content.decode()
    assert 'name="decision" value="accepted"' not in page
    assert 'name="decision" value="pending"' not in page
    assert reverse("settle_rest", args=[final_run.pk]) not in page
    assert reverse("accept_all", args=[final_run.pk]) not in page
    assert 'name="action" value="accept"' not in page
    assert "Triage is locked" in page and "triage version 1, finalised by alice" in page
    assert reverse("reopen_triage", args=[final_run.pk]) in page and "hx-confirm" in page


def test_reopening_is_recorded_unlocks_triage_and_the_next_verdict_is_version_2(
        alice_client, alice, final_run):
    review = review_of(final_run)
    first = kept(review)[0]
    first_verdict = review.final_verdict
    r = post(alice_client, "reopen_triage", final_run, {"note": "new information"})
    assert r.status_code == 200 and b"Triage is open again: alice reopened version 1" \
        in r.content
    review.refresh_from_db()
    assert review.final_verdict == "" and review.triage_version == 1
    assert review.verdict_decided_by is None
    reopen = TriageDecision.objects.filter(review=review).order_by("id").last()
    assert (reopen.kind, reopen.version, reopen.actor, reopen.verdict_before,
            reopen.verdict_after, reopen.note) == ("reopen", 1, alice, first_verdict, "",
                                                    "new information")
    event = final_run.events.order_by("-seq").first()
    assert event.kind == "triage_reopened" and "alice reopened triage" in event.message
    # Reopening an open review is refused and recorded nowhere.
    before = fingerprint(review)
    again = post(alice_client, "reopen_triage", final_run)
    assert again.status_code == 409 and b"triage is open already" in again.content
    assert fingerprint(review) == before

    # Triage is open: the finding can change, and the verdict is finalised as version 2.
    page = alice_client.get(reverse("review_detail", args=[final_run.pk])).content.decode()
    assert 'name="decision" value="pending"' in page and "draft: not finalised" in page
    post(alice_client, "finding_decision", final_run, {"decision": "pending"}, first.key)
    r = post(alice_client, "verdict_decision", final_run, {"action": "accept", "seq": 0})
    assert r.status_code == 409 and b"cannot be finalised yet" in r.content
    post(alice_client, "finding_decision", final_run, {"decision": "rejected"}, first.key)
    # Not "approve": since issue 36's one rubric GOOD's eval is critical like its shell
    # command, and approving over it would ask for the critical confirmation first.
    other = ("needs_discussion" if review.proposed_verdict != "needs_discussion"
             else "request_changes")
    r = post(alice_client, "verdict_decision", final_run,
             {"action": "override", "verdict": other, "reason": "", "seq": 0})
    assert r.status_code == 400 and b"Say why" in r.content  # the pattern's rules still hold
    r = post(alice_client, "verdict_decision", final_run,
             {"action": "override", "verdict": other, "reason": "Fixed upstream", "seq": 0})
    assert r.status_code == 200, r.content[:500]
    review.refresh_from_db()
    assert (review.final_verdict, review.triage_version, review.verdict_reason,
            review.verdict_decided_by) == (other, 2, "Fixed upstream", alice)
    kinds = list(TriageDecision.objects.filter(review=review).order_by("id")
                 .values_list("kind", "version"))
    assert kinds[-4:] == [("reopen", 1), ("undo", 1), ("reject", 1), ("finalise", 2)]
    assert final_run.events.filter(kind="verdict_decided").count() == 2
    page = alice_client.get(reverse("review_detail", args=[final_run.pk])).content.decode()
    assert "finalised the verdict as version 2" in page and "reopened triage after version 1" \
        in page and "Fixed upstream" in page
    assert "triage version 2, finalised by alice" in page


def test_reopen_waits_until_the_review_has_closed(alice, triage_run):  # noqa: F811
    review = review_of(triage_run)
    triage.settle_rest(review, "accepted", alice)
    triage.finalise(review, alice, action="accept", seq=triage_run.stage_seq)
    # The worker has not run the closing stage yet: the run is not completed.
    assert Run.objects.get(pk=triage_run.pk).status != "completed"
    with pytest.raises(triage.Refused, match="still closing"):
        triage.reopen(review, alice)
    assert TriageDecision.objects.filter(kind="reopen").count() == 0


def test_a_live_update_after_a_reopen_refreshes_the_triage_panels(alice_client, final_run):
    post(alice_client, "reopen_triage", final_run)
    event = final_run.events.order_by("-seq").first()
    html = render_live_update(final_run, [event], set())
    for panel in ("verdict-panel", "findings-panel", "history-panel"):
        assert f'id="{panel}" hx-swap-oob="true"' in html, panel
    assert "reopened triage after version 1" in html


def test_each_decision_is_a_run_event_that_redraws_the_triage_panels_in_every_open_page(
        alice_client, triage_run):  # noqa: F811
    """Another tab open on the review (a second person triaging, say) sees each decision
    live: it is a run event, announced after commit, whose live message redraws the
    findings, the verdict and the history. A refused or repeated decision adds none."""
    review = review_of(triage_run)
    first = kept(review)[0]
    before = triage_run.events.count()
    post(alice_client, "finding_decision", triage_run,
         {"decision": "accepted", "seen": "pending"}, first.key)
    post(alice_client, "finding_decision", triage_run, {"decision": "accepted"}, first.key)
    post(alice_client, "finding_decision", triage_run, {"decision": "rejected"}, first.key)
    events = list(triage_run.events.filter(seq__gt=before).order_by("seq"))
    assert [(e.kind, e.data["findings"]) for e in events] == [
        ("findings_triaged", [first.key])]
    assert events[0].message == f"alice accepted {first.key} (not triaged → accepted)."
    html = render_live_update(triage_run, events, set())
    for panel in ("verdict-panel", "findings-panel", "history-panel"):
        assert f'id="{panel}" hx-swap-oob="true"' in html, panel
    assert "Accepted</span> by alice" in html
    post(alice_client, "settle_rest", triage_run, {"decision": "rejected"})
    last = triage_run.events.order_by("-seq").first()
    assert last.kind == "findings_triaged" and last.message.startswith(
        "alice rejected all remaining findings")


# --- exports say which version they show -------------------------------------------------------
def exports(review) -> dict:
    data = services.export_dict(Review.objects.get(pk=review.pk))
    return {"json": json.loads(export.to_json(data))["review"]["triage"],
            "sarif": export.to_sarif(data)["runs"][0]["properties"]["triage"],
            # Rendered, as a reader sees it (the escaping is not what is tested here).
            "markdown": MarkdownIt().render(export.to_markdown(data))}


def test_exports_say_draft_or_the_finalised_version(alice_client, triage_run):  # noqa: F811
    review = review_of(triage_run)
    out = exports(review)
    assert out["json"] == out["sarif"] == "draft: not finalised"
    assert "<li><strong>Triage:</strong> draft: not finalised</li>" in out["markdown"]
    finalise_all(alice_client, triage_run)
    review.refresh_from_db()
    out = exports(review)
    assert out["json"] == out["sarif"]
    assert out["json"].startswith("triage version 1, finalised by alice at ")
    assert review.verdict_decided_at.isoformat() in out["json"]
    assert f"<li><strong>Triage:</strong> {out['json']}</li>" in out["markdown"]
    engine.run_inline(triage_run.pk)  # the worker closes the review
    assert post(alice_client, "reopen_triage", triage_run).status_code == 200
    assert exports(review)["json"] == "draft: not finalised"
    # The export views serve the same text.
    r = alice_client.get(reverse("export_review", args=[triage_run.pk]), {"format": "json"})
    assert json.loads(r.content)["review"]["triage"] == "draft: not finalised"


# --- edges: double submit, stale page, bad input ----------------------------------------------
def test_a_double_submitted_decision_changes_and_records_once(alice_client, triage_run):  # noqa: F811
    review = review_of(triage_run)
    f = kept(review)[0]
    data = {"decision": "accepted", "comment": "yes", "seen": "pending"}
    assert post(alice_client, "finding_decision", triage_run, data, f.key).status_code == 200
    again = post(alice_client, "finding_decision", triage_run,
                 {"decision": "accepted", "comment": "yes"}, f.key)
    assert again.status_code == 200 and b"already; nothing changed" in again.content
    assert TriageDecision.objects.filter(review=review).count() == 1
    # The same click from the stale page (it still showed "pending") is told so.
    before = fingerprint(review)
    stale = post(alice_client, "finding_decision", triage_run, data, f.key)
    assert stale.status_code == 409
    assert b"since this page was loaded" in stale.content
    assert f'id="finding-{f.key}"'.encode() in stale.content  # its current state, shown
    assert b"Accepted</span> by alice" in stale.content
    # Deciding on an already decided finding without undoing it first is refused.
    other = post(alice_client, "finding_decision", triage_run, {"decision": "rejected"}, f.key)
    assert other.status_code == 409 and b"Undo that first" in other.content
    plain = post(alice_client, "finding_decision", triage_run, {"decision": "rejected"}, f.key,
                 htmx=False)
    assert plain.status_code == 409 and b"Undo that first" in plain.content
    assert fingerprint(review) == before


def test_finalising_twice_creates_one_version(alice_client, alice, triage_run):  # noqa: F811
    review = review_of(triage_run)
    triage.settle_rest(review, "accepted", alice)
    seq = triage_run.stage_seq
    data = {"action": "accept", "seq": seq}
    assert post(alice_client, "verdict_decision", triage_run, data).status_code == 200
    assert post(alice_client, "verdict_decision", triage_run, data).status_code == 409
    assert TriageDecision.objects.filter(review=review, kind="finalise").count() == 1
    review.refresh_from_db()
    assert review.triage_version == 1


@pytest.mark.parametrize(("name", "data"), [
    ("settle_rest", {}), ("settle_rest", {"decision": "maybe"}),
    ("settle_rest", {"decision": "accepted", "seen": "x" * 20_001}),
    ("verdict_decision", {"action": "accept"}),
    ("verdict_decision", {"action": "accept", "seq": "-1"}),
    ("finding_decision", {"decision": "accepted", "seen": "later"}),
])
def test_bad_triage_input_is_refused_in_words_and_changes_nothing(
        alice_client, triage_run, name, data):  # noqa: F811
    review = review_of(triage_run)
    before = fingerprint(review)
    args = (kept(review)[0].key,) if name == "finding_decision" else ()
    r = post(alice_client, name, triage_run, data, *args)
    assert r.status_code == 400
    assert b'class="error" role="alert"' in r.content
    if name == "finding_decision":  # the message lands in the card the form targets
        assert r.content.decode().lstrip().startswith('<li class="finding')
        assert b'id="findings-panel"' not in r.content
    assert fingerprint(review) == before


def test_reopen_note_too_long_is_refused(alice_client, final_run):
    review = review_of(final_run)
    before = fingerprint(review)
    r = post(alice_client, "reopen_triage", final_run, {"note": "x" * 4001})
    assert r.status_code == 400 and b"The note is too long" in r.content
    assert fingerprint(review) == before


def triage_urls(run, key):
    return {
        "finding_decision": (reverse("finding_decision", args=[run.pk, key]),
                             {"decision": "accepted"}),
        "accept_all": (reverse("accept_all", args=[run.pk]), {"severity": "high"}),
        "settle_rest": (reverse("settle_rest", args=[run.pk]), {"decision": "accepted"}),
        "verdict_decision": (reverse("verdict_decision", args=[run.pk]),
                             {"action": "accept", "seq": run.stage_seq}),
        "reopen_triage": (reverse("reopen_triage", args=[run.pk]), {"note": "x"}),
    }


def test_bad_ids_are_404_never_500(alice_client, alice, triage_run):  # noqa: F811
    review = review_of(triage_run)
    other_run = engine.run_inline(start(alice).pk)  # alice's second review
    other_key = kept(review_of(other_run))[0].key
    before = fingerprint(review)
    huge = "9" * 20
    for name in triage_urls(triage_run, "SEC-1"):
        path = reverse(name, args=[triage_run.pk, *(
            ["SEC-1"] if name == "finding_decision" else [])])
        for bad in (path.replace(f"/{triage_run.pk}/", f"/{huge}/"),
                    path.replace(f"/{triage_run.pk}/", "/0/")):
            r = alice_client.post(bad, {"decision": "accepted", "severity": "high",
                                        "action": "accept", "seq": 0})
            assert r.status_code == 404, (name, bad, r.status_code)
    for key in (huge, "1" * 300, "NOPE-1", f"{other_key}x"):
        r = alice_client.post(reverse("finding_decision", args=[triage_run.pk, key]),
                              {"decision": "accepted"})
        assert r.status_code == 404, key
    # A finding of another review (its key exists there, and is dropped or absent here).
    dropped = review.findings.filter(kept=False).first()
    if dropped:
        r = alice_client.post(reverse("finding_decision", args=[triage_run.pk, dropped.key]),
                              {"decision": "accepted"})
        assert r.status_code == 404
    assert fingerprint(review) == before


# --- access -------------------------------------------------------------------------------------
@pytest.mark.parametrize("state", ["open", "final"])
def test_another_user_gets_404_on_every_triage_url_and_nothing_is_recorded(
        client, alice, bob, triage_run, state):  # noqa: F811
    review = review_of(triage_run)
    if state == "final":
        triage.settle_rest(review, "accepted", alice)
        triage.finalise(review, alice, action="accept", seq=triage_run.stage_seq)
        engine.run_inline(triage_run.pk)
        triage_run.refresh_from_db()
    client.force_login(bob)
    before = fingerprint(review)
    for name, (url, data) in triage_urls(triage_run, kept(review)[0].key).items():
        assert client.post(url, data).status_code == 404, name
        assert client.post(url, data, **HTMX).status_code == 404, name
    assert fingerprint(review) == before


def test_anonymous_is_sent_to_sign_in_from_every_triage_url(client, triage_run):  # noqa: F811
    review = review_of(triage_run)
    before = fingerprint(review)
    for name, (url, data) in triage_urls(triage_run, kept(review)[0].key).items():
        r = client.post(url, data)
        assert r.status_code == 302 and r["Location"].startswith(reverse("login")), name
    assert fingerprint(review) == before


def test_triage_posts_need_the_csrf_token(alice, triage_run):  # noqa: F811
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    review = review_of(triage_run)
    before = fingerprint(review)
    for name, (url, data) in triage_urls(triage_run, kept(review)[0].key).items():
        assert client.post(url, data, **HTMX).status_code == 403, name
        assert client.post(url, data, HTTP_X_CSRFTOKEN="x" * 64).status_code == 403, name
    assert fingerprint(review) == before


# --- the record itself ---------------------------------------------------------------------------
def test_decisions_are_append_only_and_outlive_the_account(
        django_user_model, alice, triage_run):  # noqa: F811
    review = review_of(triage_run)
    carol = django_user_model.objects.create_user("carol")
    triage.decide_finding(review, kept(review)[0].key, carol, "accepted")
    d = TriageDecision.objects.get()
    d.note = "rewritten"
    with pytest.raises(TypeError, match="append-only"):
        d.save()
    with pytest.raises(TypeError, match="append-only"):
        d.delete()
    with pytest.raises(TypeError, match="append-only"):
        TriageDecision.objects.filter(review=review).update(note="x")
    with pytest.raises(TypeError, match="append-only"):
        TriageDecision.objects.filter(review=review).delete()
    carol.delete()
    d = TriageDecision.objects.get()
    assert d.actor is None and d.actor_name == "carol" and d.note == ""


def test_a_headless_verdict_is_recorded_as_a_version_too(alice, triage_run):  # noqa: F811
    """``manage.py review`` accepts the proposed verdict through the engine, as the gate's
    POST does: the same persister records it."""
    engine.decide(triage_run, alice, triage_run.stage_seq, Decision("accept", author="alice"),
                  enqueue=False)
    review = review_of(triage_run)
    assert review.triage_version == 1
    [d] = TriageDecision.objects.filter(review=review)
    assert (d.kind, d.version, d.actor, d.verdict_after) == ("finalise", 1, alice,
                                                             review.proposed_verdict)


def test_notes_in_the_history_are_escaped(alice_client, triage_run):  # noqa: F811
    review = review_of(triage_run)
    f = kept(review)[0]
    post(alice_client, "finding_decision", triage_run,
         {"decision": "rejected", "comment": '<script>alert(1)</script><img src=x onerror=a()>'},
         f.key)
    html = alice_client.get(reverse("review_detail", args=[triage_run.pk])).content.decode()
    history = html[html.index('id="history-panel"'):]
    history = history[:history.index("</section>")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in history
    assert "<script>" not in history and "<img" not in history


def test_once_triaged_the_page_says_what_the_accepted_findings_call_for(
        alice_client, triage_run):  # noqa: F811
    """Rejecting every finding leaves nothing that blocks: the panel says the accepted ones
    call for approve (needs discussion if part of the change went unexamined) and chooses it
    under "Override the verdict", the person still giving the reason; accepting them again
    brings the rules' verdict back. Nothing is decided for the person."""
    from reviews_app.pipeline import coverage
    from reviews_app.views import triaged_verdict

    review = review_of(triage_run)
    assert review.proposed_verdict == "request_changes"
    url = reverse("review_detail", args=[triage_run.pk])
    assert "triaged-verdict" not in alice_client.get(url).content.decode()  # not triaged yet
    assert post(alice_client, "settle_rest", triage_run, {"decision": "rejected"}).status_code == 200
    expected = "needs_discussion" if coverage.unexamined(review.coverage) else "approve"
    assert triaged_verdict(review_of(triage_run), kept(review)) == expected
    page = alice_client.get(url).content.decode()
    label = {"approve": "Approve", "needs_discussion": "Needs discussion"}[expected]
    assert (f"the findings you accepted call for “{label}”, not the proposed “Request "
            "changes”") in page
    assert '<details class="reject" open>' in page
    assert f'<option value="{expected}" selected>' in page
    assert review_of(triage_run).final_verdict == ""  # only suggested
    # Accepting them all: the rules' verdict for them, as proposed.
    for f in kept(review):  # undo each rejection, then accept it
        for decision in ("pending", "accepted"):
            r = post(alice_client, "finding_decision", triage_run, {"decision": decision},
                     f.key)
            assert r.status_code == 200, r.content[:300]
    page = alice_client.get(url).content.decode()
    assert "call for “Request changes”, as proposed." in page
    assert '<details class="reject">' in page and " selected>" not in page


# --- approving over accepted critical findings needs a confirmation naming them -------------------
def test_approving_over_accepted_critical_findings_needs_a_confirmation_naming_them(
        alice_client, triage_run):  # noqa: F811
    """GOOD's shell command built with % is critical. Accepting it and then approving the
    change is refused until the person confirms, naming the finding (key and title); a
    confirmation for other findings (a stale page) is refused the same way."""
    review = review_of(triage_run)
    # GOOD's eval is critical too since issue 36 (one rubric: both run input as code); the
    # test accepts the first critical finding and rejects the rest.
    critical = [f for f in kept(review) if f.severity == "critical"][0]
    post(alice_client, "finding_decision", triage_run, {"decision": "accepted"}, critical.key)
    post(alice_client, "settle_rest", triage_run, {"decision": "rejected"})
    page = alice_client.get(reverse("review_detail", args=[triage_run.pk])).content.decode()
    panel = page[page.index('id="verdict-panel"'):page.index("</section>",
                                                             page.index('id="verdict-panel"'))]
    assert 'id="critical-confirm"' in panel and critical.key in panel
    assert f'name="confirm_critical" value="{critical.key}"' in panel
    before = fingerprint(review)
    override = {"action": "override", "verdict": "approve", "reason": "Tool runs in a sandbox",
                "seq": triage_run.stage_seq}
    for extra in ({}, {"confirm_critical": "SEC-99"}):
        for htmx in (True, False):
            r = post(alice_client, "verdict_decision", triage_run, {**override, **extra},
                     htmx=htmx)
            assert r.status_code == 409, r.content[:300]
            text = r.content.decode()
            assert "needs your confirmation" in text and critical.key in text
            assert f"{critical.key} \u201c{critical.title[:40]}" in text
    assert fingerprint(review) == before  # nothing was decided
    # The refusal keeps what was typed, and the confirmation is offered right there.
    assert ">Tool runs in a sandbox</textarea>" in text and 'id="critical-confirm"' in text
    # Confirmed: approved, as an override with its reason.
    r = post(alice_client, "verdict_decision", triage_run,
             {**override, "confirm_critical": critical.key})
    assert r.status_code == 200, r.content[:400]
    review.refresh_from_db()
    assert (review.final_verdict, review.verdict_reason) == ("approve", "Tool runs in a sandbox")


def test_a_verdict_other_than_approve_needs_no_confirmation(alice_client, triage_run):  # noqa: F811
    review = review_of(triage_run)
    finalise_all(alice_client, triage_run, "accepted")  # the critical one accepted too
    review.refresh_from_db()
    assert review.final_verdict == "request_changes"


@pytest.mark.parametrize("value", ["x" * 2001, "SEC-1\x00"])
def test_a_bad_confirmation_is_refused_in_words(alice_client, triage_run, value):  # noqa: F811
    review = review_of(triage_run)
    triage.settle_rest(review, "accepted", review.owner)
    before = fingerprint(review)
    r = post(alice_client, "verdict_decision", triage_run,
             {"action": "override", "verdict": "approve", "reason": "r",
              "seq": triage_run.stage_seq, "confirm_critical": value})
    assert r.status_code == 400 and b'class="error" role="alert"' in r.content
    assert fingerprint(review) == before


# --- a clustered finding holds every place it folded (issue 36) ------------------------------------
def _cluster(review) -> tuple[Finding, list[Finding]]:
    """Give the first kept finding two places folded into it (one in another file)."""
    leader = kept(review)[0]
    places = []
    for n, (path, line) in enumerate([(leader.file, 40), ("lib/other.py", 7)], 1):
        places.append(Finding.objects.create(
            review=review, key=f"{leader.key}-P{n}", position=900 + n, kept=False,
            drop_reason=f"Clustered into {leader.key}", duplicate_of=leader.key,
            category=leader.category, severity=leader.severity, file=path, line=line,
            title=leader.title, reviewer=leader.reviewer, rules=leader.rules,
            fingerprint=f"{n:040d}"))
    leader.locations = [{"file": leader.file, "line": leader.line, "end_line": None,
                         "key": leader.key}] + [
        {"file": p.file, "line": p.line, "end_line": None, "key": p.key} for p in places]
    leader.save(update_fields=["locations"])
    return leader, places


def test_rejecting_a_clustered_finding_rejects_every_place_it_holds(
        alice_client, alice, triage_run):  # noqa: F811
    from reviews_app.models import Memory

    review = review_of(triage_run)
    leader, places = _cluster(review)
    post(alice_client, "finding_decision", triage_run,
         {"decision": "rejected", "comment": "generated code", "reason": "intended"},
         leader.key)
    for p in places:
        p.refresh_from_db()
        assert (p.decision, p.comment, p.reject_reason, p.decided_by) == (
            "rejected", "generated code", "intended", alice)
    [d] = TriageDecision.objects.filter(review=review)
    assert d.changes == [{"finding": leader.key, "before": "pending", "after": "rejected",
                          "reason": "intended", "places": [p.key for p in places]}]
    assert f"{leader.key} and the 2 places it held (not triaged → rejected)" in \
        triage.describe(d)
    # one suggested memory per file the cluster holds a place in
    globs = set(Memory.objects.filter(owner=alice).values_list("path_glob", flat=True))
    assert len(globs) == 2 and "lib/**" in globs, globs
    # each place's fingerprint is now among the rejected ones a pull request's next round
    # suppresses (prflow.inputs.suppressed reads exactly these rows)
    rejected = set(review.findings.filter(decision="rejected").exclude(fingerprint="")
                   .values_list("fingerprint", flat=True))
    assert {p.fingerprint for p in places} <= rejected
    # undoing the rejection undoes it everywhere and withdraws the suggestions
    post(alice_client, "finding_decision", triage_run, {"decision": "pending"}, leader.key)
    assert {p.decision for p in Finding.objects.filter(pk__in=[p.pk for p in places])} == {
        "pending"}
    assert not Memory.objects.filter(owner=alice, status="pending").exists()


def test_rejecting_the_rest_rejects_the_places_the_rest_hold(alice_client, triage_run):  # noqa: F811
    review = review_of(triage_run)
    leader, places = _cluster(review)
    post(alice_client, "settle_rest", triage_run, {"decision": "rejected"})
    assert {p.decision for p in Finding.objects.filter(pk__in=[p.pk for p in places])} == {
        "rejected"}
    [d] = TriageDecision.objects.filter(review=review)
    held = [c for c in d.changes if c.get("places")]
    assert held == [{"finding": leader.key, "before": "pending", "after": "rejected",
                     "places": [p.key for p in places]}]
