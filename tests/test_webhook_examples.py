"""GitHub's own documented webhook payloads at the receivers (issue 31): every example of every
event octokit/webhooks keeps (``tests/data/octokit-webhooks-examples-7.6.1.json.gz``: the
examples of the npm package ``@octokit/webhooks-examples`` 7.6.1, MIT licence, by the octokit
maintainers; only the examples, minified) is answered with a 2xx or a clear 4xx — never a
500 — by a connection's webhook and by a GitHub App's. GitHub shows a 4xx as a failed
delivery, so a 4xx is kept for what the sender must fix: an event Quorum would act on that
names another repository, or a payload not shaped as its event."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from reviews_app.connections import webhook
from reviews_app.hosting import webhooks
from reviews_app.models import WebhookDelivery
from tests.webhook_helpers import make_app, make_conn, post, post_app

pytestmark = pytest.mark.django_db
DATA = Path(__file__).parent / "data" / "octokit-webhooks-examples-7.6.1.json.gz"
EXAMPLES: dict[str, list[dict]] = json.loads(gzip.decompress(DATA.read_bytes()))
REPO = "Codertocat/Hello-World"  # the repository most examples name


def test_the_examples_are_many_and_cover_the_events_quorum_acts_on():
    assert sum(len(v) for v in EXAMPLES.values()) > 300
    assert {"pull_request", "issue_comment", "installation", "ping"} <= set(EXAMPLES)


def _acted_on(event: str, payload: dict) -> bool:
    try:
        parsed = webhooks.parse("github", {"X-GitHub-Event": event}, payload)
    except webhooks.BadPayload:
        return False
    return isinstance(parsed, webhooks.HookEvent)


def test_a_connection_answers_every_documented_payload_with_2xx_or_a_clear_4xx(
        client, alice, monkeypatch):
    monkeypatch.setattr(webhook, "_enqueue", lambda pk: None)
    conn = make_conn(alice, repository=REPO)
    answers: dict[int, int] = {}
    for event, examples in EXAMPLES.items():
        for i, payload in enumerate(examples):
            response = post(client, conn, payload, event)
            code = response.status_code
            answers[code] = answers.get(code, 0) + 1
            assert code in (200, 202, 400), (event, i, code)
            text = response.content.decode()
            assert response["Content-Type"].startswith("text/plain") and len(text) < 300
            if code == 400:  # only what the sender must fix, said plainly
                repo = (payload.get("repository") or {}).get("full_name")
                assert _acted_on(event, payload) and repo != REPO or "payload" in text, \
                    (event, i, text)
    assert answers.get(202, 0) > 250 and answers.get(400, 0) < 20, answers
    assert WebhookDelivery.objects.filter(status="queued").exists()  # pull requests acted on


def test_a_github_app_answers_every_documented_payload_with_2xx_or_a_clear_4xx(
        client, alice, monkeypatch):
    monkeypatch.setattr(webhook, "_enqueue", lambda pk: None)
    app = make_app(alice)
    for event, examples in EXAMPLES.items():
        for i, payload in enumerate(examples):
            response = post_app(client, app, payload, event)
            assert response.status_code in (200, 202, 400), (event, i, response.content)
