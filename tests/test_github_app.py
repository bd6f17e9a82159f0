"""GitHub App installation (issue 31), against the fake GitHub over HTTP: the App's form, its
JWT (RS256) and installation tokens minted and cached per installation, installation events
that make every installed repository a connection, pull request events on the App's webhook,
and the "Quorum" check run branch protection can require."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from reviews_app.connections import github_app, secrets
from reviews_app.connections.secrets import SecretUnavailable
from reviews_app.hosting.github_app import app_jwt
from reviews_app.models import Connection, GitHubApp, Installation, WebhookDelivery
from tests.pr_hosts_support import BASE, ORDERS_FIXED, Flow, hosts, make_flow
from tests.webhook_helpers import (
    APP_KEY,
    github_comment,
    github_pr,
    installation_payload,
    make_app,
    post_app,
    public_pem,
)

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["hosts", "make_flow"]
APP_ID = "4242"


@pytest.fixture
def app_hosts(hosts):
    hosts.add_app(APP_ID, "quorum-review", public_pem(APP_KEY), name="Quorum Review")
    hosts.install(77, APP_ID, ["octo/shop"])
    return hosts


@pytest.fixture
def app(alice, app_hosts):
    return make_app(alice, api_url=app_hosts.api_url("github"), app_id=APP_ID, slug="")


@pytest.fixture
def staff(alice):
    alice.is_staff = True  # staff may use any API host (the fake, on loopback)
    alice.save(update_fields=["is_staff"])
    return alice


# --- the form -----------------------------------------------------------------------------------
def test_connecting_an_app_learns_its_name_and_shows_the_secret_once(client, staff, app_hosts):
    client.force_login(staff)
    response = client.post(reverse("github_app_new"), {
        "app_id": APP_ID, "api_url": app_hosts.api_url("github"), "private_key": APP_KEY,
        "publish_policy": "after_triage", "active": "on"})
    app = GitHubApp.objects.get()
    assert response.status_code == 302 and response.url == app.get_absolute_url()
    assert app.slug == "quorum-review" and app.bot_login == "quorum-review[bot]"
    assert app.key_sealed and APP_KEY not in app.key_sealed and app.key_hint.startswith("SHA256:")
    page = client.get(app.get_absolute_url()).content.decode()
    assert 'id="new-secret"' in page and "quorum-review[bot]" in page
    assert reverse("github_app_webhook", args=[app.hook_id]) in page
    assert "Checks" in page and "Read and write" in page
    again = client.get(app.get_absolute_url()).content.decode()
    assert 'id="new-secret"' not in again and "BEGIN RSA" not in again


@pytest.mark.parametrize("fields, field, message", [
    ({"app_id": "12ab"}, "app_id", "The App ID is a number"),
    ({"private_key": "not a key"}, "private_key", "not a private key GitHub made"),
    ({"private_key": "-----BEGIN RSA PRIVATE KEY-----\x00"}, "private_key",
     "Null characters are not allowed"),
    ({"private_key": "k" * 20_000}, "private_key", "at most 10000 characters"),
    ({"private_key": ""}, "private_key", "private key or name the environment variable"),
    ({"key_env": "SECRET_KEY"}, "key_env", "starting with QUORUM_CONN_"),
    ({"secret": "short"}, "secret", "at least 16 characters"),
    ({"api_url": "https://evil.example/api"}, "api_url", "You may connect only to"),
])
def test_bad_app_forms_say_why_and_save_nothing(client, alice, fields, field, message):
    client.force_login(alice)
    data = {"app_id": APP_ID, "api_url": "", "private_key": APP_KEY,
            "publish_policy": "after_triage", "active": "on", **fields}
    response = client.post(reverse("github_app_new"), data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not GitHubApp.objects.exists()


def test_the_same_app_twice_is_refused(client, alice):
    client.force_login(alice)
    make_app(alice, app_id=APP_ID)
    response = client.post(reverse("github_app_new"), {
        "app_id": APP_ID, "api_url": "", "private_key": APP_KEY,
        "publish_policy": "after_triage", "active": "on"})
    assert response.status_code == 400 and "connected this App already" in response.content.decode()
    assert GitHubApp.objects.count() == 1


def test_another_users_app_is_a_404_and_its_pages_need_sign_in(client, alice, bob):
    app = make_app(alice)
    for name in ("github_app_detail", "github_app_edit", "github_app_delete"):
        url = reverse(name, args=[app.pk])
        assert client.get(url).status_code == 302  # anonymous: the sign-in page
        client.force_login(bob)
        assert client.get(url).status_code == 404
        if name != "github_app_detail":
            assert client.post(url, {"app_id": "1"}).status_code == 404
        client.logout()
    assert GitHubApp.objects.get().app_id == app.app_id


# --- installation events ------------------------------------------------------------------------
def test_an_installation_makes_each_repository_a_connection_without_a_token(client, app, alice):
    old = Connection.objects.create(owner=alice, provider="github", repository="octo/old",
                                    api_url=app.api_url, token_env="QUORUM_CONN_OLD",
                                    bot_login="someone")
    payload = installation_payload(repos=("octo/shop", "octo/old"))
    response = post_app(client, app, payload, "installation")
    assert response.status_code == 202, response.content
    inst = Installation.objects.get()
    assert (inst.installation_id, inst.account, inst.active) == (77, "octo", True)
    shop = Connection.objects.get(repository="octo/shop")
    assert shop.installation == inst and shop.owner == alice and not shop.token_env
    client.force_login(alice)
    page = client.get(shop.get_absolute_url()).content.decode()
    assert 'id="app-webhook"' in page and "installation token of the GitHub App" in page
    assert 'id="webhook-url"' not in page
    old.refresh_from_db()
    assert old.installation == inst and old.bot_login == ""  # switched to the App
    app.refresh_from_db()
    assert app.slug == "quorum-review"  # the payload names it too
    [d] = WebhookDelivery.objects.filter(app=app)
    assert d.status == "done" and "1 connection(s) made, 1 switched" in d.detail
    # A replay is refused; repositories removed are paused; an uninstall pauses them all.
    assert post_app(client, app, payload, "installation",
                    delivery=d.delivery_id).status_code == 409
    removed = installation_payload("removed", repos=("octo/old",), key="repositories_removed")
    assert post_app(client, app, removed, "installation_repositories").status_code == 202
    assert not Connection.objects.get(repository="octo/old").active
    assert Connection.objects.get(repository="octo/shop").active
    assert post_app(client, app, installation_payload("deleted"),
                    "installation").status_code == 202
    inst.refresh_from_db()
    assert not inst.active and not Connection.objects.filter(active=True).exists()


def test_the_apps_webhook_checks_its_signature_and_answers_every_event(client, app):
    bad = post_app(client, app, installation_payload(), "installation", secret="wrong" * 8)
    assert bad.status_code == 401 and not Installation.objects.exists()
    assert post_app(client, app, {"zen": "Hi"}, "ping").status_code == 200
    for event in ("installation_target", "github_app_authorization", "security_advisory"):
        assert post_app(client, app, {"action": "x"}, event).status_code == 202, event
    malformed = post_app(client, app, {"action": "created"}, "installation")
    assert malformed.status_code == 400


def test_pull_request_events_on_the_apps_webhook_reach_the_repositorys_connection(
        client, app, monkeypatch):
    from reviews_app.connections import webhook

    queued = []
    monkeypatch.setattr(webhook, "_enqueue", queued.append)
    post_app(client, app, installation_payload(repos=("octo/shop",)), "installation")
    conn = Connection.objects.get(repository="octo/shop")
    pr = github_pr(repo="octo/shop", number=1) | {"installation": {"id": 77}}
    assert post_app(client, app, pr, "pull_request").status_code == 202
    [d] = WebhookDelivery.objects.filter(connection=conn)
    assert d.status == "queued" and d.app == app and queued == [d.pk]
    # The App's own "/quorum review" (its bot) is ignored; a repository it is not installed
    # on is recorded on the App and ignored.
    bot = github_comment(repo="octo/shop", number=1) | {"installation": {"id": 77}}
    bot["comment"]["user"]["login"] = "quorum-review[bot]"
    assert post_app(client, app, bot, "issue_comment").status_code == 202
    assert WebhookDelivery.objects.filter(connection=conn).order_by("-id")[0].status == "ignored"
    other = github_pr(repo="octo/elsewhere", number=1) | {"installation": {"id": 77}}
    assert post_app(client, app, other, "pull_request").status_code == 202
    assert WebhookDelivery.objects.filter(app=app, connection__isnull=True,
                                          event="pull_request").exists()
    assert len(queued) == 1


# --- tokens ---------------------------------------------------------------------------------------
def test_installation_tokens_are_minted_once_cached_and_minted_again_near_expiry(
        client, app, app_hosts):
    post_app(client, app, installation_payload(repos=("octo/shop",)), "installation")
    conn = Connection.objects.select_related("installation__app").get(repository="octo/shop")
    ref = secrets.repo_ref(conn)
    assert ref.app and ref.bot_login == "quorum-review[bot]" and ref.token.startswith("ghs_")
    again = secrets.repo_ref(Connection.objects.select_related("installation__app").get(
        pk=conn.pk))
    mints = [r for r in app_hosts.requests if r.route.endswith("/access_tokens")]
    assert again.token == ref.token and len(mints) == 1
    inst = Installation.objects.get()
    assert inst.token_sealed and ref.token not in inst.token_sealed
    Installation.objects.update(token_expires_at=timezone.now() + dt.timedelta(minutes=4))
    fresh = secrets.repo_ref(Connection.objects.select_related("installation__app").get(
        pk=conn.pk))
    assert fresh.token != ref.token
    assert len([r for r in app_hosts.requests if r.route.endswith("/access_tokens")]) == 2
    # The JWT is RS256, issued a minute back and valid under ten minutes.
    import jwt
    claims = jwt.decode(app_jwt(APP_ID, APP_KEY), public_pem(APP_KEY), algorithms=["RS256"])
    assert claims["iss"] == APP_ID and claims["exp"] - claims["iat"] <= 600


def test_an_uninstalled_app_or_a_bad_key_cannot_be_used_and_says_why(client, app):
    post_app(client, app, installation_payload(repos=("octo/shop",)), "installation")
    conn = Connection.objects.select_related("installation__app").get(repository="octo/shop")
    GitHubApp.objects.filter(pk=app.pk).update(key_sealed=__import__(
        "common.sealed", fromlist=["seal"]).seal("not a key"))
    conn = Connection.objects.select_related("installation__app").get(pk=conn.pk)
    with pytest.raises(SecretUnavailable, match="private key could not be used"):
        secrets.repo_ref(conn)
    post_app(client, app, installation_payload("deleted"), "installation")
    conn = Connection.objects.select_related("installation__app").get(pk=conn.pk)
    with pytest.raises(SecretUnavailable, match="no longer installed"):
        github_app.installation_token(conn.installation)


# --- the check run --------------------------------------------------------------------------------
def test_an_app_connection_reports_a_check_run_green_only_after_a_person_approves(
        client, app, app_hosts, make_flow, alice):
    flow = make_flow("github")  # the flow's harness, on the App's connection instead
    flow.conn.delete()
    post_app(client, app, installation_payload(repos=("octo/shop",)), "installation")
    flow.conn = Connection.objects.get(repository="octo/shop")
    pull = app_hosts.open_pull(1, repo="octo/shop", base=BASE,
                               head={"shop/orders.py": ORDERS_FIXED})
    # The provider saves the check run but answers 502: the next write finds it by name.
    ghost = app_hosts.ghost("/check-runs", method="POST")
    _, out = flow.deliver("opened")
    review = flow.round(out)
    assert ghost.hits == 1 and not app_hosts.required_green(1, repo="octo/shop")
    flow.finalise(review, alice)
    repo = app_hosts.repos["octo/shop"]
    [run] = [c for c in repo.check_runs if c["head_sha"] == pull.head_sha]
    assert run["history"][-1] == "completed:success" and run["author"] == "quorum-review[bot]"
    assert "Approved by alice" in run["output"]["summary"]
    assert app_hosts.required_green(1, repo="octo/shop")
    # The App wrote everything as its bot; it never asked "GET /user" (its token cannot).
    assert "/user" not in app_hosts.routes("GET")
    assert {c["author"] for c in pull.comments} == {"quorum-review[bot]"}
    assert isinstance(flow, Flow)
