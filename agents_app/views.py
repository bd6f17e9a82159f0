"""Pages: the dashboard (start form + history) and the run page (live timeline, plan gate,
steps, answer, model-call trace). One view per page; htmx requests get the named partial."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from . import engine
from .forms import (
    StartRunForm,
)
from .gates.core import NotAllowed
from .history import history, recent_models
from .models import ModelCall, Run
from .notices import notice_for
from .patterns.base import Decision, InvalidDecision
from .run_page import events_before, run_context
from .teams.access import can_manage, visible
from .teams.fields import chosen_team
from .trace import call_io
from .trace_tree import build_trace, rows

# What a person typed for a decision: (label, text) pairs, or a function that makes them.
Unsent = Sequence[tuple[str, str]] | Callable[[], Sequence[tuple[str, str]]]


@login_required
@require_GET
def dashboard(request):
    ctx = {"form": StartRunForm(user=request.user), **history(request)}
    if request.htmx and request.htmx.target == "history":
        return render(request, "agents_app/dashboard.html#history", ctx)
    return render(request, "agents_app/dashboard.html", {**ctx, "models": recent_models(request.user)})


@login_required
@require_http_methods(["GET", "POST"])
def start_run(request):
    if request.method == "GET":  # the form on a page of its own (a bookmark, a reload)
        return render(request, "agents_app/run_new.html",
                      {"form": StartRunForm(user=request.user)})
    form = StartRunForm(request.POST, user=request.user)
    if not form.is_valid():
        ctx = {"form": form, **history(request)}
        if request.htmx:
            return render(request, "agents_app/dashboard.html#start-form", ctx, status=400)
        return render(request, "agents_app/dashboard.html", ctx, status=400)
    max_cost, max_tokens = form.budget()
    run = engine.create_run(request.user, form.cleaned_data["pattern"],
                            form.cleaned_data["task"], options=form.options(),
                            models=form.models(), max_cost_usd=max_cost, max_tokens=max_tokens,
                            team=chosen_team(form))
    if request.htmx:
        return HttpResponseClientRedirect(run.get_absolute_url())
    return redirect(run)


# --- run page --------------------------------------------------------------------------------
def owned_run(request, pk: int) -> Run:
    """The run, if the person may see it (its owner, or a member of its team); a 404
    otherwise, never a hint that it exists. A POST (a decision, cancel, fork) needs more:
    the owner while still a member, or one of the team's approvers (a gate's rule may ask
    more of a decision: agents_app/gates/core.py)."""
    run = get_object_or_404(visible(Run.objects.all(), request.user), pk=pk)
    if request.method == "POST" and not can_manage(request.user, run):
        raise PermissionDenied("Only the team's approvers, or the person who started the run, "
                               "may act on it.")
    return run


@login_required
@require_GET
def run_detail(request, pk: int):
    run = owned_run(request, pk)
    if run.get_absolute_url() != request.path:  # a pattern with a page of its own
        return redirect(run)
    return render(request, "agents_app/run_detail.html", run_context(run))


@login_required
@require_GET
def run_events(request, pk: int):
    """The run's events before the event ``before`` (a page of them), for the timeline's "Show
    earlier events": its items for htmx, a page of its own otherwise."""
    run = owned_run(request, pk)
    raw = request.GET.get("before", "").strip()
    if raw and not (raw.isascii() and raw.isdigit() and len(raw) <= 10):
        return HttpResponse("“before” must be an event's number, like 120.", status=400,
                            content_type="text/plain; charset=utf-8")
    before = min(int(raw), run.last_event_seq + 1) if raw else run.last_event_seq + 1
    events, earlier = events_before(run, before)
    ctx = {"run": run, "events": events, "earlier": earlier, "before": before}
    if request.htmx:
        return render(request, "agents_app/run_events.html#page", ctx)
    return render(request, "agents_app/run_events.html", ctx)


@login_required
@require_GET
def model_call(request, pk: int, call: int):
    """One model call of the trace: its prompt messages and reply (secrets blanked). The run
    page loads it when a person opens the call, so the page and its live updates stay small."""
    run = owned_run(request, pk)
    c = get_object_or_404(ModelCall, pk=call, run=run)
    ctx = {"run": run, "call": c, **call_io(c)}
    if request.htmx:
        return render(request, "agents_app/model_call.html#call-io", ctx)
    return render(request, "agents_app/model_call.html", ctx)


@login_required
@require_GET
def run_trace(request, pk: int):
    """The run's trace as a tree (run → stage → model call / tool call) with a timing
    waterfall, from the database."""
    run = owned_run(request, pk)
    root = build_trace(run)
    return render(request, "agents_app/run_trace.html", {"run": run, "root": root,
                                                         "rows": rows(root)})


def render_panel(request, page: str, panel: str, ctx: dict, status: int = 200):
    """The answer to a form on a run page: its panel for htmx, the whole page otherwise."""
    return render(request, f"{page}#{panel}" if request.htmx else page, ctx, status=status)


def decision_channel(request, run: Run) -> str:
    """How the person came to this decision, for the gate's audit: "link" when they opened
    the run through a notification's link to this gate (once), else "page"."""
    from .notify.views import LINK_SESSION_KEY

    came = request.session.get(LINK_SESSION_KEY) if hasattr(request, "session") else None
    if isinstance(came, dict) and came.get("run") == run.pk:
        request.session.pop(LINK_SESSION_KEY, None)
        return "link"
    return "page"


def decide_and_show(request, run: Run, seq: int, decision: Decision, show, *,
                    unsent: Unsent = (), **invalid_extra):
    """Apply a person's decision and answer with ``show(run, status, **extra)``: 400 with the
    reason when the decision cannot apply; 409 when the page was out of date, saying who
    decided what and when and what the run does now, with ``unsent`` — (label, text) pairs of
    what the person typed, or a function that makes them — given back to copy, never applied
    (``unsent`` on the page)."""
    try:
        run = engine.decide(run, request.user, seq, decision,
                            channel=decision_channel(request, run))
    except engine.StaleDecision:
        run.refresh_from_db()
        pairs = unsent() if callable(unsent) else unsent
        kept = [(label, text) for label, text in pairs if text.strip()]
        notice = notice_for(run)
        if run.is_waiting and run.stage_seq > seq and run.openings.filter(
                closed_at__isnull=True, opened_seq__lte=seq).exists():
            # Still at the same stop: what it shows was edited since the page was loaded.
            message = ("This page was out of date: what is to be decided was edited since it "
                       "was loaded, so nothing you sent was applied. Read the new version "
                       f"above. {notice}")
        else:
            message = ("This page was out of date: the run is no longer waiting for that "
                       f"decision, so nothing you sent was applied. {notice}")
        if kept:
            message += " What you typed is kept under “Not sent” above."
        return show(run, 409, error=message, unsent=kept, unsent_because=notice.decided)
    except NotAllowed as exc:
        return show(run, 403, error=str(exc), **invalid_extra)
    except InvalidDecision as exc:
        return show(run, 400, error=str(exc), **invalid_extra)
    if note := getattr(run, "vote_note", ""):  # one approval of several: the gate waits
        return show(run, 200, vote_note=note)
    return show(run, 200)


RUN_PAGE = "agents_app/run_detail.html"


def gate_answer(request, run: Run, panel: str, status: int, **extra):
    """The answer to a gate decision: the gate's panel, and the page's status line (derived
    from the run, ``agents_app/notices.py``), focused after a decision so that a screen
    reader says it. The status line is outside the panels, which live updates replace, and
    they change its content, not the region, so the focus stays on it."""
    ctx = run_context(run, focus_notice=status == 200, **extra)
    if not request.htmx:
        return render(request, RUN_PAGE, ctx, status=status)
    source = ctx["panel_template"] if panel in ctx["pattern_panels"] and ctx["panel_template"] \
        else RUN_PAGE
    # After a stale decision (409) the run has moved on: the header and the answer come along,
    # so the page does not show its old status beside the new panel, and what the person
    # typed comes back outside the panels (the next live update would replace a panel).
    # Otherwise they are left to the live channel, whose newer update may be on the page.
    parts: tuple[str, ...] = ("gate-status",)
    if status == 409:
        parts += ("header", "answer-panel") + (("unsent",) if ctx.get("unsent") else ())
    html = "".join([render_to_string(f"{source}#{panel}", ctx, request),
                    *[render_to_string(f"{RUN_PAGE}#{part}", {**ctx, "oob": True}, request)
                      for part in parts]])
    return HttpResponse(html, status=status)


@login_required
@require_POST
def cancel_run(request, pk: int):
    run = owned_run(request, pk)
    message = engine.cancel(run, request.user)
    run.refresh_from_db()
    if request.htmx:
        return render(request, "agents_app/run_detail.html#header", run_context(run, notice=message))
    messages.info(request, message)  # the run page says it (and reads it out) after the redirect
    return redirect(run)
