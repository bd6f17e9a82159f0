"""A delivery never waits on a provider (issue 31). On the default SQLite a transaction holds
the database's one write lock: when a round was started inside a transaction that also
fetched the pull request, every other delivery and every triage click waited for the fetch
(and, past 30 s, failed with "database is locked"; past GitHub's 10 s, the delivery was lost).

On each provider the fake takes 5 s to list a pull request's files while a worker thread starts
the round; meanwhile a delivery for the same pull request, one for another, and a triage
click are each answered in under a second. Everything is real but the code host: the
receiver, the delivery's handling, the database file shared by the threads."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.urls import reverse

from agents_app.models import Status
from common import sealed
from reviews_app.connections import webhook
from reviews_app.models import Connection, Finding, Review, WebhookDelivery
from reviews_app.prflow import handle_delivery
from reviews_app.prflow import status as commit_status
from tests.fake_hosts import FakeHosts
from tests.publishing_fixtures import make_review
from tests.waiting import wait_until
from tests.webhook_helpers import SECRET, forgejo_pr, github_pr, gitlab_mr, post

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "slow-host-token"  # noqa: S105 - test fixture
FETCH_SECONDS = 5.0


@pytest.fixture
def hosts():
    with FakeHosts(token=TOKEN) as fake:
        fake.add_repo("octo/demo")
        for n in (7, 8):
            fake.open_pull(n, base={"README.md": "hi\n"},
                           head={"app.py": f"x = {n}\n"}, head_ref=f"feature-{n}")
        yield fake


FILES = {"github": "/pulls/7/files", "gitlab": "/merge_requests/7/diffs",
         "forgejo": "/pulls/7/files"}


def hook(provider: str, number: int, sha: str) -> tuple[dict, str]:
    if provider == "gitlab":
        return gitlab_mr("update", iid=number, sha=sha, repo="octo/demo",
                         oldrev="0" * 40), "Merge Request Hook"
    if provider == "forgejo":
        return forgejo_pr("synchronized", number=number, sha=sha, repo="octo/demo"), \
            "pull_request"
    return github_pr("synchronize", number=number, sha=sha, repo="octo/demo"), "pull_request"


@pytest.mark.parametrize("provider", ["github", "gitlab", "forgejo"])
def test_deliveries_and_a_triage_click_are_answered_while_a_fetch_takes_seconds(
        alice_client, alice, hosts, monkeypatch, provider):
    monkeypatch.setenv("QUORUM_CONN_SLOW_TOKEN", TOKEN)
    queued: list[int] = []
    monkeypatch.setattr(webhook, "_enqueue", queued.append)
    monkeypatch.setattr(commit_status, "send", lambda pk, countdown=None: None)
    conn = Connection.objects.create(owner=alice, provider=provider, repository="octo/demo",
                                     api_url=hosts.api_url(provider),
                                     token_env="QUORUM_CONN_SLOW_TOKEN",
                                     secret_sealed=sealed.seal(SECRET), bot_login="quorum-bot")
    review = make_review(alice)  # a review waiting for triage, for the click
    review.run.status = Status.AWAITING_TRIAGE
    review.run.save(update_fields=["status"])
    hosts.slow(FILES[provider], FETCH_SECONDS, times=1)
    first = WebhookDelivery.objects.create(connection=conn, delivery_id="slow-1",
                                           event="opened", number=7)
    outcome = {}

    def work():
        try:
            outcome["round"] = handle_delivery(first.pk, enqueue=False)
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    wait_until(lambda: any(r.endswith(FILES[provider]) for r in hosts.routes()), timeout=10,
               what="the worker's slow fetch of the files")
    started = time.monotonic()
    answers = {}
    for what, send in (
            ("same pull request", lambda: post(alice_client, conn,
                                               *hook(provider, 7, hosts.pull(7).head_sha))),
            ("another pull request", lambda: post(alice_client, conn,
                                                  *hook(provider, 8, hosts.pull(8).head_sha))),
            ("triage click", lambda: alice_client.post(
                reverse("finding_decision", args=[review.run_id, "SEC-1"]),
                {"decision": "accepted"}))):
        t0 = time.monotonic()
        response = send()
        answers[what] = (response.status_code, round(time.monotonic() - t0, 3))
    during = time.monotonic() - started < FETCH_SECONDS and worker.is_alive()
    worker.join(timeout=60)
    assert during, "the answers were not all given while the fetch ran"
    assert [code for code, _ in answers.values()] == [202, 202, 302], answers
    assert all(seconds < 1.0 for _, seconds in answers.values()), answers
    # Nothing was lost: both deliveries queued, the click recorded, the round started.
    assert len(queued) == 2
    assert Finding.objects.get(review=review, key="SEC-1").decision == "accepted"
    assert outcome["round"].status == "done" and outcome["round"].run_id, outcome
    assert Review.objects.filter(pull_request__connection=conn).count() == 1
