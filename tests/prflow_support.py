"""Shared by the pull-request flow tests: a FakeHost behind ``reviews_app.hosting.client_for``,
a connection, deliveries, and stand-ins for the parts merged later.

Until the hosts and hooks parts are merged, ``reviews_app.hosting.fetch.pull_input`` and
``reviews_app.connections.secrets.repo_ref`` get small stand-ins here (only when missing), so
after the merge these tests run against the real ones."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from agents_app import engine
from reviews_app import hosting
from reviews_app.hosting.base import RepoRef
from reviews_app.models import Connection, WebhookDelivery
from reviews_app.prflow import handle_delivery
from tests.fake_host import FakeHost

BASE, HEAD, HEAD2 = "b" * 40, "1" * 40, "2" * 40
SQL = ["import sqlite3", "", "def find(db, uid):",
       '    return db.execute("select * from users where id = %s" % uid)', ""]
APP = "\n".join(SQL) + "\n"
CLEAN = APP.replace('"select * from users where id = %s" % uid',
                    '"select * from users where id = ?", (uid,)')


# --- stand-ins for the parts merged later -------------------------------------------------------
def _stand_in_pull_input(client, number, *, head_sha, from_sha=None, max_bytes, max_files,
                         max_file_bytes):
    pr_files = client.pull_files(number)
    files = client.compare(from_sha, head_sha) if from_sha else pr_files
    ours = {f.path for f in pr_files}
    diff, contents = [], {}
    for f in files:
        if f.path not in ours:
            continue
        old = "/dev/null" if f.status == "added" else f"a/{f.path}"
        new = "/dev/null" if f.status == "removed" else f"b/{f.path}"
        diff.append(f"diff --git a/{f.path} b/{f.path}\n--- {old}\n+++ {new}\n{f.patch}")
        if f.status != "removed":
            data = client.file_bytes(head_sha, f.path, max_bytes=max_file_bytes)
            contents[f.path] = data.decode() if data is not None else None
    return types.SimpleNamespace(diff_text="".join(diff), contents=contents, coverage=[])


def _stand_in(name: str, **attrs):
    try:
        importlib.import_module(name)
        return None
    except ImportError:
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        return mod


@pytest.fixture
def host(monkeypatch):
    fake = FakeHost()
    monkeypatch.setattr(hosting, "client_for", lambda ref: fake, raising=False)
    if mod := _stand_in("reviews_app.hosting.fetch", pull_input=_stand_in_pull_input):
        monkeypatch.setitem(sys.modules, "reviews_app.hosting.fetch", mod)
    if _stand_in("reviews_app.connections.secrets") is not None:
        def repo_ref(conn):
            return RepoRef(conn.provider, conn.api_url, conn.repository, token="t0ken")
        pkg = types.ModuleType("reviews_app.connections")
        pkg.__path__ = []
        monkeypatch.setitem(sys.modules, "reviews_app.connections", pkg)
        monkeypatch.setitem(sys.modules, "reviews_app.connections.secrets",
                            types.SimpleNamespace(repo_ref=repo_ref))
    monkeypatch.setenv("QUORUM_TEST_HOST_TOKEN", "t0ken")
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)
    return fake


@pytest.fixture
def conn(alice):
    return Connection.objects.create(owner=alice, provider="github", repository="octo/demo",
                                     api_url="https://host.invalid",
                                     token_env="QUORUM_TEST_HOST_TOKEN")


_ids = iter(range(1, 10_000))


def deliver(conn, event="opened", number=7, head=HEAD, **kw):
    d = WebhookDelivery.objects.create(connection=conn, delivery_id=f"d-{next(_ids)}",
                                       event=event, number=number, head_sha=head, **kw)
    return d, handle_delivery(d.pk, enqueue=False)


def open_pull(host, base=None, head=None, **kw):
    base = base or {"README.md": "hi\n"}
    return host.set_pull(7, base=base, head=head or {**base, "app.py": APP},
                         base_sha=BASE, head_sha=HEAD, **kw)


