"""The inbox page (issue 35): the gates waiting for the signed-in person and their teams,
filtered, following the runs (gates arrive and leave over a WebSocket, ``inbox_live.py``; the
list also reloads itself every 20 s), each decided on its card or on its run's page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from . import inbox
from .patterns import PATTERNS
from .teams.access import user_teams


@login_required
@require_GET
def inbox_page(request):
    return _page(request)


def _page(request, outcomes=None, error: str = "", status: int = 200):
    filters = inbox.Filters.read(request.GET)
    ctx = {"outcomes": outcomes or [], "batch_error": error,
           "cards": inbox.cards(request.user, filters), "filters": filters,
           "scopes": inbox.SCOPES, "assignees": inbox.ASSIGNEES,
           "teams": list(user_teams(request.user)),
           "gates": sorted({(g, w) for g, w in _gate_words().items()}),
           "patterns": sorted((p.name, p.label) for p in PATTERNS.values()),
           "query": request.GET.urlencode(), "limit": inbox.MAX_CARDS}
    if request.htmx and request.GET.get("part") == "list":
        return render(request, "agents_app/inbox.html#inbox-list", ctx)
    return render(request, "agents_app/inbox.html", ctx, status=status)


@login_required
@require_POST
def inbox_decide(request):
    """Batch decisions: the same decision at every ticked gate, each recorded on its own."""
    action = request.POST.get("action", "")
    feedback = (request.POST.get("feedback") or "").strip()
    picks = request.POST.getlist("picks")
    if action not in ("approve", "reject"):
        return _page(request, error="Choose approve or reject.", status=400)
    if "\x00" in feedback or len(feedback) > 4000:
        return _page(request, error="The feedback must be at most 4,000 characters, without "
                                    "NUL characters.", status=400)
    if action == "reject" and not feedback:
        return _page(request, error="Say what should change: a rejection sends your feedback "
                                    "to each run.", status=400)
    if not picks:
        return _page(request, error="Tick the gates to decide first.", status=400)
    return _page(request, inbox.decide_many(request.user, picks, action, feedback))


def _gate_words() -> dict[str, str]:
    from .models import Status

    own = inbox.gate_status_labels()
    enum = dict(Status.choices)
    return {s.removeprefix("awaiting_"): own.get(s) or enum.get(s, s)
            for s in inbox.waiting_statuses()}


def inbox_count(request) -> dict:
    """The navigation's count of gates waiting for the signed-in person."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or getattr(request, "htmx", False):
        return {}  # a partial (a poll every two seconds, a form's answer) has no navigation
    return {"inbox_count": inbox.count(user)}
