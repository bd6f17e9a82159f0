"""Forks of code reviews (issue 33) through the real engine with the offline model: a fork is a
review of its own (its input copied; the findings of a fork from the triage gate copied with
every decision pending, those of an earlier fork made by its own synthesis); a fork from the
synthesis may start with one reviewer's findings edited; a fork of a pull request's review
publishes nothing and moves no commit status unless a person presses Publish."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.forking import checkpoints
from agents_app.forking.create import ForkRefused, create_fork
from agents_app.models import RUNNABLE, Checkpoint, ModelCall, Run
from agents_app.patterns import get_pattern
from reviews_app import services
from reviews_app.models import CommitStatus, Publication, Review
from reviews_app.prflow import delivery
from reviews_app.prflow.publishing import dispatch
from reviews_app.triage import service as triage
from tests import prflow_support as support
from tests.prflow_support import deliver, open_pull
from tests.review_corpus import GOOD

pytestmark = pytest.mark.django_db(transaction=True)
host, conn = support.host, support.conn  # the fixtures


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    """No task leaves: the scheduler, the publish tasks (recorded) and status tasks."""
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)
    published: list[int] = []
    monkeypatch.setattr(dispatch, "send", lambda pk, countdown=None: published.append(pk))
    return published


def drive(run_id: int) -> Run:
    engine.run_inline(run_id)
    while Run.objects.get(pk=run_id).status in RUNNABLE:
        engine.run_inline(run_id)
    return Run.objects.get(pk=run_id)


def at_triage(user) -> Run:
    inp = services.from_text(GOOD)
    run = drive(services.start_review(user, inp, services.prepare(inp), enqueue=False).pk)
    assert run.status == "awaiting_triage", run.error
    return run


def seq_of(run: Run, stage: str, gate: str = "") -> int:
    return Checkpoint.objects.get(run=run, stage=stage, gate=gate).seq


def rows(review: Review) -> list[tuple]:
    return list(review.findings.order_by("position").values_list(
        "key", "kept", "severity", "title", "file", "line", "fingerprint"))


def finalise(review: Review, user) -> Review:
    triage.settle_rest(review, "accepted", user)
    run = Run.objects.get(pk=review.run_id)
    triage.finalise(review, user, action="accept", seq=run.stage_seq,
                    confirmed_critical=[f.key for f in triage.accepted_critical(review)])
    drive(run.pk)
    review.refresh_from_db()
    return review


# --- a fork is a review of its own ----------------------------------------------------------------
def test_a_fork_from_the_triage_gate_is_a_new_triage_of_the_same_findings(alice, alice_client):
    parent = at_triage(alice)
    original = Review.objects.get(run=parent)
    keys = list(original.findings.filter(kept=True).values_list("key", flat=True))
    assert len(keys) >= 2
    triage.decide_finding(original, keys[0], alice, "accepted", comment="yes")
    triage.decide_finding(original, keys[1], alice, "rejected", reason="wrong")
    child = create_fork(parent, alice, seq=parent.stage_seq, enqueue=False)
    child.refresh_from_db()
    assert child.status == "awaiting_triage"
    review = Review.objects.get(run=child)
    assert review.pk != original.pk and review.owner == alice
    for name in ("source_kind", "source_label", "source_meta", "diff_text", "files",
                 "coverage", "total_files", "reviewers", "proposed_verdict", "rule_verdict",
                 "summary", "notes", "counts"):
        assert getattr(review, name) == getattr(original, name), name
    assert rows(review) == rows(original)
    assert set(review.findings.values_list("decision", "comment", "reject_reason",
                                           "decided_by")) == {("pending", "", "", None)}
    assert (review.final_verdict, review.triage_version, review.decisions.count()) == ("", 0, 0)
    # The fork's triage is its own: the original keeps its decisions and its gate.
    review = finalise(review, alice)
    assert review.final_verdict and Run.objects.get(pk=child.pk).status == "completed"
    original.refresh_from_db()
    assert original.final_verdict == "" and Run.objects.get(pk=parent.pk).status == \
        "awaiting_triage"
    assert original.findings.get(key=keys[0]).decision == "accepted"
    assert original.findings.filter(kept=True, decision="pending").count() == len(keys) - 2
    assert alice_client.get(reverse("review_detail", args=[child.pk])).status_code == 200


def test_a_fork_from_before_the_synthesis_makes_its_own_findings(alice):
    parent = at_triage(alice)
    original = Review.objects.get(run=parent)
    child = create_fork(parent, alice, seq=seq_of(parent, "review"), enqueue=False)
    review = Review.objects.get(run=child)
    assert review.findings.count() == 0 and review.proposed_verdict == ""
    assert review.reviewers == {} and review.diff_text == original.diff_text
    child = drive(child.pk)
    assert child.status == "awaiting_triage", child.error
    review.refresh_from_db()
    assert rows(review) == rows(original)  # the offline reviewers answer the same
    assert review.reviewers.keys() == original.reviewers.keys()
    assert not ModelCall.objects.filter(run=child, stage="analyze").exists()


def test_a_fork_from_the_synthesis_with_one_reviewers_findings_edited(alice):
    parent = at_triage(alice)
    cp = seq_of(parent, "synthesize")
    state = checkpoints.state_at(Checkpoint.objects.get(run=parent, seq=cp))
    edit = get_pattern("code_review").fork_edit("synthesize", "", state)
    reviewer = edit.value["reviewer"]
    theirs = edit.value["findings"]
    assert theirs, "the offline reviewer found something to edit"
    changed = {**theirs[0], "severity": "critical", "title": "Edited: a real injection"}
    added = {"category": reviewer, "severity": "high", "file": "app/users.py", "line": 3,
             "title": "Added by a person", "description": "Checked by hand.",
             "suggestion": "Pass the arguments as a list, without a shell.",
             "confidence": 0.9, "rules": []}
    child = create_fork(parent, alice, seq=cp, enqueue=False, edits={
        "reviewer": reviewer, "findings": [changed, added]})
    mine = [f for f in child.state["findings"] if f["reviewer"] == reviewer]
    by_key = {f["key"]: f for f in mine}
    assert by_key[changed["key"]]["title"] == "Edited: a real injection"
    assert "edited by alice when this review was forked" in by_key[changed["key"]]["history"]
    new = [f for f in mine if f["title"] == "Added by a person"]
    assert len(new) == 1 and new[0]["key"] not in {f["key"] for f in theirs}
    for f in theirs[1:]:
        assert by_key[f["key"]]["status"] == "dropped"
        assert by_key[f["key"]]["drop_reason"] == "removed by alice when this review was forked"
    child = drive(child.pk)
    assert child.status == "awaiting_triage", child.error
    assert {c.stage for c in ModelCall.objects.filter(run=child)} == {"synthesize"}
    review = Review.objects.get(run=child)
    titles = dict(review.findings.filter(kept=True).values_list("title", "severity"))
    assert titles.get("Edited: a real injection") == "critical"
    assert "Added by a person" in titles  # it went through the synthesis like a reviewer's
    assert Review.objects.get(run=parent).findings.filter(
        title="Edited: a real injection").count() == 0
    # The edit as shown, unchanged, changes nothing.
    same = create_fork(parent, alice, seq=cp, enqueue=False, edits=edit.value)
    assert same.state["findings"] == state["findings"]


@pytest.mark.parametrize(("change", "message"), [
    ({"reviewer": "performance"}, "This review has no reviewer 'performance'"),
    ({"findings": [{"severity": "urgent"}]}, "The edit is not valid"),
    ({"findings": [{"file": "elsewhere.py"}]}, "elsewhere.py is not a file of this change"),
    ({"findings": [{"key": "SEC-99"}]}, "SEC-99 is not one of the"),
    ({"findings": [{"title": "a\x00b"}]}, "control characters"),
    ({"findings": [{"description": "d" * 4001}]}, "the limit is 4,000"),
    ({"findings": [{"line": 9, "end_line": 3}]}, "before its first"),
])
def test_bad_edits_of_a_reviewers_findings_are_refused(alice, change, message):
    parent = at_triage(alice)
    cp = seq_of(parent, "synthesize")
    base = {"category": "security", "severity": "high", "file": "app/users.py", "line": 3,
            "title": "A finding", "confidence": 0.9}
    edits = {"reviewer": "security", "findings": [base]}
    if "reviewer" in change:
        edits["reviewer"] = change["reviewer"]
    else:
        edits["findings"] = [{**base, **f} for f in change["findings"]]
    before = (Run.objects.count(), Review.objects.count())
    with pytest.raises(ForkRefused) as refused:
        create_fork(parent, alice, seq=cp, enqueue=False, edits=edits)
    assert message in str(refused.value), str(refused.value)
    assert (Run.objects.count(), Review.objects.count()) == before


def test_a_review_cannot_be_forked_after_its_verdict_and_has_nothing_to_edit_elsewhere(alice):
    parent = at_triage(alice)
    finalise(Review.objects.get(run=parent), alice)
    close = Checkpoint.objects.get(run=parent, stage="close", gate="")
    with pytest.raises(ForkRefused) as refused:
        create_fork(parent, alice, seq=close.seq, enqueue=False)
    assert "Fork the review from its triage gate" in str(refused.value)
    with pytest.raises(ForkRefused) as refused:
        create_fork(parent, alice, seq=seq_of(parent, "review"), enqueue=False,
                    edits={"reviewer": "security", "findings": []})
    assert "Nothing can be edited" in str(refused.value)
    # From its triage gate it forks: a new triage after the first one was finalised.
    again = create_fork(parent, alice, seq=seq_of(parent, "close", "triage"), enqueue=False)
    assert Run.objects.get(pk=again.pk).status == "awaiting_triage"


# --- a pull request's review: a fork never publishes on its own -------------------------------------
def pr_review(conn, host, policy: str) -> Run:
    conn.publish_policy = policy
    conn.save()
    open_pull(host)
    _, out = deliver(conn)
    assert out.run_id, out.detail
    run = drive(out.run_id)
    assert run.status == "awaiting_triage", run.error
    return run


def statuses() -> list[tuple]:
    return list(CommitStatus.objects.order_by("pk").values_list("pk", "review_id", "version"))


def test_a_fork_of_a_pull_requests_review_publishes_only_when_a_person_does(
        alice, alice_client, conn, host, quiet):
    parent = pr_review(conn, host, "after_triage")
    original = Review.objects.get(run=parent)
    before = statuses()
    assert [r for _, r, _ in before] == [original.pk]  # the round's status is the original's
    sent_before = list(host.status_tasks)
    child = create_fork(parent, alice, seq=parent.stage_seq, enqueue=False)
    review = Review.objects.get(run=child)
    assert review.pull_request_id == original.pull_request_id
    assert (review.pr_round, review.head_sha, review.base_sha) == (
        original.pr_round, original.head_sha, original.base_sha)
    review = finalise(review, alice)  # "after triage" publishes an original here, not a fork
    assert review.final_verdict and not Publication.objects.exists() and not quiet
    assert statuses() == before and host.status_tasks == sent_before
    page = alice_client.get(reverse("review_detail", args=[child.pk])).content.decode()
    assert "This review is a fork" in page and "Publish now" in page
    # The person presses Publish: now it publishes.
    pub, notice = dispatch.publish_now(review, alice)
    assert pub.review_id == review.pk and pub.trigger == "manual" and quiet == [pub.pk]
    # The pull request's next round builds on the original round, not on the fork.
    pr = original.pull_request
    assert delivery._previous(pr).pk == original.pk
    assert delivery._reviewed(pr, original.head_sha).pk == original.pk


def test_an_automatic_policy_publishes_no_fork_at_its_synthesis(alice, conn, host, quiet):
    parent = pr_review(conn, host, "automatic")
    automatic = list(Publication.objects.values_list("review__run_id", "trigger"))
    assert automatic == [(parent.pk, "automatic")]  # the original, when it was synthesized
    before = statuses()
    child = drive(create_fork(parent, alice, seq=seq_of(parent, "synthesize"),
                              enqueue=False).pk)
    assert child.status == "awaiting_triage", child.error
    review = Review.objects.get(run=child)
    assert review.proposed_verdict and review.findings.exists()
    assert list(Publication.objects.values_list("review__run_id", "trigger")) == automatic
    assert statuses() == before
    review = finalise(review, alice)
    assert Publication.objects.filter(review=review).count() == 0
    pub, _ = dispatch.publish_now(review, alice)  # a person's Publish, under "automatic" too
    assert pub.review_id == review.pk and pub.trigger == "manual"
    with pytest.raises(dispatch.Refused):  # the original was published automatically
        dispatch.publish_now(Review.objects.get(run=parent), alice)


def test_a_review_is_not_replayed_and_its_triage_is_never_reused(alice):
    parent = at_triage(alice)
    finalise(Review.objects.get(run=parent), alice)
    with pytest.raises(ForkRefused) as refused:
        create_fork(parent, alice, kind="replay", enqueue=False)
    assert "A code review cannot be replayed" in str(refused.value)
    child = create_fork(parent, alice, seq=seq_of(parent, "close", "triage"),
                        gates={"triage": "reuse"}, enqueue=False)
    child.refresh_from_db()
    assert child.status == "awaiting_triage"  # its findings are pending: a person triages
    assert Review.objects.get(run=child).final_verdict == ""


def test_a_fork_from_every_stage_before_the_verdict_reaches_its_triage(alice):
    parent = at_triage(alice)
    original = Review.objects.get(run=parent)
    points = list(Checkpoint.objects.filter(run=parent).order_by("seq"))
    assert [(c.stage, c.gate) for c in points] == [
        ("analyze", ""), ("review", ""), ("reflect", ""), ("verify", ""), ("synthesize", ""),
        ("close", "triage")]
    for cp in points:
        child = drive(create_fork(parent, alice, seq=cp.seq, enqueue=False).pk)
        assert child.status == "awaiting_triage", (cp.stage, child.error)
        review = Review.objects.get(run=child)
        assert rows(review) == rows(original), cp.stage
        assert review.proposed_verdict == original.proposed_verdict
