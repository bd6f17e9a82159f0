"""Connections: sealed secrets, the connection pages (access for owner, another user and
anonymous; every bad input a clear form error, never a 500, nothing half-saved), and no
secret whole in any page, log record, admin page or error."""

from __future__ import annotations

import pytest
from django.urls import reverse

from common import sealed
from reviews_app.connections import secrets
from reviews_app.models import Connection, PullRequest, WebhookDelivery

from .webhook_helpers import SECRET, TOKEN, make_conn

pytestmark = pytest.mark.django_db

PASTED = "glpat-pasted-token-value-XYZ9876"  # noqa: S105 - test fixture
PASTED_SECRET = "pasted-webhook-secret-abcdef-5555"  # noqa: S105 - test fixture


def form(**over):
    data = {"provider": "github", "repository": "octo/widgets", "api_url": "",
            "token": PASTED, "token_env": "", "secret": PASTED_SECRET, "secret_env": "",
            "publish_policy": "after_triage", "auto_min_severity": "high",
            "auto_min_confidence": "0.7", "status_comment": "on", "active": "on"}
    data.update(over)
    return data


# --- sealed -------------------------------------------------------------------------------

def test_seal_roundtrip_and_another_key(settings):
    token = sealed.seal(TOKEN)
    assert TOKEN not in token and sealed.unseal(token) == TOKEN
    assert sealed.seal(TOKEN) != token  # a fresh IV each time
    with pytest.raises(sealed.UnsealError) as exc:
        sealed.unseal(token, key="another key")
    assert TOKEN not in str(exc.value) and "enter it again" in str(exc.value)
    with pytest.raises(sealed.UnsealError):
        sealed.unseal("not-a-fernet-token")
    settings.QUORUM_SECRETS_KEY = "a dedicated key"  # rotating it: stored values unreadable
    with pytest.raises(sealed.UnsealError):
        sealed.unseal(token)
    assert sealed.unseal(sealed.seal("x" * 20)) == "x" * 20
    assert sealed.unseal(sealed.seal("y", key="a dedicated key")) == "y"


def test_hint():
    assert sealed.hint(TOKEN) == "…" + TOKEN[-4:]
    assert sealed.hint("short-11chr") == "" and sealed.hint("") == ""
    assert sealed.hint("exactly12chr") == "…2chr"


def test_secrets_of_a_connection(alice, monkeypatch):
    conn = make_conn(alice)
    assert secrets.token_of(conn) == TOKEN and secrets.secret_of(conn) == SECRET
    ref = secrets.repo_ref(conn)
    assert (ref.provider, ref.api_url, ref.repository, ref.token) == \
        ("github", "https://api.github.com", "octo/widgets", TOKEN)
    assert TOKEN not in repr(ref)
    conn.token_sealed, conn.token_env = "", "QUORUM_CONN_T1"
    monkeypatch.delenv("QUORUM_CONN_T1", raising=False)
    with pytest.raises(secrets.SecretUnavailable, match="QUORUM_CONN_T1.*not set"):
        secrets.token_of(conn)
    monkeypatch.setenv("QUORUM_CONN_T1", "from-the-environment")
    assert secrets.token_of(conn) == "from-the-environment"
    conn.token_env = "SECRET_KEY"  # never read, even if stored by other means
    with pytest.raises(secrets.SecretUnavailable, match="prefix") as exc:
        secrets.token_of(conn)
    assert "test-secret-key" not in str(exc.value)
    conn.secret_sealed = sealed.seal(SECRET, key="old key")
    with pytest.raises(secrets.SecretUnavailable) as exc:
        secrets.secret_of(conn)
    assert SECRET not in str(exc.value) and "enter it again" in str(exc.value)
    conn.secret_sealed = ""
    with pytest.raises(secrets.SecretUnavailable, match="no webhook secret"):
        secrets.secret_of(conn)


# --- access -------------------------------------------------------------------------------

def urls(conn):
    return {"connection_list": reverse("connection_list"),
            "connection_new": reverse("connection_new"),
            "connection_detail": reverse("connection_detail", args=[conn.pk]),
            "connection_edit": reverse("connection_edit", args=[conn.pk]),
            "connection_delete": reverse("connection_delete", args=[conn.pk])}


def test_anonymous_is_sent_to_sign_in(client, alice):
    conn = make_conn(alice)
    for name, url in urls(conn).items():
        for response in (client.get(url), client.post(url, form())):
            assert response.status_code == 302, name
            assert response.url.startswith("/accounts/login/"), name
    assert Connection.objects.count() == 1 and Connection.objects.get().repository == \
        "octo/widgets"


def test_another_user_gets_404_and_changes_nothing(bob_client, alice):
    conn = make_conn(alice)
    before = list(Connection.objects.values())
    for name in ("connection_detail", "connection_edit", "connection_delete"):
        url = urls(conn)[name]
        assert bob_client.get(url).status_code == 404, name
        posted = bob_client.post(url, form(repository="bob/takeover")).status_code
        assert posted == (405 if name == "connection_detail" else 404), name
    assert list(Connection.objects.values()) == before
    listing = bob_client.get(reverse("connection_list")).content.decode()
    assert "octo/widgets" not in listing


def test_staff_do_not_see_others_connections_in_the_app(client, alice, django_user_model):
    conn = make_conn(alice)
    staff = django_user_model.objects.create_user("sam", password="x-long-password",
                                                  is_staff=True)
    client.force_login(staff)
    assert client.get(urls(conn)["connection_detail"]).status_code == 404


def test_the_owner_may_open_every_page(alice_client, alice):
    conn = make_conn(alice)
    for name, url in urls(conn).items():
        response = alice_client.get(url)
        assert response.status_code == 200, name
    assert b"Connections" in alice_client.get(reverse("connection_list")).content  # nav link


# --- create, edit, delete -----------------------------------------------------------------

def test_create_seals_the_token_and_shows_only_the_hint(alice_client, alice):
    response = alice_client.post(reverse("connection_new"), form())
    conn = Connection.objects.get()
    assert response.status_code == 302 and response.url == conn.get_absolute_url()
    assert conn.owner == alice and conn.api_url == "https://api.github.com"
    assert PASTED not in conn.token_sealed and secrets.token_of(conn) == PASTED
    assert conn.token_hint == "…" + PASTED[-4:] and secrets.secret_of(conn) == PASTED_SECRET
    page = alice_client.get(conn.get_absolute_url()).content.decode()
    assert PASTED not in page and PASTED_SECRET not in page and PASTED[-4:] in page
    hook = reverse("webhook", args=["github", conn.hook_id])
    assert f"http://testserver{hook}" in page and "Issue comments" in page


def test_the_webhook_url_uses_the_public_url(alice_client, alice, settings):
    settings.QUORUM_PUBLIC_URL = "https://quorum.example.org"
    conn = make_conn(alice)
    page = alice_client.get(conn.get_absolute_url()).content.decode()
    assert f"https://quorum.example.org/webhooks/github/{conn.hook_id}/" in page


def test_a_generated_secret_is_shown_once(alice_client):
    response = alice_client.post(reverse("connection_new"), form(secret=""), follow=True)
    conn = Connection.objects.get()
    secret = secrets.secret_of(conn)
    assert len(secret) >= 40 and conn.secret_sealed and not conn.secret_env
    assert secret in response.content.decode() and response["Cache-Control"] == "no-store"
    again = alice_client.get(conn.get_absolute_url()).content.decode()
    assert secret not in again and conn.secret_hint in again


def test_environment_variables(alice_client, monkeypatch):
    monkeypatch.setenv("QUORUM_CONN_WIDGETS_TOKEN", "token-from-env-000000")
    data = form(token="", token_env="QUORUM_CONN_WIDGETS_TOKEN", secret="",
                secret_env="QUORUM_CONN_WIDGETS_SECRET")
    assert alice_client.post(reverse("connection_new"), data).status_code == 302
    conn = Connection.objects.get()
    assert (conn.token_env, conn.token_sealed, conn.secret_env, conn.secret_sealed) == \
        ("QUORUM_CONN_WIDGETS_TOKEN", "", "QUORUM_CONN_WIDGETS_SECRET", "")
    assert secrets.token_of(conn) == "token-from-env-000000"
    page = alice_client.get(conn.get_absolute_url()).content.decode()
    assert "QUORUM_CONN_WIDGETS_SECRET" in page and "not set in this process" in page
    assert "token-from-env-000000" not in page


def test_edit_keeps_or_replaces_the_stored_token(alice_client, alice):
    conn = make_conn(alice)
    url = reverse("connection_edit", args=[conn.pk])
    page = alice_client.get(url).content.decode()
    assert TOKEN not in page and SECRET not in page and conn.token_hint in page
    assert alice_client.post(url, form(token="", secret="", publish_policy="never")
                             ).status_code == 302
    conn.refresh_from_db()
    assert secrets.token_of(conn) == TOKEN and secrets.secret_of(conn) == SECRET
    assert conn.publish_policy == "never"
    assert alice_client.post(url, form(token="new-token-value-7777", secret="")
                             ).status_code == 302
    conn.refresh_from_db()
    assert secrets.token_of(conn) == "new-token-value-7777" and conn.token_hint == "…7777"
    assert alice_client.post(url, form(token="", token_env="QUORUM_CONN_X", secret="")
                             ).status_code == 302
    conn.refresh_from_db()
    assert conn.token_env == "QUORUM_CONN_X" and conn.token_sealed == "" == conn.token_hint


def test_a_rotated_key_is_said_on_the_page(alice_client, alice):
    conn = make_conn(alice, token_sealed=sealed.seal(TOKEN, key="the old key"))
    page = alice_client.get(conn.get_absolute_url()).content.decode()
    assert "cannot be read with the current key" in page and TOKEN not in page


def test_delete_asks_then_deletes(alice_client, alice):
    conn = make_conn(alice)
    url = reverse("connection_delete", args=[conn.pk])
    assert b"Delete the connection" in alice_client.get(url).content
    assert Connection.objects.exists()
    response = alice_client.post(url)
    assert response.status_code == 302 and response.url == reverse("connection_list")
    assert not Connection.objects.exists()
    assert alice_client.post(url).status_code == 404  # a resubmit


def test_deliveries_and_pull_requests_are_listed_escaped(alice_client, alice):
    conn = make_conn(alice)
    WebhookDelivery.objects.create(connection=conn, delivery_id="d1", event="opened",
                                   number=7, detail="<script>alert(1)</script>")
    PullRequest.objects.create(connection=conn, number=7, title="<b>Fix</b>",
                               url="javascript:alert(1)")
    page = alice_client.get(conn.get_absolute_url()).content.decode()
    assert "&lt;script&gt;" in page and "<script>alert" not in page
    assert "&lt;b&gt;Fix" in page and 'href="javascript:' not in page and "#7" in page


def test_the_new_form_starts_from_the_connection_defaults(alice_client, alice):
    """A person who fills in only the repository and the token gets the documented defaults
    (a ModelForm without an instance takes no initial values from the model)."""
    page = alice_client.get(reverse("connection_new")).content.decode()
    assert 'name="auto_min_confidence" value="0.7"' in page
    assert '<option value="high" selected>' in page
    assert '<option value="after_triage" selected>' in page
    sent = {"provider": "github", "repository": "octo/defaults", "token": PASTED,
            "publish_policy": "after_triage", "auto_min_severity": "high",
            "auto_min_confidence": "0.7", "status_comment": "on", "active": "on"}
    answer = alice_client.post(reverse("connection_new"), sent)
    assert answer.status_code == 302, answer.content.decode()[:500]
    conn = Connection.objects.get(repository="octo/defaults")
    assert (conn.auto_min_severity, conn.auto_min_confidence, conn.publish_policy) == \
        ("high", 0.7, "after_triage")
