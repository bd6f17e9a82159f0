"""The connection form's bad inputs (each a clear message with a 400, never a 500, nothing
saved), the API host rule for non-staff users, and the admin: secrets only as hints."""

from __future__ import annotations

import logging

import pytest
from django.test import Client
from django.urls import reverse

from reviews_app.connections import secrets
from reviews_app.models import Connection, WebhookDelivery

from .test_connections_views import PASTED, PASTED_SECRET, form
from .webhook_helpers import SECRET, TOKEN, make_conn

pytestmark = pytest.mark.django_db


def refused(client, data, field, words):
    before = list(Connection.objects.values())
    response = client.post(reverse("connection_new"), data)
    assert response.status_code == 400, (field, response.status_code)
    errors = response.context["form"].errors
    assert field in errors, (field, errors)
    assert words.lower() in " ".join(errors[field]).lower(), (field, errors[field])
    page = response.content.decode()
    assert PASTED not in page and PASTED_SECRET not in page  # never rendered back
    assert list(Connection.objects.values()) == before


@pytest.mark.parametrize("over,field,words", [
    ({"repository": ""}, "repository", "required"),
    ({"provider": ""}, "provider", "required"),
    ({"provider": "bitbucket"}, "provider", "valid choice"),
    ({"repository": "octo"}, "repository", "owner/name"),
    ({"repository": "octo/widgets/extra"}, "repository", "owner/name"),
    ({"repository": "https://github.com/octo/widgets"}, "repository", "owner/name"),
    ({"repository": "octo/../etc"}, "repository", "owner/name"),
    ({"repository": "octo/wid gets"}, "repository", "owner/name"),
    ({"repository": "octo/wid\x00gets"}, "repository", "null"),
    ({"repository": "o/" + "w" * 5000}, "repository", "at most"),
    ({"api_url": "ftp://api.github.com"}, "api_url", "https://"),
    ({"api_url": "javascript:alert(1)"}, "api_url", "https://"),
    ({"api_url": "https://user:pw@api.github.com"}, "api_url", "user name or password"),
    ({"api_url": "https://api.github.com/#frag"}, "api_url", "fragment"),
    ({"api_url": "https://api.github.com/?x=1"}, "api_url", "query"),
    ({"api_url": "https://api.github.com:99999"}, "api_url", "not a valid address"),
    ({"api_url": "https://api.git hub.com"}, "api_url", "spaces"),
    ({"api_url": "https://169.254.169.254/latest"}, "api_url", "only to api.github.com"),
    ({"api_url": "http://api.github.com"}, "api_url", "over https"),
    ({"api_url": "https://api.github.com:8443"}, "api_url", "only to"),
    ({"api_url": "https://" + "a" * 400 + ".com"}, "api_url", "at most"),
    ({"token": ""}, "token", "paste a token"),
    ({"token": "has space inside"}, "token", "spaces"),
    ({"token": "x" * 5000}, "token", "at most"),
    ({"token": "tok\x00en"}, "token", "null"),
    ({"token_env": "SECRET_KEY", "token": ""}, "token_env", "QUORUM_CONN_"),
    ({"token_env": "OPENAI_API_KEY", "token": ""}, "token_env", "QUORUM_CONN_"),
    ({"token_env": "quorum_conn_lower", "token": ""}, "token_env", "QUORUM_CONN_"),
    ({"token_env": "QUORUM_CONN_"}, "token_env", "QUORUM_CONN_"),
    ({"token_env": "QUORUM_CONN_A"}, "token_env", "not both"),
    ({"secret_env": "DATABASE_URL", "secret": ""}, "secret_env", "QUORUM_CONN_"),
    ({"secret": "short"}, "secret", "at least 16"),
    ({"auto_min_severity": "apocalyptic"}, "auto_min_severity", "valid choice"),
    ({"auto_min_confidence": "2"}, "auto_min_confidence", "less than or equal"),
    ({"auto_min_confidence": "nan"}, "auto_min_confidence", "number"),
    ({"auto_min_confidence": ""}, "auto_min_confidence", "required"),
    ({"publish_policy": "sometimes"}, "publish_policy", "valid choice"),
])
def test_bad_inputs_are_clear_form_errors(alice_client, over, field, words):
    refused(alice_client, form(**over), field, words)


def test_an_empty_form(alice_client):
    response = alice_client.post(reverse("connection_new"), {})
    assert response.status_code == 400 and not Connection.objects.exists()
    assert {"provider", "repository", "token"} <= set(response.context["form"].errors)


def test_gitlab_allows_nested_groups(alice_client):
    data = form(provider="gitlab", repository="group/sub/project", api_url="")
    assert alice_client.post(reverse("connection_new"), data).status_code == 302
    conn = Connection.objects.get()
    assert (conn.repository, conn.api_url) == ("group/sub/project", "https://gitlab.com/api/v4")


def test_forgejo_defaults_to_codeberg(alice_client):
    assert alice_client.post(reverse("connection_new"),
                             form(provider="forgejo")).status_code == 302
    assert Connection.objects.get().api_url == "https://codeberg.org/api/v1"


def test_staff_may_use_any_host(client, django_user_model):
    staff = django_user_model.objects.create_user("sam", password="x-long-password",
                                                  is_staff=True)
    client.force_login(staff)
    data = form(provider="forgejo", api_url="http://forgejo:3000/api/v1/")
    assert client.post(reverse("connection_new"), data).status_code == 302
    assert Connection.objects.get().api_url == "http://forgejo:3000/api/v1"
    refused(client, form(api_url="https://u:p@git.example.org"), "api_url", "password")


def test_the_host_list_is_a_setting(alice_client, settings):
    settings.QUORUM_PROVIDER_HOSTS = ["git.example.org"]
    refused(alice_client, form(), "api_url", "only to git.example.org")
    assert alice_client.post(reverse("connection_new"), form(
        api_url="https://git.example.org/api/v1")).status_code == 302


def test_a_duplicate_and_a_resubmit_are_form_errors(alice_client, bob):
    assert alice_client.post(reverse("connection_new"), form()).status_code == 302
    refused(alice_client, form(), "repository", "already have a connection")
    refused(alice_client, form(repository="OCTO/Widgets"), "repository", "already have")
    # Another user may connect the same repository.
    bob_client = Client()
    bob_client.force_login(bob)
    assert bob_client.post(reverse("connection_new"), form()).status_code == 302
    assert Connection.objects.count() == 2


def test_editing_into_a_duplicate_is_a_form_error(alice_client, alice):
    make_conn(alice)
    other = make_conn(alice, repository="octo/other")
    response = alice_client.post(reverse("connection_edit", args=[other.pk]),
                                 form(repository="octo/widgets", token=""))
    assert response.status_code == 400 and "already have" in str(response.context["form"].errors)
    other.refresh_from_db()
    assert other.repository == "octo/other"


def test_a_bad_edit_changes_nothing(alice_client, alice):
    conn = make_conn(alice)
    before = Connection.objects.values().get()
    response = alice_client.post(reverse("connection_edit", args=[conn.pk]),
                                 form(api_url="https://evil.example.org", token="new-tok-0000"))
    assert response.status_code == 400
    assert Connection.objects.values().get() == before and secrets.token_of(conn) == TOKEN


# --- secrets never whole: pages, logs, admin ----------------------------------------------

def test_no_secret_in_logs_or_pages(alice_client, alice, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="quorum")
    pages = [alice_client.post(reverse("connection_new"), form(), follow=True)]
    conn = Connection.objects.get()
    pages.append(alice_client.post(reverse("connection_new"), form()))  # duplicate error page
    pages.append(alice_client.post(reverse("connection_edit", args=[conn.pk]),
                                   form(repository="bad", token="replacement-token-1234")))
    for name in ("connection_list", "connection_new"):
        pages.append(alice_client.get(reverse(name)))
    for name in ("connection_detail", "connection_edit", "connection_delete"):
        pages.append(alice_client.get(reverse(name, args=[conn.pk])))
    for page in pages:
        text = page.content.decode()
        assert PASTED not in text and PASTED_SECRET not in text
        assert "replacement-token-1234" not in text
    logs = "\n".join(r.getMessage() for r in caplog.records)
    assert "connection" in logs
    for value in (PASTED, PASTED_SECRET, "replacement-token-1234", conn.token_sealed):
        assert value not in logs


def test_the_admin_shows_hints_only(alice, django_user_model):
    conn = make_conn(alice)
    delivery = WebhookDelivery.objects.create(connection=conn, delivery_id="d1", event="opened")
    root = django_user_model.objects.create_superuser("root", password="root-password-123")
    staff = Client()
    staff.force_login(root)
    pages = [reverse("admin:reviews_app_connection_changelist"),
             reverse("admin:reviews_app_connection_change", args=[conn.pk]),
             reverse("admin:reviews_app_webhookdelivery_changelist"),
             reverse("admin:reviews_app_webhookdelivery_change", args=[delivery.pk])]
    for url in pages:
        response = staff.get(url)
        assert response.status_code == 200, url
        text = response.content.decode()
        assert TOKEN not in text and SECRET not in text and conn.token_sealed not in text
    assert conn.token_hint in staff.get(pages[1]).content.decode()
    assert staff.get(reverse("admin:reviews_app_connection_add")).status_code == 403
    # The delivery is read-only; the connection's secrets cannot be set from the admin.
    staff.post(pages[3], {"event": "closed", "status": "done"})
    delivery.refresh_from_db()
    assert (delivery.event, delivery.status) == ("opened", "queued")
    staff.post(pages[1], {"token_env": "SECRET_KEY", "publish_policy": "never",
                          "auto_min_severity": "high", "auto_min_confidence": "0.5"})
    conn.refresh_from_db()
    assert conn.token_env == "" and secrets.token_of(conn) == TOKEN
