"""The GitHub App pages: connect one, see its installations and deliveries, edit, delete.
Owner-scoped like connections: another user's App is a 404."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from common import sealed
from common.web import go
from reviews_app.models import Connection, GitHubApp

from . import github_app
from .forms import GitHubAppForm
from .secrets import SecretUnavailable, value_of
from .views import shown_once

log = logging.getLogger("quorum.connections")
_SESSION_KEY = "quorum_new_app_secret_{}"

# What the App needs on GitHub (Settings → Developer settings → GitHub Apps → the App).
PERMISSIONS = [
    ("Pull requests", "Read and write", "read the pull request, post the review and comments"),
    ("Contents", "Read-only", "read files and .quorum.toml from the base branch"),
    ("Checks", "Read and write", "the “Quorum” check run branch protection can require"),
    ("Issues", "Read and write", "the summary comment (pull request comments are issue "
                                 "comments)"),
    ("Metadata", "Read-only", "always included"),
]
EVENTS = ["Pull request", "Issue comment"]


def _own(request, pk) -> GitHubApp:
    return get_object_or_404(GitHubApp, pk=pk, owner=request.user)


def _save(form) -> GitHubApp | None:
    if not form.is_valid():
        return None
    try:
        with transaction.atomic():
            return form.save()
    except IntegrityError:
        form.add_error("app_id", "You have connected this App already: edit it.")
        return None


def _identify(request, app: GitHubApp) -> None:
    """Ask GitHub who the App is, after the save (outside its transaction)."""
    if not github_app.learn_slug(app):
        messages.warning(request, "GitHub did not say who this App is (check the App ID and the "
                                  "key); Quorum asks again with the first installation event.")


def webhook_url(request, app: GitHubApp) -> str:
    from django.conf import settings

    path = reverse("github_app_webhook", args=[app.hook_id])
    base = settings.QUORUM_PUBLIC_URL
    return base + path if base else request.build_absolute_uri(path)


def _describe(app: GitHubApp, what: str) -> dict:
    env, stored, hint = ((app.key_env, app.key_sealed, app.key_hint) if what == "key" else
                         (app.secret_env, app.secret_sealed, app.secret_hint))
    label = "private key" if what == "key" else "webhook secret"
    try:
        value_of(f"GitHub App {app.pk}", label, env, stored)
        problem = ""
    except SecretUnavailable as exc:
        problem = str(exc)
    return {"env": env, "hint": "" if env else hint, "stored": bool(stored),
            "problem": problem, "label": label, "fingerprint": what == "key"}


@login_required
@require_http_methods(["GET", "POST"])
def app_new(request):
    form = GitHubAppForm(request.POST if request.method == "POST" else None, user=request.user)
    if request.method == "POST":
        app = _save(form)
        if app is not None:
            _identify(request, app)
            if form.generated_secret:
                request.session[_SESSION_KEY.format(app.pk)] = sealed.seal(form.generated_secret)
            log.info("GitHub App %s connected by user %s", app.pk, request.user.pk)
            messages.success(request, f"Connected {app}.")
            return go(request, app.get_absolute_url())
    return render(request, "reviews_app/connections/app_form.html", {"form": form},
                  status=400 if form.errors else 200)


@login_required
@require_GET
def app_detail(request, pk):
    app = _own(request, pk)
    new_secret = shown_once(request, _SESSION_KEY.format(app.pk))
    installations = list(app.installations.all())
    conns = Connection.objects.filter(installation__app=app).order_by("repository")
    by_inst: dict[int, list[Connection]] = {}
    for c in conns:
        by_inst.setdefault(c.installation_id, []).append(c)
    for inst in installations:
        inst.repos = by_inst.get(inst.pk, [])  # type: ignore[attr-defined]
    response = render(request, "reviews_app/connections/app_detail.html", {
        "app": app, "webhook_url": webhook_url(request, app), "new_secret": new_secret,
        "key": _describe(app, "key"), "secret": _describe(app, "secret"),
        "installations": installations, "permissions": PERMISSIONS, "events": EVENTS,
        "policy": dict(Connection.Policy.choices).get(app.publish_policy, app.publish_policy),
        "deliveries": app.deliveries.filter(connection__isnull=True)[:20],
    })
    if new_secret:
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def app_edit(request, pk):
    app = _own(request, pk)
    form = GitHubAppForm(request.POST if request.method == "POST" else None, instance=app,
                         user=request.user)
    if request.method == "POST":
        saved = _save(form)
        if saved is not None:
            if not saved.slug:
                _identify(request, saved)
            messages.success(request, f"Saved {saved}.")
            return go(request, saved.get_absolute_url())
    return render(request, "reviews_app/connections/app_form.html",
                  {"form": form, "app": app, "key": _describe(app, "key"),
                   "secret": _describe(app, "secret")}, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def app_delete(request, pk):
    app = _own(request, pk)
    if request.method == "POST":
        label = str(app)
        with transaction.atomic():
            # Its repositories' connections stay (with their history) but are paused: they
            # have no token without the App.
            Connection.objects.filter(installation__app=app).update(active=False)
            app.delete()
        log.info("GitHub App %s deleted by user %s", pk, request.user.pk)
        messages.success(request, f"Deleted {label}; the connections it made are paused.")
        return go(request, reverse("connection_list"))
    return render(request, "reviews_app/connections/app_delete.html", {"app": app})
