"""Pages of plan → execute → review runs: the start form, the run page with its three gates
(plan, merge request, escalation), and its live updates."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from ...live import live_message
from ...models import Run
from ...patterns import PATTERNS
from ...search import keyset_page
from ...teams.access import visible
from ...teams.fields import chosen_team
from ...views import decide_and_show, owned_run, render_panel
from ..base import Decision
from .forms import ChangeDecisionForm, ChangeListForm, StartChangeForm
from .pattern import PlanExecuteReview
from .service import ChangeError, change_context, diff_views, git_identity, start_change

PAGE = "plan_execute_review/change_detail.html"
NEW_PAGE = "plan_execute_review/change_new.html"
LIST_PAGE = "plan_execute_review/change_list.html"


@login_required
@require_GET
def change_list(request):
    """The person's change runs, newest first, each with its merge request."""
    form = ChangeListForm(request.GET or None)
    runs = visible(Run.objects, request.user).filter(pattern=PlanExecuteReview.name).only(
        "id", "pattern", "task", "status", "options", "created_at", "finished_at", "offline",
        "cost_usd", "merge_request__status", "merge_request__base_branch",
        "merge_request__branch", "merge_request__repo", "merge_request__merged_sha",
    ).select_related("merge_request")
    ctx = {**keyset_page(runs, form, {}, "runs"), "label": PlanExecuteReview.label}
    if request.htmx and request.htmx.target == "history":
        return render(request, f"{LIST_PAGE}#history", ctx)
    return render(request, LIST_PAGE, ctx)


@login_required
@require_http_methods(["GET", "POST"])
def change_new(request):
    if request.method == "GET":
        return render(request, NEW_PAGE, {"form": StartChangeForm(user=request.user)})
    form = StartChangeForm(request.POST, user=request.user)
    error = ""
    if form.is_valid():
        d = form.cleaned_data
        try:
            run = start_change(request.user, repo=d["repo"], base=d["base"], task=d["task"],
                               models=form.models(), max_rounds=d.get("max_rounds"),
                               test_command=d.get("test_command") or "",
                               auto_approve_plan=d["auto_approve_plan"],
                               max_cost_usd=d.get("max_cost_usd"), max_tokens=d.get("max_tokens"),
                               team=chosen_team(form))
        except ChangeError as exc:
            error = str(exc)
        else:
            if request.htmx:
                return HttpResponseClientRedirect(run.get_absolute_url())
            return redirect(run)
    ctx = {"form": form, "error": error}
    if request.htmx:
        return render(request, f"{NEW_PAGE}#change-form", ctx, status=400)
    return render(request, NEW_PAGE, ctx, status=400)


@login_required
@require_GET
def change_detail(request, pk: int):
    run = owned_run(request, pk)
    if run.get_absolute_url() != request.path:
        return redirect(run)
    return render(request, PAGE, change_context(run))


def _gate_panel(request, run, status: int = 200, **extra):
    ctx = change_context(run, timeline=not request.htmx, with_diff=not request.htmx, **extra)
    return render_panel(request, PAGE, "gate-panel", ctx, status)


def _typed(request, name: str) -> str | None:
    """What the person typed in a field, to show it again with the error (NUL bytes left out,
    a huge text cut)."""
    value = request.POST.get(name)
    return None if value is None else value.replace("\0", "")[:20000]


@login_required
@require_POST
def change_decision(request, pk: int):
    run = owned_run(request, pk)
    if not isinstance(PATTERNS.get(run.pattern), PlanExecuteReview):  # or a kind of it
        return redirect(run)
    form = ChangeDecisionForm(request.POST)
    typed = {"feedback": _typed(request, "feedback"),
             "typed_message": _typed(request, "commit_message"),
             "typed_mode": request.POST.get("merge_mode"),
             "failed_action": request.POST.get("action")}
    if not form.is_valid():
        return _gate_panel(request, run, 400, error=form.problem() or "That decision could not "
                           "be read; reload the page and try again.", **typed)
    d = form.cleaned_data
    action = d["action"]
    edits = None
    current = run.is_waiting and run.stage_seq == d["seq"]  # else the engine says it is stale
    if run.gate == "plan_approval" and action == "approve":
        edits = form.edited_plan()
        if edits is None and current:
            return _gate_panel(request, run, 400, error="The plan was not sent with your "
                               "approval; reload the page and approve the plan you see.", **typed)
        if edits is not None and not edits["steps"]:
            typed["failed_action"] = "reject"  # opens the reject form: the other way on
        typed["edited"] = edits
    elif run.gate == "merge_request" and action == "approve":
        edits = {**(form.merge_choice() or {}), "approver": git_identity(request.user)}
    decision = Decision(action=action, feedback=d["feedback"], edits=edits,
                        author=request.user.get_username())
    return decide_and_show(request, run, d["seq"], decision,
                           lambda r, status, **extra: _gate_panel(request, r, status, **extra),
                           **typed)


@login_required
@require_GET
def change_file(request, pk: int, index: int):
    """One file of the merge request's diff, for a large change whose page loads files on
    demand."""
    run = owned_run(request, pk)
    latest = run.agent_reports.filter(kind="execute").last()
    views = diff_views(latest.diff, only=index)[0] if latest else []
    if not views:
        raise Http404("No such file in this change.")
    return render(request, "reviews_app/review_detail.html#diff-table", {"v": views[0],
                                                                         "run": run})


# --- live updates ------------------------------------------------------------------------------
_PANELS = {
    "plan_proposed": {"gate-panel", "plan-panel", "rounds-panel", "live-panel"},
    "plan_edited": {"plan-panel"},
    # An edit at a gate that needs several approvals (issue 35): the gate's form moves to the
    # new step, so an open page gives what its person typed back under "Not sent".
    "gate_edited": {"gate-panel", "plan-panel"},
    "plan_decided": {"gate-panel", "plan-panel"},
    "gate_opened": {"gate-panel", "mr-panel"},
    "execution_reported": {"rounds-panel", "mr-panel", "live-panel"},
    "review_verdict": {"rounds-panel", "mr-panel", "live-panel"},
    "merge_decided": {"gate-panel", "mr-panel"},
    "escalation_decided": {"gate-panel"},
    "merge_conflict": {"gate-panel", "mr-panel"},
    "merge_blocked": {"gate-panel", "mr-panel"},
    "merged": {"gate-panel", "mr-panel"},
    "discarded": {"gate-panel", "mr-panel"},
    "closed": {"gate-panel", "mr-panel"},
    "model_call": {"costs-panel", "live-panel"},
    "stage_started": {"live-panel"},
    "stage_resumed": {"live-panel"},
    "run_finished": {"gate-panel", "mr-panel", "costs-panel"},
    "run_cancelled": {"gate-panel"},
    "budget_exceeded": {"gate-panel"},
}
_ORDER = ("header", "gate-panel", "live-panel", "plan-panel", "mr-panel", "rounds-panel",
          "costs-panel")


def render_live_update(run, events, panels: set[str]) -> str:
    for e in events:
        panels = panels | _PANELS.get(e.kind, set())
    ctx = change_context(run, with_diff="mr-panel" in panels, timeline=False)
    return live_message(PAGE, ctx, events, panels, _ORDER, bulky=("mr-panel", "rounds-panel"),
                        too_large="too-large")
