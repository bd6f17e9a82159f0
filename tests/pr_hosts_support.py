"""The pull-request flow against the fake provider servers over HTTP (``tests/fake_hosts``),
with the real provider clients, the real delivery handling and publishing, and the tasks run
in the test's own thread: a connection per provider, deliveries, rounds through the engine
with the offline model, triage, and the publications and commit statuses the flow sends."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from django.utils import timezone

from agents_app import engine
from agents_app.models import Run
from reviews_app.connections import webhook
from reviews_app.models import CommitStatus, Connection, Publication, Review, WebhookDelivery
from reviews_app.prflow import handle_delivery
from reviews_app.prflow import status as commit_status
from reviews_app.prflow.publishing import dispatch, worker
from reviews_app.triage import service as triage
from tests.fake_hosts import FakeHosts

TOKEN = "fake-host-token-1234"  # noqa: S105 - test fixture
ENV = "QUORUM_CONN_FAKE_HOST_TOKEN"
PROVIDERS = ["github", "gitlab", "forgejo"]
REPOS = {"github": "octo/shop", "gitlab": "team/sub/shop", "forgejo": "octo/shop"}
BASE = {"README.md": "Shop\n", "shop/__init__.py": ""}
ORDERS = ("import sqlite3\n\n\ndef order(db, oid):\n"
          '    return db.execute("select * from orders where id = %s" % oid)\n')
ORDERS_FIXED = ("import sqlite3\n\n\ndef order(db, oid):\n"
                '    return db.execute("select * from orders where id = ?", (oid,))\n')
_ids = itertools.count(1)


@dataclass
class Flow:
    """One provider's connection on the fake server, and the tasks the flow sent."""

    hosts: FakeHosts
    conn: Connection
    provider: str
    publications: list[int] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)

    @property
    def repo(self) -> str:
        return REPOS[self.provider]

    def pull(self, number: int = 1):
        return self.hosts.pull(number, self.repo)

    def deliver(self, event: str = "opened", number: int = 1, *, sender: str = "carol",
                fresh: bool = False):
        d = WebhookDelivery.objects.create(connection=self.conn, delivery_id=f"d{next(_ids)}",
                                           event=event, number=number, sender=sender,
                                           fresh=fresh)
        out = handle_delivery(d.pk, enqueue=False)
        d.refresh_from_db()
        return d, out

    def round(self, out) -> Review:
        """The round ``out`` started, run to its triage gate by the engine."""
        assert out.run_id, out.detail
        run = engine.run_inline(out.run_id)
        assert run.status == "awaiting_triage", (run.status, run.error)
        self.drain()
        return Review.objects.get(run=run)

    def finalise(self, review: Review, user, *, accept: bool = True) -> Review:
        triage.settle_rest(review, "accepted" if accept else "rejected", user)
        triage.finalise(review, user, action="accept",
                        seq=Run.objects.get(pk=review.run_id).stage_seq)
        engine.run_inline(review.run_id)  # the decision's continuation: the review closes
        self.drain()
        return Review.objects.get(pk=review.pk)

    def drain(self) -> None:
        """Run the publications and status syncs the flow sent, until none is left; a retry
        sent for later is run now (its time brought forward)."""
        for _ in range(20):
            if not self.publications and not self.statuses:
                return
            while self.publications:
                pk = self.publications.pop(0)
                Publication.objects.filter(pk=pk, status=Publication.Status.RETRYING).update(
                    next_attempt_at=timezone.now())
                worker.run(pk)
            while self.statuses:
                pk = self.statuses.pop(0)
                CommitStatus.objects.filter(pk=pk).update(next_attempt_at=None)
                commit_status.sync(pk)

    def status(self, sha: str) -> CommitStatus | None:
        return CommitStatus.objects.filter(pull_request__connection=self.conn,
                                           head_sha=sha).first()


def top_level_notes(flow: Flow, number: int = 1) -> list[dict]:
    """The pull request's conversation comments (GitLab: its notes that are not on a line)."""
    return list(flow.pull(number).comments)


@pytest.fixture
def hosts():
    with FakeHosts(token=TOKEN) as fake:
        for name in set(REPOS.values()):
            fake.add_repo(name)
        yield fake


@pytest.fixture
def make_flow(hosts, alice, monkeypatch):
    """``make_flow(provider, **connection fields)``: a connection on the fake server whose
    publications and status syncs are collected, to be run by ``Flow.drain``."""
    monkeypatch.setenv(ENV, TOKEN)
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)
    monkeypatch.setattr(webhook, "_enqueue", lambda pk: None)  # deliveries run by hand
    flows: list[Flow] = []
    monkeypatch.setattr(dispatch, "send", lambda pk, countdown=None: [
        f.publications.append(pk) for f in flows[-1:]])
    monkeypatch.setattr(commit_status, "send", lambda pk, countdown=None: [
        f.statuses.append(pk) for f in flows[-1:]])

    def make(provider: str, **fields) -> Flow:
        conn = Connection.objects.create(owner=alice, provider=provider,
                                         repository=REPOS[provider],
                                         api_url=hosts.api_url(provider), token_env=ENV,
                                         **fields)
        flow = Flow(hosts, conn, provider)
        flows.append(flow)
        return flow

    return make
