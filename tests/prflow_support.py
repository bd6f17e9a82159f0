"""Shared by the pull-request flow tests: a FakeHost behind ``reviews_app.hosting.client_for``
(the real ``pull_input`` and ``repo_ref`` run), a connection, and deliveries."""

from __future__ import annotations

import pytest

from agents_app import engine
from reviews_app import hosting
from reviews_app.models import Connection, WebhookDelivery
from reviews_app.prflow import handle_delivery
from reviews_app.prflow import status as commit_status
from tests.fake_host import FakeHost

BASE, HEAD, HEAD2 = "b" * 40, "1" * 40, "2" * 40
SQL = ["import sqlite3", "", "def find(db, uid):",
       '    return db.execute("select * from users where id = %s" % uid)', ""]
APP = "\n".join(SQL) + "\n"
CLEAN = APP.replace('"select * from users where id = %s" % uid',
                    '"select * from users where id = ?", (uid,)')


@pytest.fixture
def host(monkeypatch):
    fake = FakeHost()
    monkeypatch.setattr(hosting, "client_for", lambda ref: fake, raising=False)
    monkeypatch.setenv("QUORUM_CONN_TEST_HOST_TOKEN", "t0ken")
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)
    fake.status_tasks = []  # the commit-status tasks sent (not run: tests run them by hand)
    monkeypatch.setattr(commit_status, "send",
                        lambda pk, countdown=None: fake.status_tasks.append((pk, countdown)))
    return fake


@pytest.fixture
def conn(alice):
    return Connection.objects.create(owner=alice, provider="github", repository="octo/demo",
                                     api_url="https://host.invalid",
                                     token_env="QUORUM_CONN_TEST_HOST_TOKEN")


_ids = iter(range(1, 10_000))


def deliver(conn, event="opened", number=7, head=HEAD, **kw):
    d = WebhookDelivery.objects.create(connection=conn, delivery_id=f"d-{next(_ids)}",
                                       event=event, number=number, head_sha=head, **kw)
    return d, handle_delivery(d.pk, enqueue=False)


def open_pull(host, base=None, head=None, **kw):
    base = base or {"README.md": "hi\n"}
    return host.set_pull(7, base=base, head=head or {**base, "app.py": APP},
                         base_sha=BASE, head_sha=HEAD, **kw)


