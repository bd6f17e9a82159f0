"""Notifications (issue 35): the decision link a notification carries, and the settings page
(choices, endpoints, team endpoints, a test message)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import signing
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from agents_app.gates.models import GateOpening, GateVote
from agents_app.models import Run
from agents_app.notify import deliver, links
from agents_app.notify.models import DecisionLink, Endpoint, Notification, Preference
from agents_app.teams.models import Membership, Role, Team
from common import sealed

from .test_notify import Receiver

pytestmark = pytest.mark.django_db

SETTINGS = "/settings/notifications/"
NEW = "/settings/notifications/endpoints/new/"


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    calls: list[list[int]] = []
    monkeypatch.setattr(deliver, "send", lambda ids: calls.append(list(ids)))
    return calls


@pytest.fixture
def opening(gated_run):
    run = gated_run
    # The stop the engine recorded, and what it sent, are replaced by the test's own.
    Notification.objects.all().delete()
    GateOpening.objects.filter(run=run).delete()
    return GateOpening.objects.create(run=run, gate=run.gate, opened_seq=run.stage_seq,
                                      seq=run.stage_seq)


def path_of(url: str) -> str:
    assert url.startswith("http://127.0.0.1:8000/")
    return url[len("http://127.0.0.1:8000"):]


def state(opening) -> tuple:
    run = Run.objects.get(pk=opening.run_id)
    o = GateOpening.objects.get(pk=opening.pk)
    return (run.status, run.stage_seq, run.gate, o.closed_at, o.outcome,
            GateVote.objects.count())


# --- decision links ---------------------------------------------------------------------------
def test_the_owner_follows_once_then_it_is_used(alice, alice_client, opening):
    before = state(opening)
    url = path_of(links.link_for(alice, opening))
    assert url.startswith("/inbox/link/")
    response = alice_client.get(url)
    assert response.status_code == 302
    assert response.url == opening.run.get_absolute_url() + "#gate"
    link = DecisionLink.objects.get()
    assert link.used_at is not None
    assert state(opening) == before  # following decides nothing
    again = alice_client.get(url)
    assert again.status_code == 410 and b"already used" in again.content
    assert state(opening) == before


def test_another_user_gets_404_and_the_link_stays_unused(alice, bob_client, opening):
    url = path_of(links.link_for(alice, opening))
    response = bob_client.get(url)
    assert response.status_code == 404 and b"not valid" in response.content
    assert DecisionLink.objects.get().used_at is None


def test_anonymous_is_sent_to_sign_in_and_back(alice, client, opening):
    url = path_of(links.link_for(alice, opening))
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/?next=/inbox/link/")
    assert DecisionLink.objects.get().used_at is None


def test_an_expired_link_is_gone(alice, alice_client, opening):
    url = path_of(links.link_for(alice, opening))
    DecisionLink.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    response = alice_client.get(url)
    assert response.status_code == 410 and b"expired" in response.content
    assert DecisionLink.objects.get().used_at is None


def test_the_link_lifetime_comes_from_the_setting(alice, opening, settings):
    settings.QUORUM_LINK_HOURS = 2
    links.link_for(alice, opening)
    left = DecisionLink.objects.get().expires_at - timezone.now()
    assert timedelta(minutes=119) < left <= timedelta(hours=2)


@pytest.mark.parametrize("forge", ["altered", "other-salt", "garbage", "no-nonce"])
def test_a_forged_link_is_not_found(alice, alice_client, opening, forge):
    token = links.issue(alice, opening)
    nonce = DecisionLink.objects.get().nonce
    bad = {"altered": token[:-2] + ("AA" if not token.endswith("AA") else "BB"),
           "other-salt": signing.dumps({"n": nonce}, salt="something.else"),
           "garbage": "not-a-token",
           "no-nonce": signing.dumps({"x": 1}, salt=links.SALT)}[forge]
    response = alice_client.get(reverse("decision_link", args=[bad]))
    assert response.status_code == 404 and b"not valid" in response.content
    assert DecisionLink.objects.get().used_at is None


def test_a_link_is_never_followed_by_post(alice, alice_client, opening):
    url = path_of(links.link_for(alice, opening))
    assert alice_client.post(url).status_code == 405
    assert DecisionLink.objects.get().used_at is None


# --- the settings page ------------------------------------------------------------------------
def test_anonymous_is_sent_to_sign_in(client):
    for url in (SETTINGS, NEW):
        response = client.get(url) if url == SETTINGS else client.post(url, {})
        assert response.status_code == 302 and response.url.startswith("/accounts/login/")


def test_the_page_shows_choices_and_endpoints(alice, alice_client):
    response = alice_client.get(SETTINGS)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('name="email_kinds"') == 6 and html.count('name="webhook_kinds"') == 6
    assert html.count("checked") == 12  # nothing saved yet: everything
    assert "No endpoint yet" in html and "has no email address" in html
    assert 'name="team"' not in html  # Alice administers no team


def test_saving_choices(alice, alice_client):
    response = alice_client.post("/settings/notifications/choices/",
                                 {"email_kinds": ["opened", "reminder"], "webhook_kinds": []})
    assert response.status_code == 302
    pref = Preference.objects.get(user=alice)
    assert pref.email_kinds == ["opened", "reminder"] and pref.webhook_kinds == []
    html = alice_client.get(SETTINGS).content.decode()
    assert html.count("checked") == 2
    bad = alice_client.post("/settings/notifications/choices/", {"email_kinds": ["sneeze"]})
    assert bad.status_code == 400 and "not one of the available choices" in bad.content.decode()
    assert Preference.objects.get(user=alice).email_kinds == ["opened", "reminder"]


def test_adding_a_signed_endpoint_shows_its_secret_once(alice, alice_client):
    response = alice_client.post(NEW, {"name": "CI", "style": "signed",
                                       "url": "https://hooks.example.org/quorum?k=abcdef123456",
                                       "kinds": ["opened", "decided"]})
    assert response.status_code == 302
    ep = Endpoint.objects.get()
    assert (ep.owner, ep.team, ep.name, ep.kinds) == (alice, None, "CI", ["opened", "decided"])
    assert ep.url_hint == "https://hooks.example.org/…"
    assert "abcdef123456" not in ep.url_sealed
    secret = sealed.unseal(ep.secret_sealed)
    assert secret.startswith("whsec_")
    Webhook(secret)  # a valid Standard Webhooks secret
    html = alice_client.get(SETTINGS).content.decode()
    assert secret in html and "not shown again" in html and "abcdef123456" not in html
    assert secret not in alice_client.get(SETTINGS).content.decode()


def test_adding_a_chat_endpoint(alice, alice_client):
    response = alice_client.post(NEW, {"name": "Team chat", "style": "chat",
                                       "url": "json://127.0.0.1:9/notify"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"].startswith(SETTINGS)
    ep = Endpoint.objects.get()
    assert ep.style == "chat" and ep.secret_sealed == "" and ep.url_hint == "json://…tify"
    assert len(ep.kinds) == 6  # none ticked: all


BAD = [
    ({"name": "", "style": "signed", "url": "https://x.example.org/"}, "Give the endpoint a name"),
    ({"name": "a", "style": "signed", "url": ""}, "Enter the endpoint"),
    ({"name": "a", "style": "signed", "url": "ftp://x.example.org/"}, "starts with https://"),
    ({"name": "a", "style": "signed", "url": "javascript:alert(1)"}, "starts with https://"),
    ({"name": "a", "style": "signed", "url": "https://u:p@x.example.org/"}, "no user name"),
    ({"name": "a", "style": "signed", "url": "https://x.example.org:99999/"}, "port"),
    ({"name": "a\x00b", "style": "signed", "url": "https://x.example.org/"}, "Null characters"),
    ({"name": "a", "style": "signed", "url": "https://x.example.org/\x00"}, "Null characters"),
    ({"name": "a", "style": "signed", "url": "https://x.example.org/" + "a" * 10_000},
     "at most 2,000 characters"),
    ({"name": "n" * 101, "style": "signed", "url": "https://x.example.org/"}, "at most 100"),
    ({"name": "a", "style": "signed", "url": "https://[zz::1]/hook"}, "cannot be read"),
    ({"name": "a", "style": "signed", "url": "https://[::1/hook"}, "cannot be read"),
    ({"name": "a", "style": "signed", "url": "https://" + "a" * 64 + ".example.org/"},
     "too long to exist"),
    ({"name": "a", "style": "signed", "url": "https://" + "abcdefghi." * 26 + "org/"},
     "too long to exist"),
    ({"name": "a", "style": "chat", "url": "nonsense://whatever"}, "Apprise does not understand"),
    ({"name": "a", "style": "carrier-pigeon", "url": "https://x.example.org/"},
     "not one of the available choices"),
]


@pytest.mark.parametrize("data,message", BAD)
def test_bad_endpoints_are_refused_with_a_clear_message(alice, alice_client, data, message):
    response = alice_client.post(NEW, data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize("url", ["https://" + "a" * 63 + ".example.org/hook",
                                 "http://receiver:8080/hook", "https://[2001:db8::1]/hook",
                                 "https://hooks.example.org./x"])
def test_host_names_at_the_limits_are_taken(alice, alice_client, url):
    assert alice_client.post(NEW, {"name": "ok", "style": "signed", "url": url}).status_code == 302


def test_a_double_submission_saves_one(alice, alice_client):
    data = {"name": "CI", "style": "signed", "url": "https://hooks.example.org/q"}
    assert alice_client.post(NEW, data).status_code == 302
    again = alice_client.post(NEW, data)
    assert again.status_code == 400 and "exists already" in again.content.decode()
    same_url = alice_client.post(NEW, {**data, "name": "CI 2"})
    assert same_url.status_code == 400 and "this address exists already" in \
        same_url.content.decode()
    assert Endpoint.objects.count() == 1


def make_endpoint(owner, team=None, url="https://hooks.example.org/x", name="hook"):
    return Endpoint.objects.create(owner=owner, team=team, name=name, style="signed",
                                   url_sealed=sealed.seal(url), url_hint="https://…",
                                   secret_sealed=sealed.seal("whsec_" + "A" * 44))


def notify(ep, n, state="sent", error=""):
    return Notification.objects.create(key=f"{ep.pk}-{n}", kind="opened", channel="webhook",
                                       endpoint=ep, subject=f"note {n}", state=state,
                                       last_error=error)


def test_each_endpoint_shows_its_own_latest_notification_in_a_fixed_number_of_queries(
        alice, alice_client, django_assert_max_num_queries):
    def page():
        return alice_client.get(SETTINGS).content.decode()

    first = make_endpoint(alice, name="first")
    notify(first, 1, "failed", "older failure")
    notify(first, 2, "failed", "refused by the receiver")
    with django_assert_max_num_queries(100) as one:
        page()
    for i in range(8):  # more endpoints, each with notifications of its own
        ep = make_endpoint(alice, url=f"https://hooks.example.org/{i}", name=f"more {i}")
        notify(ep, 1)
        notify(ep, 2, "pending")
    make_endpoint(alice, url="https://hooks.example.org/quiet", name="quiet")
    with django_assert_max_num_queries(len(one.captured_queries)):
        html = page()
    assert "refused by the receiver" in html and "older failure" not in html
    assert html.count("Waiting to be sent") == 8 and "none yet" in html


def test_another_user_cannot_test_or_delete(alice, bob_client):
    ep = make_endpoint(alice)
    for what in ("test", "delete"):
        response = bob_client.post(f"/settings/notifications/endpoints/{ep.pk}/{what}/")
        assert response.status_code == 404
    assert Endpoint.objects.filter(pk=ep.pk).exists() and not Notification.objects.exists()
    assert f"endpoint-{ep.pk}" not in bob_client.get(SETTINGS).content.decode()


def test_the_owner_deletes(alice, alice_client):
    ep = make_endpoint(alice)
    response = alice_client.post(f"/settings/notifications/endpoints/{ep.pk}/delete/")
    assert response.status_code == 302 and not Endpoint.objects.exists()
    assert alice_client.get(f"/settings/notifications/endpoints/{ep.pk}/delete/").status_code \
        == 405


def test_send_a_test_goes_through_the_outbox_to_the_receiver(alice, alice_client, sent,
                                                             django_capture_on_commit_callbacks):
    r = Receiver((200, {}))
    try:
        alice_client.post(NEW, {"name": "CI", "style": "signed", "url": r.url})
        ep = Endpoint.objects.get()
        secret = sealed.unseal(ep.secret_sealed)
        with django_capture_on_commit_callbacks(execute=True):
            response = alice_client.post(f"/settings/notifications/endpoints/{ep.pk}/test/")
        assert response.status_code == 302
        n = Notification.objects.get()
        assert (n.kind, n.endpoint, n.opening) == ("test", ep, None)
        assert sent == [[n.pk]]
        again = alice_client.post(f"/settings/notifications/endpoints/{ep.pk}/test/")
        assert again.status_code == 302 and Notification.objects.count() == 1  # a double click
        assert deliver.deliver_many([n.pk]) == {n.pk: "sent"}
        ((headers, body, _),) = r.requests
        payload = Webhook(secret).verify(body, headers)
        assert payload["type"] == "quorum.test" and payload["data"]["endpoint"] == "CI"
        assert "Sent" in alice_client.get(SETTINGS).content.decode()
    finally:
        r.close()


def test_a_team_admin_adds_a_team_endpoint(alice, bob, alice_client):
    bob_client = Client()  # alice_client and bob_client would be one client
    bob_client.force_login(bob)
    team = Team.objects.create(name="Platform")
    Membership.objects.create(team=team, user=alice, role=Role.ADMIN)
    Membership.objects.create(team=team, user=bob, role=Role.APPROVER)
    html = alice_client.get(SETTINGS).content.decode()
    assert 'name="team"' in html and "Platform" in html
    response = alice_client.post(NEW, {"name": "Platform chat", "style": "signed",
                                       "url": "https://hooks.example.org/p", "team": team.pk})
    assert response.status_code == 302
    ep = Endpoint.objects.get()
    assert ep.team == team and ep.owner == alice
    # Bob decides the team's gates but does not administer it: no team field, no access.
    assert 'name="team"' not in bob_client.get(SETTINGS).content.decode()
    refused = bob_client.post(NEW, {"name": "mine", "style": "signed",
                                    "url": "https://hooks.example.org/b", "team": team.pk})
    assert refused.status_code == 302  # the unknown field is ignored: his own endpoint
    assert Endpoint.objects.get(name="mine").team is None
    assert bob_client.post(f"/settings/notifications/endpoints/{ep.pk}/delete/").status_code \
        == 404
    # Another admin of the team manages it too.
    Membership.objects.filter(user=bob).update(role=Role.ADMIN)
    assert bob_client.post(f"/settings/notifications/endpoints/{ep.pk}/delete/").status_code \
        == 302


def test_a_member_cannot_pick_a_team_he_does_not_administer(alice, bob, bob_client):
    mine = Team.objects.create(name="Mine")
    theirs = Team.objects.create(name="Theirs")
    Membership.objects.create(team=mine, user=bob, role=Role.ADMIN)
    Membership.objects.create(team=theirs, user=bob, role=Role.MEMBER)
    response = bob_client.post(NEW, {"name": "x", "style": "signed",
                                     "url": "https://hooks.example.org/p", "team": theirs.pk})
    assert response.status_code == 400 and "valid choice" in response.content.decode()
    assert not Endpoint.objects.exists()


def test_a_literal_metadata_address_is_refused_when_saved(alice_client):
    for url in ("http://169.254.169.254/latest", "https://[fe80::1]/hook", "http://224.0.0.1/"):
        response = alice_client.post(reverse("notification_endpoint_new"), {
            "name": "meta", "style": "signed", "url": url})
        assert response.status_code == 400 and "no webhook is ever sent" in \
            response.content.decode(), url
    assert not Endpoint.objects.exists()
