"""The webhook receiver: POST /webhooks/<provider>/<hook_id>/.

It answers quickly and calls no provider: check the size, the signature, the connection's
state, the delivery id and the payload's shape; store one WebhookDelivery; send the
``handle_delivery`` task when the transaction commits. Each refusal is a 4xx with a plain
sentence, and nothing is stored for it. The body and the secret are never logged.

Order of the checks (each a refusal with nothing saved): unknown hook or provider 404,
too large 413, bad or missing signature 401, inactive connection 403, no delivery id 400,
not JSON or not shaped as its event says 400, another repository 400, replayed delivery 409.
A ping answers 200 and stores nothing; an event Quorum does not act on is stored as
"ignored" with the reason (202).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import Http404, HttpResponse, HttpResponseNotAllowed
from django.views.decorators.csrf import csrf_exempt

from config import send_task
from reviews_app.hosting import webhooks
from reviews_app.models import Connection, WebhookDelivery

from .secrets import SecretUnavailable, secret_of

log = logging.getLogger("quorum.connections")

TASK = "reviews_app.tasks.handle_delivery"
_MAX_DELIVERY_ID = 100


def _answer(status: int, text: str) -> HttpResponse:
    return HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")


def _read_body(request, limit: int) -> bytes | None:
    """The body, or None when it is larger than ``limit`` (by its Content-Length or by what
    was read: a missing or false length does not get past the read)."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        return None
    body = request.read(limit + 1)
    return None if len(body) > limit else body


def _enqueue(pk: int) -> None:
    send_task(TASK, args=[pk])


def not_allowed() -> HttpResponse:
    # Said in plain text (the site's 405 page talks about forms): a person who opened the URL
    # to check it learns what it is for.
    return HttpResponseNotAllowed(
        ["POST"], content=b"This address receives webhooks from GitHub, GitLab or "
        b"Forgejo/Gitea: the provider POSTs to it. Nothing to see with a browser.\n",
        content_type="text/plain; charset=utf-8")


@dataclass
class Checked:
    """A delivery that passed the checks every delivery passes."""

    delivery: str
    payload: object


def check(request, provider: str, *, thing: str, pk: int, whose: str,
          secret: Callable[[], str], active: bool) -> Checked | HttpResponse:
    """The checks of every delivery, in order, each refusal a plain sentence with nothing
    stored: too large 413, secret unreadable 503, bad or missing signature 401, paused 403,
    no delivery id 400, not JSON 400. ``thing`` and ``pk`` name the receiver ("connection",
    3); ``whose`` its secret in the answers ("this connection's")."""
    label = f"{thing} {pk}"
    body = _read_body(request, settings.QUORUM_WEBHOOK_MAX_BYTES)
    if body is None:
        log.warning("webhook for %s: body over %s bytes refused", label,
                    settings.QUORUM_WEBHOOK_MAX_BYTES)
        return _answer(413, f"The payload is larger than {settings.QUORUM_WEBHOOK_MAX_BYTES} "
                            "bytes.")
    try:
        key = secret()
    except SecretUnavailable as exc:
        log.error("webhook for %s: %s", label, exc)
        return _answer(503, f"{whose[0].upper()}{whose[1:]} webhook secret is not available; "
                            "its owner can see why on its page in Quorum.")
    if not webhooks.verify(provider, request.headers, body, key):
        log.warning("webhook for %s: bad or missing signature", label)
        return _answer(401, f"The signature (or token) is missing or does not match {whose} "
                            "webhook secret.")
    if not active:
        return _answer(403, f"This {thing} is paused: turn it on in Quorum to receive "
                            "deliveries.")
    delivery = webhooks.delivery_id(provider, request.headers)
    if not delivery or len(delivery) > _MAX_DELIVERY_ID or not delivery.isprintable():
        return _answer(400, "The delivery has no usable delivery id header.")
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return _answer(400, "The payload is not JSON: set the webhook's content type to "
                            "application/json.")
    return Checked(delivery, payload)


@csrf_exempt
def receive(request, provider: str, hook_id: str):
    if request.method != "POST":
        return not_allowed()
    conn = None
    if provider in webhooks.PROVIDERS:
        conn = Connection.objects.filter(hook_id=hook_id, provider=provider).first()
    if conn is None:
        raise Http404("No such webhook.")
    got = check(request, provider, thing="connection", pk=conn.pk, whose="this connection's",
                secret=lambda: secret_of(conn), active=conn.active)
    if isinstance(got, HttpResponse):
        return got
    try:
        event = webhooks.parse(provider, request.headers, got.payload)
    except webhooks.BadPayload as exc:
        return _answer(400, str(exc))
    if isinstance(event, webhooks.Ignored) and event.ping:
        return _answer(200, "pong")
    return accept(conn, got.delivery, event, webhooks.event_name(provider, request.headers))


def accept(conn: Connection, delivery: str, event, name: str, *, app=None) -> HttpResponse:
    """Store a verified, parsed delivery for ``conn`` and answer. Only what Quorum would act
    on must be for the connection's repository (else 400: the sender's set-up is wrong); an
    event it ignores is answered 202 whatever it names, so the provider does not show a
    harmless delivery as failed. A ``/quorum review`` comment by Quorum's own account is
    ignored here when the account is known (the worker checks again when it is not)."""
    from reviews_app.prflow import account

    if isinstance(event, webhooks.HookEvent):
        if event.repository and event.repository.lower() != conn.repository.lower():
            log.warning("webhook for connection %s: delivery %s is for another repository",
                        conn.pk, delivery)
            return _answer(400, "The delivery is for another repository than this "
                                "connection's.")
        bot = account.known(conn)
        if event.kind == "command" and account.is_ours(conn, event.sender, bot):
            event = webhooks.Ignored(f"a /quorum review comment by Quorum's own account "
                                     f"({bot[:100]})", event.repository)
    elif event.repository and event.repository.lower() != conn.repository.lower():
        event = webhooks.Ignored(f"{event.reason} (and it names another repository)",
                                 event.repository)
    return _store(conn, delivery, event, name, app=app)


def _store(conn: Connection, delivery: str, event, name: str, *, app=None) -> HttpResponse:
    fields = {"connection": conn, "delivery_id": delivery, "app": app}
    if isinstance(event, webhooks.Ignored):
        fields.update(event="".join(c for c in name if c.isprintable())[:50], status=WebhookDelivery.Status.IGNORED,
                      detail=event.reason)
    else:
        fields.update(event=event.kind, number=event.number, head_sha=event.head_sha,
                      sender=event.sender, status=WebhookDelivery.Status.QUEUED,
                      detail="merged" if event.merged else "", fresh=event.fresh)
    same = WebhookDelivery.objects.filter(delivery_id=delivery)
    if (same.filter(app=app) if app is not None else
            same.filter(connection=conn, app__isnull=True)).exists():
        return _replayed(conn, delivery)
    try:
        with transaction.atomic():
            row = WebhookDelivery.objects.create(**fields)
            if row.status == WebhookDelivery.Status.QUEUED:
                transaction.on_commit(lambda: _enqueue(row.pk))
    except IntegrityError:
        return _replayed(conn, delivery)
    if row.status == WebhookDelivery.Status.IGNORED:
        log.info("webhook for connection %s: delivery %s ignored (%s)", conn.pk, delivery,
                 event.reason)
        return _answer(202, f"Ignored: {event.reason}.")
    log.info("webhook for connection %s: delivery %s queued (%s #%s)", conn.pk, delivery,
             row.event, row.number)
    return _answer(202, f"Queued: {row.event} #{row.number}.")


def _replayed(conn: Connection, delivery: str) -> HttpResponse:
    log.warning("webhook for connection %s: delivery %s replayed, refused", conn.pk, delivery)
    return _answer(409, "This delivery was received already.")
