"""The plan gate: approve the steps on the screen (edited or not), or reject the plan with
feedback. (Django side of the package.)"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.views.decorators.http import require_POST

from ...forms import read_errors
from ...models import Run
from ...views import decide_and_show, gate_answer, owned_run
from ..base import Decision
from ..gate_input import without_control_characters
from .forms import PlanDecisionForm
from .pattern import EMPTY_PLAN


def _plan_decided(run: Run) -> str:
    last = run.approvals.order_by("-id").first()
    if last is None:
        return ""
    if last.action == "reject":
        return (f"You rejected plan v{last.plan_version}. The planner is writing a new version "
                "from your feedback.")
    edited = " with your edits" if last.edited else ""
    return f"You approved plan v{last.plan_version}{edited}. Its steps are being carried out."


def _plan_panel(request, run: Run, status: int = 200, **extra):
    if status == 200:
        extra["gate_status"] = _plan_decided(run)
    # An empty plan cannot be approved: the page opens "Reject with feedback" beside the reason.
    extra.setdefault("empty_plan", extra.get("error") == EMPTY_PLAN)
    return gate_answer(request, run, "plan-panel", status, **extra)


@login_required
@require_POST
def plan_decision(request, pk: int):
    """The plan gate. Approving approves the steps on the screen, exactly: the form posts
    every step, so a plan whose steps were all deleted is an empty plan, refused."""
    run = owned_run(request, pk)
    form = PlanDecisionForm(request.POST)
    shown = {"edited_steps": form.shown_steps(),
             "feedback": without_control_characters(request.POST.get("feedback", ""))}
    if not form.is_valid():
        return _plan_panel(request, run, 400, error=read_errors(form), **shown)
    d = form.cleaned_data
    decision = Decision(action=d["action"], feedback=d["feedback"],
                        edits=d["steps"] if d["action"] == "approve" else None,
                        author=request.user.get_username())
    return decide_and_show(request, run, d["seq"], decision,
                           lambda r, status, **extra: _plan_panel(request, r, status, **extra),
                           **shown)
