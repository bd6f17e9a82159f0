"""The webhook receiver (POST /webhooks/<provider>/<hook_id>/): a valid delivery is stored
and its task sent once on commit; every refusal (404, 405, 413, 401, 403, 400, 409, 503)
saves nothing; the body and the secret are never logged; a large delivery is answered fast."""

from __future__ import annotations

import io
import json
import logging
import time
from unittest import mock

import pytest
from django.urls import reverse

from common import sealed
from reviews_app.connections import webhook
from reviews_app.models import WebhookDelivery

from .webhook_helpers import (
    SECRET,
    SHA,
    TOKEN,
    forgejo_comment,
    forgejo_pr,
    github_comment,
    github_pr,
    gitlab_mr,
    gitlab_note,
    make_conn,
    post,
    sign,
)

# --- the receiver -------------------------------------------------------------------------

@pytest.fixture
def send_task():
    with mock.patch("config.celery.app.send_task") as m:  # the app Quorum sends with
        yield m


@pytest.fixture
def gh(alice):
    return make_conn(alice)


def nothing_saved():
    return not WebhookDelivery.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("provider,payload,event,kind,number", [
    ("github", github_pr("synchronize"), "pull_request", "synchronize", 7),
    ("github", github_comment(), "issue_comment", "command", 7),
    ("gitlab", gitlab_mr("open"), "Merge Request Hook", "opened", 3),
    ("gitlab", gitlab_note(), "Note Hook", "command", 3),
    ("forgejo", forgejo_pr("synchronized"), "pull_request", "synchronize", 5),
    ("forgejo", forgejo_comment(), "issue_comment", "command", 5),
])
def test_a_valid_delivery_is_stored_and_its_task_sent_once_on_commit(
        client, alice, send_task, django_capture_on_commit_callbacks, provider, payload, event,
        kind, number):
    repo = "group/sub/proj" if provider == "gitlab" else "OCTO/Widgets"  # any case
    conn = make_conn(alice, provider, repo)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = post(client, conn, payload, event, delivery="d-1")
    assert response.status_code == 202, response.content
    row = WebhookDelivery.objects.get()
    assert (row.connection, row.delivery_id, row.event, row.number, row.status) == \
        (conn, "d-1", kind, number, "queued")
    assert row.sender and (row.head_sha == SHA or kind == "command")
    assert len(callbacks) == 1
    send_task.assert_called_once_with("reviews_app.tasks.handle_delivery", args=[row.pk])


@pytest.mark.django_db
def test_the_task_is_not_sent_before_commit(client, gh, send_task,
                                            django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert post(client, gh, github_pr(), "pull_request").status_code == 202
    assert len(callbacks) == 1 and not send_task.called
    callbacks[0]()
    send_task.assert_called_once()


@pytest.mark.django_db
def test_a_replayed_delivery_is_refused(client, gh, send_task,
                                        django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert post(client, gh, github_pr(), "pull_request", delivery="same").status_code == 202
        again = post(client, gh, github_pr("closed"), "pull_request", delivery="same")
    assert again.status_code == 409
    assert WebhookDelivery.objects.count() == 1 and WebhookDelivery.objects.get().event == \
        "opened"
    assert send_task.call_count == 1
    other = make_conn(gh.owner, repository="octo/other")  # the id is unique per connection
    assert post(client, other, github_pr(repo="octo/other"), "pull_request",
                delivery="same").status_code == 202


@pytest.mark.django_db
def test_ignored_events_are_stored_with_the_reason(client, gh, send_task,
                                                   django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, gh, github_pr("labeled"), "pull_request")
        push = post(client, gh, {"repository": {"full_name": "octo/widgets"}}, "push")
    assert response.status_code == 202 and push.status_code == 202
    rows = list(WebhookDelivery.objects.order_by("id"))
    assert [(r.status, r.event) for r in rows] == [("ignored", "pull_request"),
                                                   ("ignored", "push")]
    assert "labeled" in rows[0].detail and "push" in rows[1].detail
    assert not send_task.called


@pytest.mark.django_db
def test_ping_answers_pong_and_stores_nothing(client, gh, send_task):
    response = post(client, gh, {"zen": "Keep it simple.", "hook_id": 1}, "ping")
    assert response.status_code == 200 and b"pong" in response.content
    assert nothing_saved() and not send_task.called


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["no signature", "wrong secret", "sha1 prefix", "no prefix",
                                  "body changed"])
def test_bad_signatures_are_401_and_save_nothing(client, gh, send_task, case):
    body = json.dumps(github_pr()).encode()
    headers = {"no signature": {"X-Hub-Signature-256": None},
               "wrong secret": {"X-Hub-Signature-256": "sha256=" + sign(body, "nope")},
               "sha1 prefix": {"X-Hub-Signature-256": "sha1=" + sign(body)},
               "no prefix": {"X-Hub-Signature-256": sign(body)},
               "body changed": {"X-Hub-Signature-256": "sha256=" + sign(body + b" ")}}[case]
    response = post(client, gh, None, "pull_request", body=body, headers=headers)
    assert response.status_code == 401
    assert nothing_saved() and not send_task.called


@pytest.mark.django_db
@pytest.mark.parametrize("provider,headers", [
    ("gitlab", {"X-Gitlab-Token": "wrong-token-value-1234"}),
    ("gitlab", {"X-Gitlab-Token": None}),
    ("forgejo", {"X-Forgejo-Signature": "0" * 64}),
    ("forgejo", {"X-Forgejo-Signature": None}),
])
def test_bad_gitlab_and_forgejo_signatures(client, alice, send_task, provider, headers):
    conn = make_conn(alice, provider)
    payload = gitlab_mr() if provider == "gitlab" else forgejo_pr()
    event = "Merge Request Hook" if provider == "gitlab" else "pull_request"
    assert post(client, conn, payload, event, headers=headers).status_code == 401
    assert nothing_saved()


@pytest.mark.django_db
def test_gitea_headers_are_accepted(client, alice, send_task,
                                    django_capture_on_commit_callbacks):
    conn = make_conn(alice, "forgejo")
    body = json.dumps(forgejo_pr()).encode()
    headers = {"X-Forgejo-Event": None, "X-Forgejo-Signature": None, "X-Forgejo-Delivery": None,
               "X-Gitea-Event": "pull_request", "X-Gitea-Signature": sign(body),
               "X-Gitea-Delivery": "gitea-1"}
    with django_capture_on_commit_callbacks(execute=True):
        assert post(client, conn, None, "x", body=body, headers=headers).status_code == 202
    assert WebhookDelivery.objects.get().delivery_id == "gitea-1"


@pytest.mark.django_db
def test_unknown_hook_or_provider_mismatch_is_404(client, gh):
    assert post(client, gh, github_pr(), "pull_request", provider="gitlab").status_code == 404
    assert post(client, gh, github_pr(), "pull_request", provider="bitbucket").status_code == 404
    url = reverse("webhook", args=["github", "no-such-hook"])
    assert client.post(url, data=b"{}", content_type="application/json").status_code == 404
    assert nothing_saved()


@pytest.mark.django_db
def test_get_is_405(client, gh):
    answer = client.get(reverse("webhook", args=["github", gh.hook_id]))
    assert answer.status_code == 405 and answer["Allow"] == "POST"
    assert answer["Content-Type"].startswith("text/plain")
    assert "receives webhooks" in answer.content.decode()


@pytest.mark.django_db
def test_inactive_connection_is_403(client, alice, send_task):
    conn = make_conn(alice, active=False)
    assert post(client, conn, github_pr(), "pull_request").status_code == 403
    assert nothing_saved()


@pytest.mark.django_db
def test_no_delivery_id_is_400(client, gh, send_task):
    response = post(client, gh, github_pr(), "pull_request", delivery="")
    assert response.status_code == 400 and b"delivery id" in response.content
    too_long = post(client, gh, github_pr(), "pull_request", delivery="x" * 101)
    assert too_long.status_code == 400
    assert nothing_saved()


@pytest.mark.django_db
@pytest.mark.parametrize("body,message", [
    (b"not json", b"not JSON"),
    (b"\xff\xfe\x00", b"not JSON"),
    (b"[1, 2]", b"not a JSON object"),
    (json.dumps({"action": "opened", "repository": {"full_name": "octo/widgets"}}).encode(),
     b"pull_request.number"),
])
def test_bad_payloads_are_400_with_a_clear_message(client, gh, send_task, body, message):
    response = post(client, gh, None, "pull_request", body=body)
    assert response.status_code == 400 and message in response.content
    assert response["Content-Type"].startswith("text/plain")
    assert nothing_saved() and not send_task.called


@pytest.mark.django_db
def test_another_repository_is_refused_for_what_would_be_acted_on(client, gh, send_task):
    response = post(client, gh, github_pr(repo="octo/evil"), "pull_request")
    assert response.status_code == 400 and b"another repository" in response.content
    assert nothing_saved()


def test_an_ignored_event_naming_another_repository_is_still_2xx(client, gh, send_task):
    """GitHub shows a 4xx as a failed delivery: an event Quorum ignores anyway is answered
    202 whatever it names; only what the sender must fix is a 4xx."""
    push = post(client, gh, {"repository": {"full_name": "octo/evil"}}, "push")
    assert push.status_code == 202 and b"Ignored" in push.content
    [d] = WebhookDelivery.objects.all()
    assert d.status == "ignored" and "another repository" in d.detail
    assert not send_task.called


@pytest.mark.django_db
def test_oversized_payloads_are_413(client, gh, send_task, settings):
    settings.QUORUM_WEBHOOK_MAX_BYTES = 1000
    big = github_pr(title="x" * 2000)
    assert post(client, gh, big, "pull_request").status_code == 413
    assert nothing_saved()


class _Streamed:
    """A request whose body comes without a Content-Length (chunked, or ASGI)."""

    def __init__(self, body: bytes, length: str | None = None):
        self.META = {} if length is None else {"CONTENT_LENGTH": length}
        self._stream = io.BytesIO(body)

    def read(self, size=-1):
        return self._stream.read(size)


def test_the_read_size_is_checked_as_well_as_the_content_length():
    assert webhook._read_body(_Streamed(b"x" * 1001), 1000) is None  # no length given
    assert webhook._read_body(_Streamed(b"x" * 1001, "10"), 1000) is None  # a false length
    assert webhook._read_body(_Streamed(b"x", "5000"), 1000) is None  # the length says so
    assert webhook._read_body(_Streamed(b"x" * 1000, "junk"), 1000) == b"x" * 1000


@pytest.mark.django_db
def test_an_unreadable_secret_is_refused_without_saving(client, alice, send_task, monkeypatch):
    conn = make_conn(alice, secret_sealed=sealed.seal(SECRET, key="an-older-key"))
    assert post(client, conn, github_pr(), "pull_request").status_code == 503
    env_conn = make_conn(alice, repository="octo/env", secret_sealed="",
                         secret_env="QUORUM_CONN_TEST_SECRET")
    monkeypatch.delenv("QUORUM_CONN_TEST_SECRET", raising=False)
    assert post(client, env_conn, github_pr(repo="octo/env"), "pull_request").status_code == 503
    monkeypatch.setenv("QUORUM_CONN_TEST_SECRET", SECRET)
    assert post(client, env_conn, github_pr(repo="octo/env"), "pull_request").status_code == 202
    assert WebhookDelivery.objects.count() == 1


@pytest.mark.django_db
def test_the_body_and_the_secret_are_never_logged(client, gh, send_task, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="quorum")
    marker = "payload-marker-9f8e7d"
    post(client, gh, github_pr(title=marker), "pull_request")
    post(client, gh, github_pr(title=marker), "pull_request", secret="wrong-secret-1234567")
    post(client, gh, github_pr(title=marker, repo="a/b"), "pull_request")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "connection" in text  # the receiver does log
    assert marker not in text and SECRET not in text and TOKEN not in text


@pytest.mark.django_db
def test_a_large_valid_delivery_is_answered_quickly(client, gh, send_task,
                                                    django_capture_on_commit_callbacks):
    payload = github_pr(body="Lorem ipsum dolor sit amet. " * 60_000,
                        labels=[{"name": f"label-{i}"} for i in range(2000)])
    body = json.dumps(payload).encode()
    assert 1_500_000 < len(body) < 2_000_000
    with django_capture_on_commit_callbacks(execute=True):
        started = time.perf_counter()
        response = post(client, gh, None, "pull_request", body=body)
        elapsed = time.perf_counter() - started
    assert response.status_code == 202
    print(f"\nwebhook receiver: {len(body)} bytes answered in {elapsed * 1000:.1f} ms")
    send_task.assert_called_once()
