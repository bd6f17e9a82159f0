"""The inbox page (issue 35): the signed-in person's waiting gates, filtered, following the
runs (the list reloads itself every two seconds), each card linking to where it is decided."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from . import inbox
from .patterns import PATTERNS


@login_required
@require_GET
def inbox_page(request):
    filters = inbox.Filters.read(request.GET)
    ctx = {"cards": inbox.cards(request.user, filters), "filters": filters,
           "gates": sorted({(g, w) for g, w in _gate_words().items()}),
           "patterns": sorted((p.name, p.label) for p in PATTERNS.values()),
           "query": request.GET.urlencode(), "limit": inbox.MAX_CARDS}
    if request.htmx and request.GET.get("part") == "list":
        return render(request, "agents_app/inbox.html#inbox-list", ctx)
    return render(request, "agents_app/inbox.html", ctx)


def _gate_words() -> dict[str, str]:
    from .models import Status

    own = inbox.gate_status_labels()
    enum = dict(Status.choices)
    return {s.removeprefix("awaiting_"): own.get(s) or enum.get(s, s)
            for s in inbox.waiting_statuses()}


def inbox_count(request) -> dict:
    """The navigation's count of gates waiting for the signed-in person."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"inbox_count": inbox.count(user)}
