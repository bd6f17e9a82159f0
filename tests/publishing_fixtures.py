"""Shared parts of the publishing tests: FakeHost behind the patched ``client_for`` and
``repo_ref``, the sent tasks, and a review of a pull request with five findings."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from agents_app.models import Run
from reviews_app.hosting import render
from reviews_app.hosting.base import RepoRef
from reviews_app.models import Connection, Finding, PullRequest, Review
from reviews_app.prflow.publishing import dispatch
from reviews_app.triage import service as triage
from tests.fake_host import FakeHost

TOKEN = "ghp_Sup3rS3cretT0kenValue1234567890abcd"  # noqa: S105 - a test value
HEAD = "c0ffee00" * 5
BASE = "ba5e0000" * 5
HTMX = {"HTTP_HX_REQUEST": "true"}
FILES = [{"path": "app.py", "hunks": [{"header": "@@ -1,3 +1,4 @@", "lines": [
    {"kind": "ctx", "old": 1, "new": 1, "text": "import os"},
    {"kind": "add", "old": None, "new": 2, "text": "x = eval(data)"},
    {"kind": "add", "old": None, "new": 3, "text": "y = x"},
    {"kind": "ctx", "old": 2, "new": 4, "text": "print(y)"},
]}, {"header": "@@ -20,2 +21,2 @@", "lines": [
    {"kind": "ctx", "old": 20, "new": 21, "text": "def f():"},
    {"kind": "add", "old": None, "new": 22, "text": "    return 1"},
]}], "old_path": "app.py", "status": "modified", "language": "Python", "lexer": "python",
    "is_python": True, "added": 3, "removed": 0, "content": None, "mode": "light",
    "clipped": False, "no_newline_at_end": False}]
# key, severity, category, confidence, line, end_line, suggestion
FINDINGS = [
    ("SEC-1", "high", "security", 0.9, 2, 3, "```python\nx = int(data)\ny = x\n```"),
    ("STY-1", "medium", "style", 0.8, 22, None, "Name it better."),
    ("STY-2", "low", "style", 0.95, 4, None, ""),
    ("SEC-2", "critical", "security", 0.4, 3, None, "x = 0"),
    ("ARC-1", "high", "architecture", 0.9, 40, None, ""),   # not on the diff: summary only
]


@pytest.fixture
def host(monkeypatch):
    fake = FakeHost()
    fake.set_pull(7, base={"app.py": "x = 1\n"}, head={"app.py": "x = 2\n"}, head_sha=HEAD,
                  base_sha=BASE)
    import reviews_app.hosting as hosting

    monkeypatch.setattr(hosting, "client_for", lambda ref: fake, raising=False)
    try:  # the hooks part's module; a stand-in until it is merged
        secrets = importlib.import_module("reviews_app.connections.secrets")
    except ModuleNotFoundError:
        package = types.ModuleType("reviews_app.connections")
        package.__path__ = []
        secrets = types.ModuleType("reviews_app.connections.secrets")
        monkeypatch.setitem(sys.modules, "reviews_app.connections", package)
        monkeypatch.setitem(sys.modules, "reviews_app.connections.secrets", secrets)
    if not hasattr(secrets, "SecretUnavailable"):
        monkeypatch.setattr(secrets, "SecretUnavailable", type("SecretUnavailable",
                                                               (Exception,), {}), raising=False)
    monkeypatch.setattr(secrets, "repo_ref", lambda conn: RepoRef(
        conn.provider, conn.api_url, conn.repository, token=TOKEN), raising=False)
    return fake


@pytest.fixture
def sent(monkeypatch):
    """The publish tasks sent (publication id, countdown), instead of the broker."""
    calls: list[tuple[int, float | None]] = []
    monkeypatch.setattr(dispatch, "send", lambda pk, countdown=None: calls.append(
        (pk, countdown)))
    return calls


def make_pr(owner, policy="after_triage", **conn) -> PullRequest:
    connection, _ = Connection.objects.get_or_create(
        owner=owner, provider="github", api_url="https://api.github.com",
        repository="octo/demo", defaults={"publish_policy": policy, **conn})
    return PullRequest.objects.get_or_create(
        connection=connection, number=7, defaults={
            "url": "https://github.com/octo/demo/pull/7", "head_sha": HEAD,
            "base_sha": BASE})[0]


def make_review(owner, *, policy="after_triage", repo_config=None, coverage=None,
                reviewers=None, proposed="request_changes", decisions=None, **conn) -> Review:
    pr = make_pr(owner, policy, **conn)
    run = Run.objects.create(owner=owner, pattern="code_review", task="octo/demo#7",
                             status="completed")
    review = Review.objects.create(
        run=run, owner=owner, source_kind="pull_request", source_label="octo/demo#7",
        diff_text="", files=FILES, coverage=coverage or [], total_files=1,
        reviewers=reviewers or {"security": {"status": "ok"}, "style": {"status": "ok"}},
        proposed_verdict=proposed, summary="Summary.", pull_request=pr, pr_round=1,
        base_sha=BASE, head_sha=HEAD, repo_config=repo_config or {})
    decisions = decisions or {}
    for i, (key, sev, cat, conf, line, end, sugg) in enumerate(FINDINGS):
        Finding.objects.create(
            review=review, key=key, position=i, category=cat, severity=sev, file="app.py",
            line=line, end_line=end, title=f"{key} title", description=f"{key} text",
            suggestion=sugg, confidence=conf, reviewer=cat, reviewers=[cat],
            fingerprint=f"{i + 1:x}" * 40, decision=decisions.get(key, "pending"))
    return review


ACCEPT_TWO = {"SEC-1": "accepted", "STY-1": "rejected", "STY-2": "accepted",
              "SEC-2": "rejected", "ARC-1": "rejected"}


def finalise(review, user, verdict="request_changes", capture=None):
    review.refresh_from_db()
    with capture(execute=True):
        triage.record_final(review, user, verdict, "")
    review.refresh_from_db()
    return review


def reopen(review):
    Review.objects.filter(pk=review.pk).update(final_verdict="", verdict_decided_by=None)
    review.refresh_from_db()


def inline_fingerprints(host) -> list[str]:
    return [fp for c in host.inline for fp in render.fingerprints_in(c.body)]



def final_review(alice, capture):
    review = make_review(alice, decisions=ACCEPT_TWO)
    return finalise(review, alice, capture=capture)
