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


def _plan_panel(request, run: Run, status: int = 200, **extra):
    # An empty plan cannot be approved: the page opens "Reject with feedback" beside the reason.
    extra.setdefault("empty_plan", extra.get("error") == EMPTY_PLAN)
    return gate_answer(request, run, "plan-panel", status, **extra)


def _unsent(run: Run, steps: list[str], feedback: str) -> list[tuple[str, str]]:
    """What the person typed, for a refusal to give back: their steps when they differ from
    every version of the plan (an edit), and their feedback."""
    edited = [s.strip() for s in steps]
    kept = []
    if edited and all(edited != p.steps for p in run.plan_versions.all()):
        kept.append(("Your steps", "\n".join(f"{n}. {s}" for n, s in enumerate(edited, 1))))
    return [*kept, ("Your feedback", feedback)]


@login_required
@require_POST
def plan_decision(request, pk: int):
    """The plan gate. Approving approves the steps on the screen, exactly: the form posts
    every step, so a plan whose steps were all deleted is an empty plan, refused."""
    run = owned_run(request, pk)
    form = PlanDecisionForm(request.POST)
    # What the person sent, shown again with a refusal; a refused rejection keeps its box open
    # (its error asks for the feedback that box holds).
    shown = {"edited_steps": form.shown_steps(),
             "feedback": without_control_characters(request.POST.get("feedback", "")),
             "failed_action": request.POST.get("action", "")}
    if not form.is_valid():
        return _plan_panel(request, run, 400, error=read_errors(form), **shown)
    d = form.cleaned_data
    decision = Decision(action=d["action"], feedback=d["feedback"],
                        edits=d["steps"] if d["action"] == "approve" else None,
                        author=request.user.get_username())
    return decide_and_show(request, run, d["seq"], decision,
                           lambda r, status, **extra: _plan_panel(request, r, status, **extra),
                           unsent=lambda: _unsent(run, form.shown_steps(), shown["feedback"]),
                           **shown)
