"""GitHub Apps, the way organisations connect review tools (issue 31): the App's key and
secret, installation tokens minted and cached per installation, and the App's webhook, where
installation events make every installed repository a connection (no token to paste) and
pull request events reach the connection of their repository.

An installation token is minted with a JWT signed by the App's key (a network call: never
inside a transaction), sealed and kept on the installation's row until five minutes before
it expires, so every worker process shares it.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.db import IntegrityError, transaction
from django.http import Http404, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from common import sealed
from reviews_app.hosting import webhooks
from reviews_app.hosting.base import HostError
from reviews_app.hosting.github_app import AppClient, InstallationChange, installation_event
from reviews_app.models import Connection, GitHubApp, Installation, WebhookDelivery

from .secrets import SecretUnavailable, value_of

log = logging.getLogger("quorum.connections")
REFRESH_BEFORE = dt.timedelta(minutes=5)


def key_of(app: GitHubApp) -> str:
    return value_of(f"GitHub App {app.pk}", "private key", app.key_env, app.key_sealed)


def secret_of(app: GitHubApp) -> str:
    return value_of(f"GitHub App {app.pk}", "webhook secret", app.secret_env, app.secret_sealed)


def app_client(app: GitHubApp, *, timeout: float = 20.0) -> AppClient:
    try:
        return AppClient(app.api_url, app.app_id, key_of(app), timeout=timeout)
    except HostError as exc:  # a key that is not an RSA key: the owner must fix it
        raise SecretUnavailable(str(exc)) from None


def learn_slug(app: GitHubApp, *, timeout: float = 10.0) -> str:
    """Ask GitHub who the App is (its slug names its bot, ``<slug>[bot]``); '' with the
    reason logged when it does not answer."""
    try:
        client = app_client(app, timeout=timeout)
    except SecretUnavailable as exc:
        log.info("GitHub App %s: %s", app.pk, exc)
        return ""
    try:
        info = client.app()
    except HostError as exc:
        log.info("GitHub App %s: not identified (%s)", app.pk, exc)
        return ""
    finally:
        client.close()
    GitHubApp.objects.filter(pk=app.pk).update(slug=info.slug, name=info.name)
    app.slug, app.name = info.slug, info.name
    return info.slug


def installation_token(inst: Installation) -> str:
    """A token for the installation's repositories: the cached one while it has more than
    five minutes left, else a new one (minted outside any transaction). Raises
    SecretUnavailable when the installation or the App cannot be used, HostError when GitHub
    did not answer."""
    app = inst.app
    if not inst.active or not app.active:
        raise SecretUnavailable(f"The GitHub App {app.slug or app.app_id} is no longer "
                                f"installed on {inst.account or 'this account'} (or is "
                                "paused): reinstall it, or give the connection a token.")
    now = timezone.now()
    if inst.token_sealed and inst.token_expires_at and inst.token_expires_at - now > \
            REFRESH_BEFORE:
        try:
            return sealed.unseal(inst.token_sealed)
        except sealed.UnsealError:
            pass  # the key changed: mint another
    client = app_client(app)
    try:
        minted = client.installation_token(inst.installation_id)
    except HostError as exc:
        if exc.retryable:
            raise
        raise SecretUnavailable(f"GitHub would not give the App a token for installation "
                                f"{inst.installation_id}: {exc}") from None
    finally:
        client.close()
    Installation.objects.filter(pk=inst.pk).update(token_sealed=sealed.seal(minted.token),
                                                   token_expires_at=minted.expires_at)
    inst.token_sealed, inst.token_expires_at = sealed.seal(minted.token), minted.expires_at
    return minted.token


# --- installation events -------------------------------------------------------------------------
def apply_change(app: GitHubApp, change: InstallationChange) -> str:
    """Record an installation event: the installation's row, a connection per installed
    repository (a connection the owner had already to that repository is switched to the
    App), and removed repositories paused. Database only: no provider call."""
    with transaction.atomic():
        inst, _ = Installation.objects.select_for_update().get_or_create(
            app=app, installation_id=change.installation_id,
            defaults={"account": change.account})
        inst.account = change.account or inst.account
        inst.active = change.active
        if not change.active:
            inst.token_sealed, inst.token_expires_at = "", None
        inst.save()
        if change.app_slug and not app.slug:
            GitHubApp.objects.filter(pk=app.pk).update(slug=change.app_slug)
        made, switched = 0, 0
        for name in change.added:
            conn = Connection.objects.filter(owner=app.owner, provider=Connection.Provider.GITHUB,
                                             api_url=app.api_url,
                                             repository__iexact=name).first()
            if conn is None:
                Connection.objects.create(
                    owner=app.owner, provider=Connection.Provider.GITHUB, repository=name,
                    api_url=app.api_url, installation=inst, publish_policy=app.publish_policy)
                made += 1
            else:
                Connection.objects.filter(pk=conn.pk).update(installation=inst, active=True,
                                                             bot_login="")
                switched += 1
        gone = Connection.objects.filter(installation=inst)
        if not change.active:
            paused = gone.update(active=False)
        else:
            paused = gone.filter(repository__in=change.removed).update(active=False)
            for name in change.removed:  # another spelling of the name
                paused += gone.filter(repository__iexact=name, active=True).update(active=False)
    parts = [f"installation {change.installation_id} ({change.account or '?'}) {change.action}"]
    if made or switched:
        parts.append(f"{made} connection(s) made, {switched} switched to the App")
    if paused:
        parts.append(f"{paused} connection(s) paused")
    return "; ".join(parts) + "."


def _answer(status: int, text: str) -> HttpResponse:
    return HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")


@csrf_exempt
def receive(request, hook_id: str):
    """POST /webhooks/github-app/<hook_id>/: the App's deliveries, checked like a
    connection's (size, signature, delivery id, shape; nothing stored for a refusal)."""
    from .webhook import Checked, accept, check, not_allowed

    if request.method != "POST":
        return not_allowed()
    app = GitHubApp.objects.filter(hook_id=hook_id).select_related("owner").first()
    if app is None:
        raise Http404("No such webhook.")
    got = check(request, "github", thing="GitHub App", pk=app.pk, whose="the App's",
                secret=lambda: secret_of(app), active=app.active)
    if not isinstance(got, Checked):
        return got
    payload, delivery = got.payload, got.delivery
    if not isinstance(payload, dict):
        return _answer(400, "The payload is not a JSON object.")
    name = webhooks.event_name("github", request.headers)
    try:
        change = installation_event(name, payload)
    except ValueError as exc:
        return _answer(400, str(exc))
    if change is not None or name in ("ping", "installation", "installation_repositories",
                                      "github_app_authorization"):
        return _app_event(app, delivery, name, change)
    try:
        event = webhooks.parse("github", request.headers, payload)
    except webhooks.BadPayload as exc:
        return _answer(400, str(exc))
    conn = _connection_for(app, payload, event)
    if conn is None:
        reason = ("not from a repository this App's installations have in Quorum"
                  if not isinstance(event, webhooks.Ignored) else event.reason)
        return _app_event(app, delivery, name, None, reason)
    if not conn.active:
        return _app_event(app, delivery, name, None,
                          f"the connection to {conn.repository} is paused")
    return accept(conn, delivery, event, name, app=app)


def _connection_for(app: GitHubApp, payload: dict, event) -> Connection | None:
    inst = payload.get("installation")
    inst_id = inst.get("id") if isinstance(inst, dict) else None
    repo = getattr(event, "repository", "") or ""
    if not isinstance(inst_id, int) or isinstance(inst_id, bool) or not repo:
        return None
    return (Connection.objects.filter(installation__app=app,
                                      installation__installation_id=inst_id,
                                      repository__iexact=repo)
            .select_related("installation__app").first())


def _app_event(app: GitHubApp, delivery: str, name: str, change: InstallationChange | None,
               reason: str = "") -> HttpResponse:
    """An App-level delivery (installations, pings, events for no connection): recorded on
    the App, answered 2xx."""
    if name == "ping":
        return _answer(200, "pong")
    clean = "".join(c for c in name if c.isprintable())[:50]
    if WebhookDelivery.objects.filter(app=app, delivery_id=delivery).exists():
        return _answer(409, "This delivery was received already.")
    try:
        with transaction.atomic():
            row = WebhookDelivery.objects.create(app=app, connection=None, delivery_id=delivery,
                                                 event=clean,
                                                 status=WebhookDelivery.Status.IGNORED,
                                                 detail=reason or f"event {clean!r}")
    except IntegrityError:
        return _answer(409, "This delivery was received already.")
    if change is None:
        return _answer(202, f"Ignored: {reason or 'not acted on'}.")
    detail = apply_change(app, change)
    WebhookDelivery.objects.filter(pk=row.pk).update(status=WebhookDelivery.Status.DONE,
                                                     detail=detail)
    log.info("GitHub App %s: %s", app.pk, detail)
    return _answer(202, f"Done: {detail}")
