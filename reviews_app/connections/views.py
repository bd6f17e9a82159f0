"""The connection pages: list, new, detail, edit, delete. Owner-scoped: another user's
connection is a 404, staff included (staff see every connection in the admin)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from agents_app.teams.access import can_administer, visible
from common import sealed
from common.web import go
from reviews_app.models import Connection, GitHubApp, PullRequest, Review
from reviews_app.prflow import account

from . import secrets
from .forms import ConnectionForm

log = logging.getLogger("quorum.connections")

_SESSION_KEY = "quorum_new_hook_secret_{}"  # the generated secret, sealed, until shown once

# What to select on each provider's webhook form.
EVENTS = {
    Connection.Provider.GITHUB: ("Content type application/json; events “Pull requests” and "
                                 "“Issue comments”."),
    Connection.Provider.GITLAB: ("Trigger “Merge request events” and “Comments”; the secret "
                                 "goes in “Secret token”."),
    Connection.Provider.FORGEJO: ("Webhook type Forgejo (or Gitea), content type "
                                  "application/json; trigger on custom events “Pull request” "
                                  "and “Issue comment”."),
}
WHERE = {
    Connection.Provider.GITHUB: "Settings → Webhooks → Add webhook",
    Connection.Provider.GITLAB: "Settings → Webhooks → Add new webhook",
    Connection.Provider.FORGEJO: "Settings → Webhooks → Add webhook",
}


def _own(request, pk) -> Connection:
    """The connection if the person may see it (its owner, its team's members); changing or
    deleting a team's connection is for the team's admins."""
    conn = get_object_or_404(visible(Connection.objects, request.user), pk=pk)
    if request.method == "POST" and not can_administer(request.user, conn):
        raise PermissionDenied("Only the team's admins change or delete its connections.")
    return conn


def webhook_url(request, conn: Connection) -> str:
    path = reverse("webhook", args=[conn.provider, conn.hook_id])
    base = settings.QUORUM_PUBLIC_URL
    return base + path if base else request.build_absolute_uri(path)


@login_required
@require_GET
def connection_list(request):
    conns = visible(Connection.objects, request.user)
    apps = GitHubApp.objects.filter(owner=request.user)
    return render(request, "reviews_app/connections/list.html", {"connections": conns,
                                                                  "apps": apps})


def _save(request, form) -> Connection | None:
    if not form.is_valid():
        return None
    try:
        with transaction.atomic():
            return form.save()
    except IntegrityError:  # a twin saved between the check and the insert
        form.add_error("repository", "You already have a connection to this repository: edit "
                                     "that one.")
        return None


@login_required
@require_http_methods(["GET", "POST"])
def connection_new(request):
    data = request.POST if request.method == "POST" else None  # an empty POST is still bound
    form = ConnectionForm(data, user=request.user)
    if request.method == "POST":
        conn = _save(request, form)
        if conn is not None:
            _learn_account(request, conn)
            if form.generated_secret:
                request.session[_SESSION_KEY.format(conn.pk)] = sealed.seal(
                    form.generated_secret)
            log.info("connection %s created by user %s", conn.pk, request.user.pk)
            messages.success(request, f"Connected {conn}.")
            return go(request, conn.get_absolute_url())
    return render(request, "reviews_app/connections/form.html", {"form": form},
                  status=400 if form.errors else 200)


def shown_once(request, key: str) -> str:
    """A generated secret kept sealed in the session until its page shows it, once."""
    stored = request.session.pop(key, "")
    if not stored:
        return ""
    try:
        return sealed.unseal(stored)
    except sealed.UnsealError:
        return ""


def _learn_account(request, conn: Connection) -> None:
    """Ask the provider which account the token writes as (after the save, outside its
    transaction); when it does not answer, say that the first delivery asks again."""
    from reviews_app.prflow.delivery import client_of

    if account.known(conn):
        return
    if not account.try_learn(conn, lambda c: client_of(c, timeout=5.0)):
        messages.warning(request, f"{conn.get_provider_display()} did not say which account the "
                                  "token belongs to; Quorum asks again with the first delivery.")


def _followed(conn: Connection) -> list[PullRequest]:
    """The pull requests the connection follows, each with its rounds (reviews) in order."""
    prs = list(conn.pull_requests.all()[:50])
    rounds: dict[int, list[Review]] = {}
    # A fork of a round (issue 33) is its person's, not a round of the pull request.
    for r in (Review.objects.filter(pull_request__in=prs, run__forked_from__isnull=True)
              .select_related("run").order_by("pr_round", "id")):
        rounds.setdefault(r.pull_request_id, []).append(r)
    for pr in prs:
        pr.rounds = rounds.get(pr.pk, [])  # type: ignore[attr-defined]
    return prs


@login_required
@require_GET
def connection_detail(request, pk):
    conn = _own(request, pk)
    new_secret = shown_once(request, _SESSION_KEY.format(conn.pk))
    response = render(request, "reviews_app/connections/detail.html", {
        "conn": conn, "webhook_url": webhook_url(request, conn), "new_secret": new_secret,
        "events": EVENTS[conn.provider], "where": WHERE[conn.provider],
        "token": secrets.describe(conn, "token"), "secret": secrets.describe(conn, "secret"),
        "deliveries": conn.deliveries.all()[:20],
        "pull_requests": _followed(conn),
        "bot": account.known(conn),
    })
    if new_secret:  # shown once: never from a cache or the back button
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def connection_edit(request, pk):
    conn = _own(request, pk)
    data = request.POST if request.method == "POST" else None
    form = ConnectionForm(data, instance=conn, user=request.user)
    if request.method == "POST":
        saved = _save(request, form)
        if saved is not None:
            _learn_account(request, saved)
            log.info("connection %s edited by user %s", saved.pk, request.user.pk)
            messages.success(request, f"Saved {saved}.")
            return go(request, saved.get_absolute_url())
    return render(request, "reviews_app/connections/form.html",
                  {"form": form, "conn": conn, "token": secrets.describe(conn, "token"),
                   "secret": secrets.describe(conn, "secret")},
                  status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def connection_delete(request, pk):
    conn = _own(request, pk)
    if request.method == "POST":
        label = str(conn)
        conn.delete()
        log.info("connection %s deleted by user %s", pk, request.user.pk)
        messages.success(request, f"Deleted the connection to {label}.")
        return go(request, reverse("connection_list"))
    return render(request, "reviews_app/connections/delete.html", {"conn": conn})
