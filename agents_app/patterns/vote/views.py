"""The vote gate's view (Django side of the package): a person's pick, edit or request for
another round, through the shared gate helpers of ``agents_app.views``."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.views.decorators.http import require_POST

from ...forms import read_errors
from ...patterns.base import Decision
from ...patterns.gate_input import without_control_characters
from ...views import decide_and_show, gate_answer, owned_run
from . import PATTERN
from .forms import VoteDecisionForm

PANEL = "items-panel"


@login_required
@require_POST
def vote_decision(request, pk: int):
    """A decision at the vote gate. A run of another pattern has no vote to decide: 404."""
    run = owned_run(request, pk)
    if run.pattern != PATTERN.name:
        raise Http404("No vote here.")
    form = VoteDecisionForm(request.POST)
    typed = {"typed_answer": without_control_characters(request.POST.get("answer", "")),
             "typed_group": request.POST.get("group", ""),
             "typed_feedback": without_control_characters(request.POST.get("feedback", ""))}
    if not form.is_valid():
        return gate_answer(request, run, PANEL, 400, error=read_errors(form), **typed)
    d = form.cleaned_data
    decision = Decision(action=d["action"], feedback=d["feedback"],
                        edits={"group": d["group"], "answer": d["answer"]},
                        author=request.user.get_username())

    def show(r, status, **extra):
        return gate_answer(request, r, PANEL, status, **extra)

    unsent = [("Your feedback for the voters", typed["typed_feedback"])]
    if d["action"] == "edit":
        unsent.insert(0, (f"Your edit of group {d['group']}'s answer", typed["typed_answer"]))
    return decide_and_show(request, run, d["seq"], decision, show, unsent=unsent, **typed)
