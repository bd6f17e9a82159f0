"""Notifications (issue 35): the outbox, and delivery by email, signed webhooks (Standard
Webhooks, checked by a real receiver on loopback) and Apprise. The only fake is the far side:
an HTTP server in a thread that answers what each test scripts."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import threading
from datetime import timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from django.core import mail
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from agents_app.gates.models import GateOpening
from agents_app.notify import deliver, outbox
from agents_app.notify.forms import new_secret, url_hint
from agents_app.notify.models import DecisionLink, Endpoint, Kind, Notification, Preference
from agents_app.teams.models import Membership, Role, Team
from common import netguard, sealed

pytestmark = pytest.mark.django_db


class Receiver:
    """A webhook receiver on 127.0.0.1: answers the scripted (status, headers) in turn (the
    last one again once the script is used up) and keeps each request's headers and body."""

    def __init__(self, *answers: tuple[int, dict]):
        self.answers = list(answers) or [(200, {})]
        self.requests: list[tuple[dict, bytes, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()},
                                          body, self.path))
                status, headers = receiver.answers[min(len(receiver.requests) - 1,
                                                       len(receiver.answers) - 1)]
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made: list[Receiver] = []

    def make(*answers):
        r = Receiver(*answers)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    """The delivery tasks that would go on the broker: the lists of ids, in order."""
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
                                      seq=run.stage_seq, required=2,
                                      deadline_at=timezone.now() + timedelta(hours=4))


def signed_endpoint(owner, url, *, team=None, kinds=None, name="hook", active=True):
    secret = new_secret()
    ep = Endpoint.objects.create(owner=owner, team=team, name=name, style="signed",
                                 url_sealed=sealed.seal(url), url_hint=url_hint("signed", url),
                                 secret_sealed=sealed.seal(secret), active=active,
                                 **({"kinds": kinds} if kinds is not None else {}))
    return ep, secret


def with_email(user, address):
    user.email = address
    user.save(update_fields=["email"])
    return user


def due_now(n: Notification) -> None:
    Notification.objects.filter(pk=n.pk).update(next_attempt_at=timezone.now()
                                                - timedelta(seconds=1))


# --- the outbox -------------------------------------------------------------------------------
def test_announce_follows_preferences_and_endpoint_kinds(alice, bob, django_user_model,
                                                        opening, sent):
    with_email(alice, "alice@example.org")
    with_email(bob, "bob@example.org")
    Preference.objects.create(user=bob, email_kinds=[], webhook_kinds=["opened"])
    carol = django_user_model.objects.create_user("carol")  # no email address
    mine, _ = signed_endpoint(alice, "https://hooks.example.org/a")
    signed_endpoint(alice, "https://hooks.example.org/b", kinds=["decided"], name="other")
    signed_endpoint(alice, "https://hooks.example.org/c", active=False, name="off")
    bobs, _ = signed_endpoint(bob, "https://hooks.example.org/d", name="bobs")

    rows = outbox.announce(Kind.OPENED, opening, [alice, bob, carol, alice],
                           detail="Alice started it")
    got = {(n.channel, n.recipient_id, n.endpoint_id) for n in rows}
    assert got == {("email", alice.pk, None), ("webhook", None, mine.pk),
                   ("webhook", None, bobs.pk)}
    assert all(n.state == "pending" and n.attempts == 0 for n in rows)
    assert Notification.objects.count() == 3

    # Bob's webhook choices leave out "reset": his endpoint gets nothing, Alice's does.
    rows = outbox.announce(Kind.RESET, opening, [alice, bob], serial="7")
    assert {(n.channel, n.endpoint_id) for n in rows} == {("email", None),
                                                          ("webhook", mine.pk)}


def test_announce_twice_adds_nothing(alice, opening, sent):
    with_email(alice, "alice@example.org")
    signed_endpoint(alice, "https://hooks.example.org/a")
    first = outbox.announce(Kind.OPENED, opening, [alice])
    links = DecisionLink.objects.count()
    again = outbox.announce(Kind.OPENED, opening, [alice])  # a redelivered task
    assert [n.pk for n in again] == [n.pk for n in first] and len(first) == 2
    assert Notification.objects.count() == 2
    assert DecisionLink.objects.count() == links == 2  # no link made for nothing
    assert len({n.key for n in first}) == 2
    # Another event of the same kind (the next reminder, say) is told apart by its serial.
    assert len(outbox.announce(Kind.OPENED, opening, [alice], serial="2")) == 2
    assert Notification.objects.count() == 4


def test_team_endpoints_get_the_run_url_not_a_personal_link(alice, bob, opening, sent):
    team = Team.objects.create(name="Platform")
    Membership.objects.create(team=team, user=alice, role=Role.ADMIN)
    opening.team = team
    opening.save(update_fields=["team"])
    ep, secret = signed_endpoint(alice, "https://hooks.example.org/team", team=team)
    signed_endpoint(alice, "https://hooks.example.org/team2", team=team, kinds=["decided"],
                    name="decisions only")
    rows = outbox.announce(Kind.ESCALATED, opening, teams=[team], detail="No one decided")
    assert len(rows) == 1
    n = rows[0]
    assert (n.channel, n.endpoint_id, n.recipient_id) == ("webhook", ep.pk, None)
    data = n.payload["data"]
    assert n.payload["type"] == "gate.escalated"
    assert data["url"] == f"http://127.0.0.1:8000/runs/{opening.run_id}/#gate"
    assert data["team"] == "Platform" and data["required"] == 2 and data["approvals"] == 0
    assert data["run"] == opening.run_id and data["opening"] == opening.pk
    assert data["gate"] == opening.gate and data["detail"] == "No one decided"
    assert data["deadline"] == opening.deadline_at.isoformat()
    assert "/inbox/link/" not in n.body and not DecisionLink.objects.exists()
    everything = json.dumps(n.payload) + n.body + n.subject
    assert secret not in everything and "hooks.example.org" not in everything


def test_the_message_names_the_run_gate_cause_cost_deadline_and_a_link(alice, opening, sent):
    with_email(alice, "alice@example.org")
    (n,) = outbox.announce(Kind.OPENED, opening, [alice], detail="Alice started the run")
    run = opening.run
    assert f"run #{run.pk}" in n.subject and "Collect logs, then find the error." in n.subject
    for words in (f"Run #{run.pk}", "Collect logs, then find the error.", "Approvals: 0 of 2",
                  "Why: Alice started the run", "Cost so far: $", "Deadline: ",
                  "http://127.0.0.1:8000/inbox/link/", "works once"):
        assert words in n.body, words
    link = DecisionLink.objects.get()
    assert link.user == alice and link.opening == opening and link.used_at is None
    assert n.payload["data"]["url"] in n.body


def test_nothing_is_sent_before_the_transaction_commits(alice, opening, sent,
                                                        django_capture_on_commit_callbacks):
    with_email(alice, "alice@example.org")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            rows = outbox.announce(Kind.OPENED, opening, [alice])
            assert sent == []
        assert sent == []  # still inside the (test's) outer transaction
    assert len(callbacks) == 1
    assert sent == [[rows[0].pk]]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_announce_sends_nothing(alice, opening, sent):
    with_email(alice, "alice@example.org")
    with pytest.raises(RuntimeError), transaction.atomic():
        outbox.announce(Kind.OPENED, opening, [alice])
        raise RuntimeError("the gate logic failed")
    assert sent == [] and not Notification.objects.exists()
    with transaction.atomic():
        (n,) = outbox.announce(Kind.OPENED, opening, [alice])
        assert sent == []
    assert sent == [[n.pk]]


def test_unknown_kind_is_refused(alice, opening):
    with pytest.raises(ValueError):
        outbox.announce("sneeze", opening, [alice])


# --- email ------------------------------------------------------------------------------------
def test_email_arrives_with_the_run_the_gate_and_a_link(alice, opening, sent):
    with_email(alice, "alice@example.org")
    opening.run.task = "Fix <script>alert(1)</script> in the header\nand more"
    opening.run.save(update_fields=["task"])
    (n,) = outbox.announce(Kind.ASSIGNED, opening, [alice], detail="Bob assigned it to you")
    assert deliver.deliver_many([n.pk]) == {n.pk: "sent"}
    (msg,) = mail.outbox
    assert msg.to == ["alice@example.org"]
    assert f"run #{opening.run_id}" in msg.subject and "Fix <script>" in msg.subject
    assert "/inbox/link/" in msg.body and "Bob assigned it to you" in msg.body
    html, mime = msg.alternatives[0]
    assert mime == "text/html" and "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="http://127.0.0.1:8000/inbox/link/' in html
    n.refresh_from_db()
    assert (n.state, n.attempts, n.sent_at is not None) == ("sent", 1, True)
    assert deliver.deliver_many([n.pk]) == {n.pk: None}  # sent: never again
    assert len(mail.outbox) == 1


# --- signed webhooks --------------------------------------------------------------------------
def test_signed_webhook_verifies_and_a_changed_message_does_not(alice, opening, receiver):
    r = receiver((200, {}))
    ep, secret = signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert deliver.deliver_one(n.pk) == "sent"
    ((headers, body, path),) = r.requests
    assert path == "/hook"
    assert {"webhook-id", "webhook-timestamp", "webhook-signature"} <= set(headers)
    assert headers["content-type"] == "application/json"
    assert headers["webhook-id"] == f"msg_quorum_{n.pk}"
    payload = Webhook(secret).verify(body, headers)
    assert payload["type"] == "gate.opened" and payload["data"]["run"] == opening.run_id
    assert payload["data"]["url"].startswith("http://127.0.0.1:8000/inbox/link/")
    assert secret not in body.decode()
    with pytest.raises(WebhookVerificationError):  # a changed body
        Webhook(secret).verify(body.replace(b"gate.opened", b"gate.decided"), headers)
    with pytest.raises(WebhookVerificationError):  # the same body replayed at another time
        Webhook(secret).verify(body, {**headers, "webhook-timestamp": str(
            int(headers["webhook-timestamp"]) + 60)})
    with pytest.raises(WebhookVerificationError):  # another endpoint's secret
        Webhook(new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):  # an old message replayed much later
        Webhook(secret).verify(body, {**headers, "webhook-timestamp": str(
            int(headers["webhook-timestamp"]) - 3600)})


def test_a_500_is_retried_with_backoff_then_sent(alice, opening, receiver):
    r = receiver((500, {}), (200, {}))
    ep, secret = signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    before = timezone.now()
    assert deliver.deliver_one(n.pk) == "pending"
    n.refresh_from_db()
    assert n.attempts == 1 and "answered 500" in n.last_error
    wait = (n.next_attempt_at - before).total_seconds()
    assert 30 * 0.8 - 1 <= wait <= 30 * 1.2 + 1
    assert deliver.deliver_one(n.pk) is None  # not due yet: nothing sent
    assert n.pk not in deliver.due_ids()
    assert len(r.requests) == 1
    due_now(n)
    assert n.pk in deliver.due_ids()
    assert deliver.deliver_due() == 1
    n.refresh_from_db()
    assert (n.state, n.attempts, n.last_error) == ("sent", 2, "")
    assert len(r.requests) == 2
    # The same message id both times (a receiver can drop the duplicate), both signed.
    assert r.requests[0][0]["webhook-id"] == r.requests[1][0]["webhook-id"]
    for headers, body, _ in r.requests:
        Webhook(secret).verify(body, headers)


@pytest.mark.parametrize("header,expect", [("120", 120), ("http-date", 300)])
def test_retry_after_is_honoured(alice, opening, receiver, header, expect):
    if header == "http-date":
        header = format_datetime(timezone.now() + timedelta(seconds=300), usegmt=True)
    r = receiver((429, {"Retry-After": header}))
    signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    before = timezone.now()
    assert deliver.deliver_one(n.pk) == "pending"
    n.refresh_from_db()
    wait = (n.next_attempt_at - before).total_seconds()
    assert expect - 3 <= wait <= expect + 3
    assert "429" in n.last_error


def test_retry_after_is_capped(alice, opening, receiver, settings):
    settings.QUORUM_NOTIFY_RETRY_CAP_SECONDS = 600
    r = receiver((503, {"Retry-After": "86400"}))
    signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    before = timezone.now()
    deliver.deliver_one(n.pk)
    n.refresh_from_db()
    assert 595 <= (n.next_attempt_at - before).total_seconds() <= 605


def test_a_404_fails_at_once_and_says_why_without_the_url(alice, opening, receiver):
    r = receiver((404, {}))
    ep, secret = signed_endpoint(alice, r.url + "/s3cr3t-path-token")
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert deliver.deliver_one(n.pk) == "failed"
    n.refresh_from_db()
    assert n.state == "failed" and n.attempts == 1 and n.next_attempt_at is None
    assert "answered 404" in n.last_error and "not tried again" in n.last_error
    assert "s3cr3t-path-token" not in n.last_error and secret not in n.last_error
    assert deliver.deliver_due() == 0 and len(r.requests) == 1


def test_an_unreachable_endpoint_is_retried_and_the_error_has_no_url(alice, opening, receiver):
    r = receiver()
    url = r.url + "/tok3n-in-path"
    r.close()  # nothing listens there any more
    signed_endpoint(alice, url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert deliver.deliver_one(n.pk) == "pending"
    n.refresh_from_db()
    assert "could not be reached" in n.last_error and "tok3n-in-path" not in n.last_error


def test_failed_for_good_after_the_last_attempt(alice, opening, receiver, settings):
    r = receiver((503, {}))
    signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    states = []
    for _ in range(settings.QUORUM_NOTIFY_MAX_ATTEMPTS):
        due_now(n)
        states.append(deliver.deliver_one(n.pk))
    assert states == ["pending"] * 7 + ["failed"]
    n.refresh_from_db()
    assert n.state == "failed" and n.attempts == 8
    assert n.last_error.startswith("Gave up after 8 attempts") and "503" in n.last_error
    due_now(n)
    assert deliver.deliver_one(n.pk) is None and len(r.requests) == 8


def test_backoff_schedule():
    assert [deliver.backoff(a, jitter=False) for a in range(1, 8)] == \
        [30, 120, 480, 1920, 7680, 21600, 21600]
    for a in range(1, 6):
        for _ in range(20):
            assert 0.8 * deliver.backoff(a, jitter=False) <= deliver.backoff(a) \
                <= 1.2 * deliver.backoff(a, jitter=False)
    assert deliver.retry_after_seconds("soon") is None
    assert deliver.retry_after_seconds("") is None
    assert deliver.retry_after_seconds(
        format_datetime(timezone.now() - timedelta(hours=1), usegmt=True)) == 0


def test_a_claim_is_taken_once(alice, opening, receiver):
    r = receiver((200, {}))
    signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    first = deliver.claim(n.pk)
    assert first is not None and first.attempts == 1
    assert deliver.claim(n.pk) is None  # claimed: its next attempt is a lease away
    assert deliver.deliver_many([n.pk, n.pk]) == {n.pk: None}
    assert deliver.record(first, deliver.attempt(first)) == "sent"
    assert len(r.requests) == 1


def test_a_claim_whose_worker_stopped_is_taken_again_after_its_lease(alice, opening, receiver):
    r = receiver((200, {}))
    signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert deliver.claim(n.pk) is not None  # and then the worker died
    assert n.pk not in deliver.due_ids()
    Notification.objects.filter(pk=n.pk).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert deliver.deliver_due() == 1
    n.refresh_from_db()
    assert (n.state, n.attempts) == ("sent", 2)


def test_a_lost_task_is_swept_after_thirty_seconds(alice, opening):
    with_email(alice, "alice@example.org")
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert n.pk not in deliver.due_ids()  # its task is on the way
    Notification.objects.filter(pk=n.pk).update(created_at=timezone.now()
                                                - timedelta(seconds=31))
    assert deliver.due_ids() == [n.pk]
    assert deliver.deliver_due() == 1 and len(mail.outbox) == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_send_one_row_once(alice, opening, receiver):
    r = receiver((200, {}))
    signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    results, barrier = [], threading.Barrier(4)

    def work():
        from django.db import connection

        barrier.wait()
        try:
            results.append(deliver.deliver_one(n.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(map(str, results)) == ["None", "None", "None", "sent"]
    assert len(r.requests) == 1


def test_the_network_is_never_called_inside_a_transaction(alice, opening, receiver):
    r = receiver((200, {}))
    signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    with pytest.raises(netguard.NetworkInTransaction), transaction.atomic():
        deliver.deliver_one(n.pk)
    assert r.requests == []


def test_addresses_no_webhook_lives_at_are_refused(monkeypatch):
    monkeypatch.setattr(netguard, "ALLOW_REMOTE_HOSTS", True)
    assert "link-local" in deliver._address_refusal("169.254.169.254", 80)
    assert "link-local" in deliver._address_refusal("0.0.0.0", 80)  # noqa: S104
    assert deliver._address_refusal("127.0.0.1", 80) == ""
    monkeypatch.setattr(netguard, "ALLOW_REMOTE_HOSTS", False)
    assert "blocked here" in deliver._address_refusal("192.0.2.10", 80)


def rebinding_dns(monkeypatch, host: str, *answers: str) -> list[str]:
    """``host`` resolves to each of ``answers`` in turn (the last one again once used up), as
    a hostile name server does; other names as usual. Returns the answers given."""
    real, given = socket.getaddrinfo, []

    def getaddrinfo(name, port, *args, **kwargs):
        if name != host:
            return real(name, port, *args, **kwargs)
        given.append(answers[min(len(given), len(answers) - 1)])
        return real(given[-1], port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return given


def test_a_name_that_rebinds_after_the_check_is_still_sent_where_it_was_checked(
        alice, opening, receiver, monkeypatch):
    """The name passes the check at a loopback address, then answers another one (where
    nothing listens); the request goes to the checked address, under its own Host."""
    r = receiver((200, {}))
    port = r.server.server_address[1]
    given = rebinding_dns(monkeypatch, "hooks.rebind.test", "127.0.0.1", "127.0.0.2")
    signed_endpoint(alice, f"http://hooks.rebind.test:{port}/hook")
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert deliver.deliver_one(n.pk) == "sent"
    assert given == ["127.0.0.1"]  # looked up once: by the check
    (headers, _, path), = r.requests
    assert headers["host"] == f"hooks.rebind.test:{port}" and path == "/hook"


def test_an_address_that_cannot_be_connected_to_gives_way_to_the_next(alice, opening, receiver,
                                                                       monkeypatch):
    """The name has two addresses and nothing listens at the first (an IPv6 address first on a
    machine without an IPv6 route, say): the message goes to the second, once."""
    r = receiver((200, {}))
    port = r.server.server_address[1]
    real = socket.getaddrinfo

    def two(name, p, *args, **kwargs):
        if name != "hooks.two.test":
            return real(name, p, *args, **kwargs)
        return real("127.0.0.2", p, *args, **kwargs) + real("127.0.0.1", p, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", two)
    signed_endpoint(alice, f"http://hooks.two.test:{port}/hook")
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert deliver.deliver_one(n.pk) == "sent"
    assert len(r.requests) == 1 and r.requests[0][0]["host"] == f"hooks.two.test:{port}"


def test_a_name_that_rebinds_to_a_refused_address_is_not_called(alice, opening, receiver,
                                                                 monkeypatch):
    monkeypatch.setattr(netguard, "ALLOW_REMOTE_HOSTS", True)
    r = receiver((200, {}))
    rebinding_dns(monkeypatch, "hooks.rebind.test", "169.254.169.254", "127.0.0.1")
    signed_endpoint(alice, f"http://hooks.rebind.test:{r.server.server_address[1]}/hook")
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert deliver.deliver_one(n.pk) == "failed" and r.requests == []
    n.refresh_from_db()
    assert "link-local" in n.last_error


def test_https_keeps_the_name_for_the_certificate():
    url, host, extensions = deliver.pinned("https://hooks.example.org:8443/x?y=1",
                                           ipaddress.ip_address("203.0.113.7"))
    assert url == "https://203.0.113.7:8443/x?y=1"
    assert host == {"host": "hooks.example.org:8443"}
    assert extensions == {"sni_hostname": "hooks.example.org"}
    v6, _, _ = deliver.pinned("https://hooks.example.org/x", ipaddress.ip_address("2001:db8::7"))
    assert v6 == "https://[2001:db8::7]/x"
    assert deliver.pinned("http://127.0.0.1:9/x", ipaddress.ip_address("127.0.0.1")) == \
        ("http://127.0.0.1:9/x", {}, {})
    assert deliver.pinned("http://hooks.example.org/x", None) == \
        ("http://hooks.example.org/x", {}, {})


def self_signed(tmp_path, name: str) -> tuple[str, str]:
    """A certificate for ``name`` (its own authority) and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = timezone.now()
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=1)).not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def test_over_https_the_pinned_request_names_the_host_and_checks_its_certificate(
        tmp_path, receiver):
    """A real TLS server whose certificate names the host, not the address: the request sent
    to the address still offers the name (SNI) and verifies the certificate against it."""
    cert, key = self_signed(tmp_path, "hooks.pin.test")
    r = receiver((204, {}))
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    offered: list[str | None] = []
    server_tls.sni_callback = lambda sock, name, ctx: offered.append(name)
    r.server.socket = server_tls.wrap_socket(r.server.socket, server_side=True)
    port = r.server.server_address[1]
    url, host, extensions = deliver.pinned(f"https://hooks.pin.test:{port}/hook",
                                           ipaddress.ip_address("127.0.0.1"))
    with httpx.Client(verify=ssl.create_default_context(cafile=cert)) as client:
        assert client.post(url, content=b"{}", headers=host,
                           extensions=extensions).status_code == 204
        assert offered == ["hooks.pin.test"]
        assert r.requests[0][0]["host"] == f"hooks.pin.test:{port}"
        with pytest.raises(httpx.ConnectError, match="IP address mismatch"):
            client.post(url, content=b"{}", headers=host)  # the name left out: refused


def test_a_turned_off_endpoint_is_not_called(alice, opening, receiver):
    r = receiver((200, {}))
    ep, _ = signed_endpoint(alice, r.url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    Endpoint.objects.filter(pk=ep.pk).update(active=False)
    assert deliver.deliver_one(n.pk) == "failed" and r.requests == []


# --- chat through Apprise ---------------------------------------------------------------------
def chat_endpoint(owner, url, **kw):
    return Endpoint.objects.create(owner=owner, name="chat", style="chat",
                                   url_sealed=sealed.seal(url), url_hint=url_hint("chat", url),
                                   **kw)


def test_chat_message_goes_through_apprise(alice, opening, receiver):
    r = receiver((200, {}))
    chat_endpoint(alice, r.url.replace("http://", "json://"))
    (n,) = outbox.announce(Kind.OPENED, opening, [alice], detail="Alice started it")
    assert deliver.deliver_one(n.pk) == "sent"
    ((headers, body, path),) = r.requests
    message = json.loads(body)
    assert message["title"] == n.subject and "Why: Alice started it" in message["message"]


def test_chat_failure_is_retried_without_the_url(alice, opening, receiver):
    r = receiver((500, {}))
    url = r.url.replace("http://", "json://") + "/t0ken-part"
    chat_endpoint(alice, url)
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert deliver.deliver_one(n.pk) == "pending"
    n.refresh_from_db()
    assert "did not take the message" in n.last_error and "t0ken-part" not in n.last_error


def test_chat_services_are_not_called_from_the_tests(alice, opening):
    chat_endpoint(alice, "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ")
    (n,) = outbox.announce(Kind.OPENED, opening, [alice])
    assert deliver.deliver_one(n.pk) == "failed"
    n.refresh_from_db()
    assert "not called here" in n.last_error and "TIiajkdnl" not in n.last_error
