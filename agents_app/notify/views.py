"""The notification pages: the settings page (what a person receives, their endpoints and
their teams' endpoints) and the decision link a notification carries."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import OuterRef, Q, Subquery
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from common import sealed
from common.web import go

from . import links, outbox
from .forms import EndpointForm, PreferenceForm, admin_teams
from .models import ALL_KINDS, Endpoint, Kind, Notification, Preference

log = logging.getLogger("quorum.notify")

_SESSION_KEY = "quorum_new_endpoint_secret"  # the generated secret, sealed, until shown once


def _manageable(user):
    """The endpoints ``user`` may see, test and delete: their own, and those of the teams
    they administer."""
    return Endpoint.objects.filter(Q(owner=user, team__isnull=True)
                                   | Q(team__in=admin_teams(user))).select_related("team")


def _unsealed(stored) -> str | None:
    """The generated secret kept sealed in the session until the page shows it, once."""
    try:
        return sealed.unseal(stored["secret"]) if stored else None
    except (sealed.UnsealError, KeyError, TypeError):
        return None


def _page(request, *, prefs_form=None, endpoint_form=None, status=200):
    pref = Preference.objects.filter(user=request.user).first()
    initial = {"email_kinds": pref.email_kinds if pref else ALL_KINDS,
               "webhook_kinds": pref.webhook_kinds if pref else ALL_KINDS}
    stored = request.session.pop(_SESSION_KEY, None)
    new_secret = _unsealed(stored)
    kinds = dict(Kind.choices)
    # Each endpoint's latest notification: two queries however many endpoints there are.
    endpoints = list(_manageable(request.user).annotate(last_pk=Subquery(
        Notification.objects.filter(endpoint=OuterRef("pk")).order_by("-pk").values("pk")[:1]))
        .order_by("team__name", "name", "pk"))
    latest = Notification.objects.in_bulk([ep.last_pk for ep in endpoints if ep.last_pk])
    for ep in endpoints:
        ep.last_notification = latest.get(ep.last_pk)  # type: ignore[attr-defined]
        ep.kind_words = ", ".join(str(kinds.get(k, k)) for k in ep.kinds or [])  # type: ignore[attr-defined]
    prefs_form = prefs_form or PreferenceForm(initial=initial)
    return render(request, "agents_app/notify/settings.html", {
        "prefs_form": prefs_form,
        "kind_rows": list(zip(prefs_form["email_kinds"], prefs_form["webhook_kinds"],
                              strict=True)),
        "endpoint_form": endpoint_form or EndpointForm(user=request.user),
        "endpoints": endpoints,
        "new_secret": new_secret,
        "new_secret_for": stored.get("name", "") if isinstance(stored, dict) else "",
        "has_email": bool(request.user.email),
    }, status=status)


@login_required
@require_GET
def notification_settings(request):
    return _page(request)


@login_required
@require_POST
def save_preferences(request):
    form = PreferenceForm(request.POST)
    if not form.is_valid():
        return _page(request, prefs_form=form, status=400)
    Preference.objects.update_or_create(user=request.user, defaults={
        "email_kinds": form.cleaned_data["email_kinds"],
        "webhook_kinds": form.cleaned_data["webhook_kinds"]})
    messages.success(request, "Your notification choices are saved.")
    return go(request, reverse("notification_settings"))


@login_required
@require_POST
def endpoint_new(request):
    form = EndpointForm(request.POST, user=request.user)
    if form.is_valid():
        with transaction.atomic():
            # One at a time per person: a double submission finds the first one saved.
            get_user_model().objects.select_for_update().filter(pk=request.user.pk).first()
            _refuse_twins(form)
            ep = form.save() if not form.errors else None
        if ep is not None:
            if form.generated_secret:
                request.session[_SESSION_KEY] = {"secret": sealed.seal(form.generated_secret),
                                                "name": ep.name}
            log.info("notification endpoint %s added by user %s", ep.pk, request.user.pk)
            messages.success(request, f"Added the endpoint “{ep.name}”.")
            return go(request, reverse("notification_settings") + "#endpoints")
    return _page(request, endpoint_form=form, status=400)


def _refuse_twins(form: EndpointForm) -> None:
    """The same name, or the same address, as an endpoint of the same owner (or team)."""
    data = form.cleaned_data
    team = data.get("team")
    same = Endpoint.objects.filter(team=team) if team else \
        Endpoint.objects.filter(owner=form.user, team__isnull=True)
    if same.filter(name__iexact=data["name"]).exists():
        form.add_error("name", "An endpoint of this name exists already: pick another name, or "
                               "delete that one first.")
        return
    for sealed_url in same.values_list("url_sealed", flat=True):
        try:
            if sealed.unseal(sealed_url) == data["url"]:
                form.add_error("url", "An endpoint with this address exists already.")
                return
        except sealed.UnsealError:
            continue


def _own_endpoint(request, pk) -> Endpoint:
    ep = _manageable(request.user).filter(pk=pk).first()
    if ep is None:
        raise Http404("No such endpoint")
    return ep


@login_required
@require_POST
def endpoint_test(request, pk):
    ep = _own_endpoint(request, pk)
    if not ep.active:
        messages.error(request, f"“{ep.name}” is turned off; nothing was sent.")
        return go(request, reverse("notification_settings") + "#endpoints")
    _row, created = outbox.announce_test(ep, request.user)
    if created:
        messages.success(request, f"A test message to “{ep.name}” is on its way; the list "
                                  "shows whether it arrived.")
    else:
        messages.info(request, "A test to this endpoint was sent seconds ago; it was not sent "
                               "again.")
    return go(request, reverse("notification_settings") + "#endpoints")


@login_required
@require_POST
def endpoint_delete(request, pk):
    ep = _own_endpoint(request, pk)
    name = ep.name
    ep.delete()
    log.info("notification endpoint %s deleted by user %s", pk, request.user.pk)
    messages.success(request, f"Deleted the endpoint “{name}”.")
    return go(request, reverse("notification_settings") + "#endpoints")


LINK_SESSION_KEY = "quorum.decision_link"


@login_required
@require_GET
def decision_link(request, token):
    """A notification's link: to the run page at its gate, once, for its person only. A
    forged link, and another person's, is a 404; an expired or used one a 410."""
    followed = links.follow(token, request.user)
    if followed.status == 302:
        # The decision this person then makes at that gate is audited as made through the
        # link (agents_app/views.py ``decision_channel``); the link itself decides nothing.
        request.session[LINK_SESSION_KEY] = {"run": followed.link.opening.run_id,
                                             "stop": followed.link.opening_id}
        return redirect(followed.url)
    return render(request, "agents_app/notify/link.html",
                  {"reason": followed.reason, "link": followed.link},
                  status=followed.status)
