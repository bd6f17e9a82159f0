"""Sending the outbox: email through Django's email backend, signed JSON (Standard Webhooks)
with httpx, chat messages through Apprise.

Each row is claimed first with a conditional update (its attempt count and next attempt time
as they were read), so two workers, or a task and the sweep, never send one row twice. The
send happens after the claim, outside any transaction (common/netguard.py checks it), and
its outcome is written afterwards: sent; failed for good (a refusal that another try would
not change, or the last of ``QUORUM_NOTIFY_MAX_ATTEMPTS``); or pending again with the next
attempt after an exponential backoff with jitter, or after the receiver's Retry-After.

No error written to a row or a log holds a secret or an endpoint's URL (a chat URL is its
credential).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import secrets
import smtplib
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db.models import Q
from django.utils import timezone
from django.utils.html import escape, linebreaks

from common import netguard, sealed, turns
from common.retry_after import retry_after_of
from config import send_task

from .models import Endpoint, Notification

log = logging.getLogger("quorum.notify")

DELIVER = "agents_app.notify.tasks.deliver"
LEASE_SECONDS = 300.0  # a claimed row the sweep may take again (its worker stopped mid-way)
LOST_SECONDS = 30.0  # a row never attempted this long after it was written: its task was lost
SWEEP_BATCH = 200
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
State = Notification.State
# Apprise schemes whose URL names a host of the user's choosing (the others go to a fixed
# service: Slack, Microsoft Teams, Discord, ...).
HOSTED_SCHEMES = frozenset({"json", "jsons", "form", "forms", "xml", "xmls", "mmost", "mmosts",
                            "matrix", "matrixs", "ntfy", "ntfys", "rocket", "rockets", "gotify",
                            "gotifys", "apprise", "apprises"})
LOOPBACK_CHAT_SCHEMES = frozenset({"json", "jsons", "form", "forms", "xml", "xmls"})
_rng = secrets.SystemRandom()


def send(ids: list[int]) -> None:
    """Put one delivery task for these rows on the broker (tests replace this function).
    A broker that does not take it loses nothing: the sweep sends the rows."""
    try:
        send_task(DELIVER, (list(ids),), ignore_result=True)
    except Exception as exc:  # noqa: BLE001 - the broker away: deliver_due sends them
        log.warning("could not enqueue notifications %s (the sweep sends them): %s", ids,
                    type(exc).__name__)


# --- timing -----------------------------------------------------------------------------------
def backoff(attempt: int, *, jitter: bool = True) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1, 2, ...): the base
    (``QUORUM_NOTIFY_RETRY_SECONDS``, 30 s) times 4 per attempt (30 s, 2 min, 8 min, 32 min,
    ~2 h, ...) up to ``QUORUM_NOTIFY_RETRY_CAP_SECONDS``, give or take 20 %."""
    cap = settings.QUORUM_NOTIFY_RETRY_CAP_SECONDS
    wait = min(settings.QUORUM_NOTIFY_RETRY_SECONDS * 4 ** max(attempt - 1, 0), cap)
    if jitter:
        wait *= _rng.uniform(0.8, 1.2)
    return min(wait, cap)


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header in seconds (delay-seconds or an HTTP date); None when absent or
    not understood (``common.retry_after``, as the code-host clients read it)."""
    return retry_after_of(httpx.Headers({"retry-after": value or ""}))


# --- outcomes ---------------------------------------------------------------------------------
@dataclass
class Outcome:
    ok: bool
    error: str = ""
    permanent: bool = False
    retry_after: float | None = None


def _scrub(text: str, *secret_texts: str) -> str:
    """``text`` without any of ``secret_texts`` nor their longer pieces (a URL's path
    segments and query values), cut to 500 characters."""
    pieces: set[str] = set()
    for s in secret_texts:
        if s:
            pieces.add(s)
            pieces.update(p for p in re.split(r"[/:?&=@#,;]+", s) if len(p) >= 6)
    for piece in sorted(pieces, key=len, reverse=True):
        text = text.replace(piece, "…")
    return text[:500]


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address_refusal(host: str, port: int | None) -> str:
    """Why a request to ``host`` is refused here (empty: it is not); see ``_checked``."""
    return _checked(host, port)[0]


def _checked(host: str, port: int | None) -> tuple[str, list[Address]]:
    """Why a request to ``host`` is refused here (empty: it is not), and the addresses it
    resolved to, in the resolver's order (empty: it did not resolve). Outside the tests any
    host is called, except addresses no webhook lives at (link-local, such as a cloud's
    metadata service, multicast, unspecified, reserved); with QUORUM_ALLOW_PROVIDER_REQUESTS
    false (the tests) only loopback ones."""
    if not host:
        return "The endpoint's address has no host.", []
    try:
        infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return "", []  # not resolved: the request itself fails and says so (and is retried)
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0])
                                   for info in infos))
    if not netguard.ALLOW_REMOTE_HOSTS and not all(a.is_loopback for a in addresses):
        return ("Requests to this host are blocked here (QUORUM_ALLOW_PROVIDER_REQUESTS is "
                "false): only loopback hosts are called."), addresses
    if any(never_called(a) for a in addresses):
        return ("The endpoint's host resolves to an address no webhook is sent to "
                "(link-local, multicast or reserved); it was not called."), addresses
    return "", addresses


def pinned(url: str, address: Address | None) -> tuple[str, dict[str, str], dict[str, str]]:
    """The request to ``url`` sent to ``address``, one its host was checked at: (the URL with
    that address for its host, the Host header, httpx's extensions). A name is not looked up a
    second time when the request connects, so DNS that answers one address to the check and
    another to the connection (rebinding) cannot move the request to an address the check
    refuses. HTTPS still names the host to the server (SNI) and checks the certificate against
    it. A URL whose host is an address, or one that did not resolve (``None``), is sent as it
    is."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
        return url, {}, {}
    except ValueError:
        pass
    if address is None:
        return url, {}, {}
    literal = f"[{address}]" if address.version == 6 else str(address)
    netloc = literal + (f":{parts.port}" if parts.port is not None else "")
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return (urlunsplit(parts._replace(netloc=netloc)),
            {"host": parts.netloc.rpartition("@")[2]}, extensions)


MAX_ADDRESSES_TRIED = 4


def _post_pinned(url: str, addresses: list[Address], body: bytes,
                 headers: dict[str, str]) -> httpx.Response:
    """POST to the checked ``addresses`` in the resolver's order, the next one only when the
    previous could not be connected to (as a connection to the name itself would: an IPv6
    address first on a machine without an IPv6 route, one server of several down). Nothing
    was sent to one that refused the connection, so no message is sent twice. The response's
    body is not read (``_http_outcome`` needs the status and headers only)."""
    *first, last = addresses[:MAX_ADDRESSES_TRIED] or [None]
    with httpx.Client(timeout=settings.QUORUM_NOTIFY_TIMEOUT, follow_redirects=False,
                      trust_env=False) as client:

        def post(address: Address | None) -> httpx.Response:
            target, host_header, extensions = pinned(url, address)
            with client.stream("POST", target, content=body, headers={**headers, **host_header},
                               extensions=extensions) as resp:
                return resp

        for address in first:
            try:
                return post(address)
            except httpx.ConnectError:
                continue
        return post(last)


def never_called(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """An address no webhook lives at: link-local (a cloud's metadata service), multicast,
    unspecified, reserved. The form refuses such a literal address; the sender, any host
    that resolves to one."""
    return (address.is_link_local or address.is_multicast or address.is_unspecified
            or address.is_reserved)


def _http_outcome(status: int, retry_after: str | None, what: str) -> Outcome:
    if 200 <= status < 300:
        return Outcome(True)
    if 300 <= status < 400:
        return Outcome(False, f"{what} answered {status}, a redirect; redirects are not "
                              "followed. Enter the final address.", permanent=True)
    if status >= 500 or status in RETRYABLE_4XX:
        return Outcome(False, f"{what} answered {status}; tried again later.",
                       retry_after=retry_after_seconds(retry_after))
    return Outcome(False, f"{what} answered {status}; not tried again (an answer 4xx other "
                          "than 408, 409, 425 or 429 means the receiver refuses the message "
                          "itself: check the endpoint's address and secret).", permanent=True)


# --- the three channels -----------------------------------------------------------------------
def _send_email(n: Notification) -> Outcome:
    user = n.recipient
    address = getattr(user, "email", "") if user else ""
    if not address:
        return Outcome(False, "The person has no email address any more.", permanent=True)
    url = n.payload.get("data", {}).get("url", "") if isinstance(n.payload, dict) else ""
    html = linebreaks(escape(n.body))
    if url:
        html += f'<p><a href="{escape(url)}">Open the gate in Quorum</a></p>'
    msg = EmailMultiAlternatives(n.subject, n.body, settings.DEFAULT_FROM_EMAIL, [address])
    msg.attach_alternative(html, "text/html")
    netguard.before_network("An email notification")
    try:
        with turns.waiting():
            msg.send()
    except smtplib.SMTPRecipientsRefused:
        return Outcome(False, "The mail server refused the address.", permanent=True)
    except (smtplib.SMTPException, OSError) as exc:
        return Outcome(False, f"The mail server could not be reached or refused the message "
                              f"({type(exc).__name__}); tried again later.")
    return Outcome(True)


def signed_request(secret: str, payload: dict, msg_id: str,
                   when: datetime | None = None) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a Standard Webhooks message (webhook-id, webhook-timestamp,
    webhook-signature "v1,<base64 HMAC-SHA256>")."""
    from standardwebhooks.webhooks import Webhook

    when = when or datetime.now(tz=UTC)
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    signature = Webhook(secret).sign(msg_id=msg_id, timestamp=when, data=body)
    return body.encode("utf-8"), {
        "webhook-id": msg_id, "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": signature, "content-type": "application/json",
        "user-agent": "Quorum-Webhooks/1"}


def _send_signed(n: Notification, ep: Endpoint) -> Outcome:
    try:
        url, secret = sealed.unseal(ep.url_sealed), sealed.unseal(ep.secret_sealed)
    except sealed.UnsealError:
        return Outcome(False, "The endpoint's address or secret cannot be read with the current "
                              "key (QUORUM_SECRETS_KEY changed?): add the endpoint again.",
                       permanent=True)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return Outcome(False, "The endpoint's address is not http or https.", permanent=True)
    try:
        port = parts.port
    except ValueError:
        return Outcome(False, "The endpoint's address has a port that is not a number.",
                       permanent=True)
    with turns.waiting():  # a DNS lookup: a wait outside the process
        refusal, addresses = _checked(parts.hostname or "", port)
    if refusal:
        return Outcome(False, refusal, permanent=True)
    body, headers = signed_request(secret, n.payload, f"msg_quorum_{n.pk}")
    netguard.before_network(f"A webhook to the endpoint {ep.pk}")
    what = f"The endpoint {ep.name!r}"
    try:
        with turns.waiting():
            resp = _post_pinned(url, addresses, body, headers)
        return _http_outcome(resp.status_code, resp.headers.get("retry-after"), what)
    except httpx.HTTPError as exc:
        detail = _scrub(str(exc) or type(exc).__name__, url, secret)[:200]
        return Outcome(False, f"{what} could not be reached ({type(exc).__name__}: {detail}); "
                              "tried again later.")


def _send_chat(n: Notification, ep: Endpoint) -> Outcome:
    import apprise

    try:
        url = sealed.unseal(ep.url_sealed)
    except sealed.UnsealError:
        return Outcome(False, "The endpoint's address cannot be read with the current key "
                              "(QUORUM_SECRETS_KEY changed?): add the endpoint again.",
                       permanent=True)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if not netguard.ALLOW_REMOTE_HOSTS and scheme not in LOOPBACK_CHAT_SCHEMES:
        return Outcome(False, "Chat services are not called here (QUORUM_ALLOW_PROVIDER_"
                              "REQUESTS is false).", permanent=True)
    if scheme in HOSTED_SCHEMES:
        try:
            port = parts.port
        except ValueError:
            port = None
        with turns.waiting():  # a DNS lookup: a wait outside the process
            refusal = _address_refusal(parts.hostname or "", port)
        if refusal:
            return Outcome(False, refusal, permanent=True)
    sender = apprise.Apprise()
    if not sender.add(url):
        return Outcome(False, "Apprise does not understand the endpoint's address any more.",
                       permanent=True)
    netguard.before_network(f"A chat message to the endpoint {ep.pk}")
    with turns.waiting(), apprise.LogCapture(level=logging.WARNING) as said:
        ok = sender.notify(title=n.subject, body=n.body)
    if ok:
        return Outcome(True)
    detail = " ".join(said.getvalue().split()) if hasattr(said, "getvalue") else ""
    detail = _scrub(detail, url)[:300]
    return Outcome(False, f"The chat service did not take the message"
                          f"{': ' + detail if detail else ''}; tried again later.")


# --- claiming and recording -------------------------------------------------------------------
def claim(pk: int) -> Notification | None:
    """Take the row for one attempt, or None when it is not due, is sent or failed, or another
    worker took it first. Taking it counts the attempt and pushes its next attempt a lease
    away, in one conditional update on the values as they were read."""
    now = timezone.now()
    row = (Notification.objects.filter(pk=pk, state=State.PENDING)
           .values_list("attempts", "next_attempt_at").first())
    if row is None:
        return None
    attempts, next_at = row
    if next_at is not None and next_at > now:
        return None
    same = Notification.objects.filter(pk=pk, state=State.PENDING, attempts=attempts)
    same = same.filter(next_attempt_at__isnull=True) if next_at is None else \
        same.filter(next_attempt_at=next_at)
    if attempts >= settings.QUORUM_NOTIFY_MAX_ATTEMPTS:
        same.update(state=State.FAILED, next_attempt_at=None,
                    last_error=f"Gave up after {attempts} attempts; the last one did not report "
                               "back (its worker stopped mid-way?).")
        return None
    if same.update(attempts=attempts + 1,
                   next_attempt_at=now + timedelta(seconds=LEASE_SECONDS)) != 1:
        return None
    return Notification.objects.select_related("endpoint", "recipient").get(pk=pk)


def attempt(n: Notification) -> Outcome:
    """Send one claimed row (no transaction may be open: the send waits on the network)."""
    if n.channel == "email":
        return _send_email(n)
    ep = n.endpoint
    if ep is None:
        return Outcome(False, "The notification has no recipient.", permanent=True)
    if not ep.active:
        return Outcome(False, "The endpoint was turned off.", permanent=True)
    if ep.style == Endpoint.Style.CHAT:
        return _send_chat(n, ep)
    return _send_signed(n, ep)


def record(n: Notification, outcome: Outcome) -> str:
    """Write the outcome of the attempt ``n`` was claimed for; returns the new state."""
    now = timezone.now()
    mine = Notification.objects.filter(pk=n.pk, state=State.PENDING, attempts=n.attempts)
    if outcome.ok:
        mine.update(state=State.SENT, sent_at=now, next_attempt_at=None, last_error="")
        return State.SENT
    error = outcome.error[:1000]
    if outcome.permanent or n.attempts >= settings.QUORUM_NOTIFY_MAX_ATTEMPTS:
        if not outcome.permanent:
            error = f"Gave up after {n.attempts} attempts. Last: {error}"
        mine.update(state=State.FAILED, next_attempt_at=None, last_error=error)
        log.warning("notification %s failed for good: %s", n.pk, error)
        return State.FAILED
    cap = settings.QUORUM_NOTIFY_RETRY_CAP_SECONDS
    wait = (min(max(outcome.retry_after, 1.0), cap) if outcome.retry_after is not None
            else backoff(n.attempts))
    mine.update(next_attempt_at=now + timedelta(seconds=wait), last_error=error)
    log.info("notification %s: attempt %s failed, next in %.0f s", n.pk, n.attempts, wait)
    return State.PENDING


def deliver_one(pk: int) -> str | None:
    """Claim, send and record one row; None when it was not claimed."""
    n = claim(pk)
    if n is None:
        return None
    try:
        outcome = attempt(n)
    except netguard.NetworkInTransaction:
        raise
    except Exception as exc:  # noqa: BLE001 - a failed send is retried, never lost
        log.exception("notification %s: unexpected error", pk)
        outcome = Outcome(False, f"Unexpected error ({type(exc).__name__}); tried again later.")
    return record(n, outcome)


def deliver_many(ids) -> dict[int, str | None]:
    return {int(pk): deliver_one(int(pk)) for pk in ids}


def due_ids(limit: int = SWEEP_BATCH) -> list[int]:
    now = timezone.now()
    lost = now - timedelta(seconds=LOST_SECONDS)
    return list(Notification.objects.filter(state=State.PENDING).filter(
        Q(next_attempt_at__lte=now) | Q(next_attempt_at__isnull=True, created_at__lte=lost))
        .order_by("next_attempt_at", "pk").values_list("pk", flat=True)[:limit])


def deliver_due(limit: int = SWEEP_BATCH) -> int:
    """Send what is due (retries whose time came, rows whose task was lost); returns how
    many were sent."""
    return sum(1 for state in deliver_many(due_ids(limit)).values() if state == State.SENT)
