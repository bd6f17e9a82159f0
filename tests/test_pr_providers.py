"""Pull requests as GitHub, GitLab and Forgejo/Gitea really behave (issue 31), against the fake
provider servers over HTTP with the real clients, delivery handling, engine (offline model,
ruff and bandit) and publishing; the tasks run in the test's thread (tests/pr_hosts_support.py).

The scenario the issue is done by, on each provider: two pushes and two ``/quorum review``
comments (one by Quorum's own account) give exactly one top-level note, no duplicate review
or comment, no review started by the bot, and a required "Quorum" status that is green only
after a person finalised an approving verdict — with a write the provider saved but answered
502 thrown in. (Every delivery answered in under a second while a slow fetch runs:
tests/test_pr_slow_provider.py.)"""

from __future__ import annotations

import pytest

from reviews_app.hosting.base import FINGERPRINT_MARKER, REVIEW_MARKER, SUMMARY_MARKER
from reviews_app.hosting.summary import STATUS_MARKER
from reviews_app.models import Review, WebhookDelivery
from tests.pr_hosts_support import (
    BASE,
    ORDERS,
    ORDERS_FIXED,
    PROVIDERS,
    hosts,
    make_flow,
    top_level_notes,
)

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["hosts", "make_flow"]  # the fixtures


def fingerprints(pull) -> list[str]:
    found = []
    for c in pull.review_comments:
        found += [fp for fp in [c["body"].split("fingerprint=")[-1].split(" ")[0]]
                  if FINGERPRINT_MARKER.split("{")[0] in c["body"]]
    return found


def reviews_posted(flow) -> list[dict]:
    """Reviews on the pull request (GitLab has none: its discussions stand for one)."""
    return [r for r in flow.pull().reviews if r.get("provider") != "gitlab"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_pushes_two_commands_one_note_and_a_status_green_only_after_approval(
        make_flow, alice, provider):
    flow = make_flow(provider)
    hosts = flow.hosts
    pull = hosts.open_pull(1, repo=flow.repo, base=BASE, head={"shop/orders.py": ORDERS},
                           title="Orders")
    first_head = pull.head_sha

    # Round 1: the injection is found; the status is pending while a person triages. The
    # provider saves the status note but answers 502: later writes find it, not add one.
    note_ghost = hosts.ghost("/notes" if provider == "gitlab" else "/issues/1/comments")
    d, out = flow.deliver("opened")
    assert note_ghost.hits == 1 and "could not be written" in d.detail
    review1 = flow.round(out)
    assert not hosts.required_green(1, repo=flow.repo)
    assert hosts.status_states(first_head, repo=flow.repo)[-1] in ("pending", "running",
                                                                   "in_progress")

    # The review itself is saved but answered 502 too: the retry posts no second one.
    review_ghost = hosts.ghost("/discussions" if provider == "gitlab" else "/pulls/1/reviews")
    flow.finalise(review1, alice)  # accepted: request changes
    assert review_ghost.hits == 1
    assert len(top_level_notes(flow)) == 1
    assert not hosts.required_green(1, repo=flow.repo)  # changes requested: red
    assert hosts.status_states(first_head, repo=flow.repo)[-1] in ("failure", "failed",
                                                                   "completed:failure")

    # The bot's own "/quorum review" is never acted on; a person's on a reviewed head points
    # to the review instead of starting another round.
    bot = flow.conn.__class__.objects.get(pk=flow.conn.pk).bot_login
    assert bot == hosts.bot_login
    d, out = flow.deliver("command", sender=bot)
    assert d.status == "ignored" and "own account" in d.detail
    d, out = flow.deliver("command", sender="carol")
    assert d.status == "done" and "reviewed already in round 1" in d.detail
    assert Review.objects.count() == 1

    # Push 1: the injection fixed; the round runs while the summary stays readable.
    hosts.push(1, {"shop/orders.py": ORDERS_FIXED}, repo=flow.repo)
    _, out = flow.deliver("synchronize")
    [note] = top_level_notes(flow)
    assert STATUS_MARKER in note["body"] and "## Quorum review" in note["body"], note["body"]
    review2 = flow.round(out)
    assert review2.proposed_verdict == "approve", review2.notes
    assert not hosts.required_green(1, repo=flow.repo)  # proposed, not yet decided

    # Push 2 before anyone triaged: round 3 supersedes nothing running and waits too.
    hosts.push(1, {"shop/sizes.py": "def size(body):\n    return len(body)\n"},
               repo=flow.repo)
    _, out = flow.deliver("synchronize")
    review3 = flow.round(out)
    assert not hosts.required_green(1, repo=flow.repo)

    # A person approves round 3: only now is the required status green.
    flow.finalise(review3, alice)
    assert review3.pr_round == 3 and Review.objects.get(pk=review3.pk).final_verdict == "approve"
    assert hosts.required_green(1, repo=flow.repo)

    # Exactly one top-level note, edited in place, with the last round's summary.
    [note] = top_level_notes(flow)
    assert SUMMARY_MARKER in note["body"] and STATUS_MARKER not in note["body"]
    assert "Round 3" in note["body"] and "Verdict: Approve" in note["body"]
    # No duplicate review or inline comment; the bot started no review.
    posted = reviews_posted(flow)
    assert len({r["body"] for r in posted}) == len(posted)
    assert all(REVIEW_MARKER.split("{")[0] in r["body"] for r in posted)
    assert len(fingerprints(flow.pull())) == len(set(fingerprints(flow.pull())))
    assert Review.objects.count() == 3
    assert not WebhookDelivery.objects.filter(status="failed").exists()


# --- a comparison the provider refuses ---------------------------------------------------------
COMPARE = {"github": "/compare/", "gitlab": "/repository/compare", "forgejo": "/compare/"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_comparison_reviews_the_whole_pull_request_and_says_so(
        make_flow, alice, alice_client, provider):
    flow = make_flow(provider)
    flow.hosts.open_pull(1, repo=flow.repo, base=BASE, head={"shop/orders.py": ORDERS})
    _, out = flow.deliver("opened")
    flow.round(out)
    flow.hosts.push(1, {"shop/sizes.py": "def size(b):\n    return len(b)\n"}, repo=flow.repo)
    # Gitea 1.22 has answered 404 for two commits of one branch.
    flow.hosts.fail(COMPARE[provider], 404)
    d, out = flow.deliver("synchronize")
    assert d.status == "done" and "full: The provider would not compare" in d.detail, d.detail
    review = flow.round(out)
    assert review.from_sha == "" and review.pr_round == 2
    assert sorted(f["path"] for f in review.files) == ["shop/orders.py", "shop/sizes.py"]
    [why] = [c for c in review.coverage if c["reason"] == "full_round"]
    assert "404" in why["detail"] and why["reviewed"] is True
    page = alice_client.get(review.get_absolute_url()).content.decode()
    assert 'id="full-round"' in page and "would not compare" in page
    # The next command works too (it used to fail the same way every time), and the
    # published summary says why the round was full.
    flow.hosts.push(1, {"shop/more.py": "X = 1\n"}, repo=flow.repo)
    d, out = flow.deliver("command")
    assert d.status == "done" and out.run_id, d.detail
    flow.finalise(flow.round(out), alice)
    [note] = top_level_notes(flow)
    assert "Full round instead of the new commits alone" in note["body"]


# --- who Quorum is on the provider ----------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
def test_quorum_learns_its_account_and_never_acts_on_its_own_command(make_flow, provider,
                                                                     client):
    from tests.webhook_helpers import SECRET, forgejo_comment, github_comment, gitlab_note, post

    flow = make_flow(provider)
    flow.hosts.bot_login = f"quorum-{provider}-bot"
    flow.hosts.open_pull(1, repo=flow.repo, base=BASE, head={"shop/orders.py": ORDERS})
    # Not known yet: the worker asks the provider ("GET /user") and ignores the comment.
    d, out = flow.deliver("command", sender=f"quorum-{provider}-bot")
    assert d.status == "ignored" and f"quorum-{provider}-bot" in d.detail
    assert "/user" in flow.hosts.routes("GET") and not Review.objects.exists()
    flow.conn.refresh_from_db()
    assert flow.conn.bot_login == f"quorum-{provider}-bot"
    # Known now: the receiver ignores it at once, answering 202; a person's is queued.
    flow.conn.secret_sealed = __import__("common.sealed", fromlist=["seal"]).seal(SECRET)
    flow.conn.save()
    comment = {"github": github_comment, "gitlab": gitlab_note, "forgejo": forgejo_comment}
    payload = comment[provider](repo=flow.repo, **({"iid": 1} if provider == "gitlab"
                                                   else {"number": 1}))
    author = ("user", "username") if provider == "gitlab" else ("comment", "user", "login")
    node = payload
    for key in author[:-1]:
        node = node[key]
    for who, expected in ((f"quorum-{provider}-bot", "ignored"), ("carol", "queued")):
        node[author[-1]] = who
        if provider != "gitlab":
            payload["sender"] = {"login": who}
        event = "Note Hook" if provider == "gitlab" else "issue_comment"
        response = post(client, flow.conn, payload, event)
        assert response.status_code == 202, response.content
        latest = WebhookDelivery.objects.order_by("-id").first()
        assert latest.status == expected, (who, latest.detail)


# --- a pull request closed while its review waits for triage ---------------------------------
def test_a_closed_pull_request_is_published_to_only_when_a_person_chooses(
        make_flow, alice, alice_client):
    from django.urls import reverse

    from reviews_app.models import Publication

    flow = make_flow("github")
    flow.hosts.open_pull(1, repo=flow.repo, base=BASE, head={"shop/orders.py": ORDERS})
    _, out = flow.deliver("opened")
    review = flow.round(out)
    flow.pull().state = "merged"
    d, _ = flow.deliver("closed")
    assert "merged" in d.detail and "awaiting triage stay in Quorum" in d.detail
    [note] = top_level_notes(flow)
    assert "stopped: the pull request was merged" in note["body"]
    page = alice_client.get(review.get_absolute_url()).content.decode()
    assert 'id="closed-pr"' in page and "was merged while this review waited" in page
    flow.finalise(review, alice)
    assert not Publication.objects.exists()  # finalising published nothing
    assert flow.pull().reviews == []
    url = reverse("publish_review", args=[review.run_id])
    page = alice_client.get(review.get_absolute_url()).content.decode()
    assert "Publish to the merged pull request" in page
    refused = alice_client.post(url, {"publish": "1"})
    assert refused.status_code == 409 and not Publication.objects.exists()
    chosen = alice_client.post(url, {"publish": "1", "to_closed": "1"})
    assert chosen.status_code == 302
    [pub] = Publication.objects.all()
    assert pub.to_closed and pub.created_by == alice
    flow.drain()
    pub.refresh_from_db()
    assert pub.status == "published" and len(flow.pull().reviews) == 1


def test_a_lost_closed_delivery_still_stops_publishing(make_flow, alice):
    """Our row says open, the provider says closed: the worker asks before it posts."""
    from reviews_app.models import Publication

    flow = make_flow("forgejo")
    flow.hosts.open_pull(1, repo=flow.repo, base=BASE, head={"shop/orders.py": ORDERS})
    _, out = flow.deliver("opened")
    review = flow.round(out)
    flow.pull().state = "closed"  # no delivery said so
    flow.finalise(review, alice)
    [pub] = Publication.objects.all()
    assert pub.status == "failed" and "closed: nothing was published" in pub.last_error
    assert flow.pull().reviews == [] and review.pull_request.__class__.objects.get(
        pk=review.pull_request_id).state == "closed"


# --- the status, by policy and verdict -------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_incomplete_review_never_reports_success(make_flow, alice, provider):
    flow = make_flow(provider)
    # A file no analyzer reads and the offline model cannot read: nobody examined it.
    flow.hosts.open_pull(1, repo=flow.repo, base=BASE,
                         head={"notes/plan.ex": "defmodule Plan do\nend\n"})
    _, out = flow.deliver("opened")
    review = flow.round(out)
    review.refresh_from_db()
    assert review.proposed_verdict != "approve"
    from agents_app.models import Run
    from reviews_app.triage import service as triage

    triage.settle_rest(review, "accepted", alice)
    triage.finalise(review, alice, action="override", verdict="approve",
                    reason="I read it myself", seq=Run.objects.get(pk=review.run_id).stage_seq)
    flow.drain()
    status = flow.status(flow.pull().head_sha)
    assert status.state == "failure" and "incomplete" in status.description
    assert not flow.hosts.required_green(1, repo=flow.repo)


def test_automatic_publishing_is_never_green_without_a_person_and_never_writes_none(
        make_flow, alice):
    auto = make_flow("gitlab", publish_policy="automatic", auto_min_severity="info")
    auto.hosts.open_pull(1, repo=auto.repo, base=BASE,
                         head={"shop/sizes.py": "def size(b):\n    return len(b)\n"})
    _, out = auto.deliver("opened")
    review = auto.round(out)
    assert review.proposed_verdict == "approve"
    assert len(top_level_notes(auto)) == 1  # published automatically
    assert not auto.hosts.required_green(1, repo=auto.repo)  # but a person has not approved
    assert auto.status(auto.pull().head_sha).state == "triage"
    auto.finalise(review, alice)
    assert auto.hosts.required_green(1, repo=auto.repo)
    # "never" posts nothing at all: no note, no review, no status.
    never = make_flow("forgejo", publish_policy="never")
    never.hosts.open_pull(2, repo=never.repo, base=BASE,
                          head={"shop/sizes.py": "def size(b):\n    return len(b)\n"})
    _, out = never.deliver("opened", number=2)
    never.finalise(never.round(out), alice)
    assert never.pull(2).comments == [] and never.pull(2).reviews == []
    assert never.hosts.status_states(never.pull(2).head_sha, repo=never.repo) == []


def test_reopening_triage_takes_the_green_back_and_a_superseded_round_is_cancelled(
        make_flow, alice):
    from reviews_app.triage import service as triage

    flow = make_flow("gitlab")
    flow.hosts.open_pull(1, repo=flow.repo, base=BASE,
                         head={"shop/sizes.py": "def size(b):\n    return len(b)\n"})
    _, out = flow.deliver("opened")
    review = flow.finalise(flow.round(out), alice)
    assert flow.hosts.required_green(1, repo=flow.repo)
    triage.reopen(review, alice, "one more look")
    flow.drain()
    assert not flow.hosts.required_green(1, repo=flow.repo)
    head = flow.pull().head_sha
    # GitLab's state machine was followed (the fake refuses anything else): success only
    # from running, never the same state twice in a row, a new status after a final one.
    states = flow.hosts.status_states(head, repo=flow.repo)
    assert states == ["running", "success", "running"], states
    # A push while a round runs: the old round is cancelled and its head says so.
    flow.hosts.push(1, {"shop/more.py": "X = 1\n"}, repo=flow.repo)
    _, running = flow.deliver("synchronize")
    flow.hosts.push(1, {"shop/more.py": "X = 2\n"}, repo=flow.repo)
    _, out = flow.deliver("synchronize")
    flow.drain()
    cancelled = Review.objects.get(run_id=running.run_id)
    assert cancelled.run.status == "cancelled"
    assert flow.status(cancelled.head_sha).state == "cancelled"
    assert flow.hosts.status_states(cancelled.head_sha, repo=flow.repo)[-1] == "canceled"


# --- rounds a person can follow ----------------------------------------------------------------
def test_a_carried_finding_keeps_its_key_and_decision_while_its_code_is_untouched(
        make_flow, alice, alice_client):
    from reviews_app.models import TriageDecision

    flow = make_flow("github")
    flow.hosts.open_pull(1, repo=flow.repo, base=BASE, head={"shop/orders.py": ORDERS})
    _, out = flow.deliver("opened")
    first = flow.round(out)
    [sql] = [f for f in first.findings.filter(kept=True) if "B608" in f.rules]
    flow.finalise(first, alice)  # accepted
    flow.hosts.push(1, {"shop/sizes.py": "def size(b):\n    return len(b)\n"}, repo=flow.repo)
    _, out = flow.deliver("synchronize")
    second = flow.round(out)
    [carried] = second.findings.filter(carried_from=f"{first.run_id}:{sql.key}")
    assert carried.key == sql.key and carried.kept
    assert carried.decision == "accepted" and carried.decided_by == alice
    assert not second.findings.filter(kept=True, decision="pending").exclude(
        pk=carried.pk).filter(key=sql.key).exists()
    [kept] = TriageDecision.objects.filter(review=second, kind="carry")
    assert kept.changes[0]["finding"] == sql.key and kept.changes[0]["round"] == 1
    # The connection's page links the pull request to both rounds.
    page = alice_client.get(flow.conn.get_absolute_url()).content.decode()
    assert first.get_absolute_url() in page and second.get_absolute_url() in page
    assert "round 1" in page and "round 2" in page


def test_saving_a_connection_asks_the_provider_which_account_the_token_is(
        client, alice, hosts, monkeypatch):
    from django.urls import reverse

    from reviews_app.models import Connection
    from tests.pr_hosts_support import ENV, TOKEN

    monkeypatch.setenv(ENV, TOKEN)
    alice.is_staff = True  # staff may connect a self-hosted API (the fake, on loopback)
    alice.save(update_fields=["is_staff"])
    client.force_login(alice)
    form = {"provider": "forgejo", "repository": "octo/shop", "token_env": ENV,
            "api_url": hosts.api_url("forgejo"), "publish_policy": "after_triage",
            "auto_min_severity": "high", "auto_min_confidence": "0.7",
            "status_comment": "on", "commit_status": "on", "active": "on"}
    response = client.post(reverse("connection_new"), form)
    conn = Connection.objects.get()
    assert response.status_code == 302 and conn.bot_login == "quorum-bot"
    page = client.get(conn.get_absolute_url()).content.decode()
    assert 'id="bot-login"' in page and "<code>quorum-bot</code>" in page
    # A provider that does not answer: the connection is saved, and the page says the first
    # delivery asks again.
    hosts.fail("/user", 500)
    form |= {"repository": "octo/other"}
    response = client.post(reverse("connection_new"), form, follow=True)
    other = Connection.objects.get(repository="octo/other")
    assert other.bot_login == "" and "asks again with the first delivery" in \
        response.content.decode()
