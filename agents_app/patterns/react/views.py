"""The view of ReAct's gates: a person approves or rejects the call the agent proposes, or
answers its question. (Django side of the package; the shared gate helpers live in
``agents_app.views``.)"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.views.decorators.http import require_POST

from ...forms import read_errors
from ...models import Run
from ...views import decide_and_show, gate_answer, owned_run
from ..base import Decision
from ..gate_input import without_control_characters
from .forms import ToolDecisionForm
from .pattern import APPROVAL_GATE, ASK_GATE


def _items_panel(request, run: Run, status: int = 200, **extra):
    return gate_answer(request, run, "items-panel", status, **extra)


@login_required
@require_POST
def tool_decision(request, pk: int):
    """A person's decision at a ReAct tool gate (approve the call with the arguments on the
    screen, or reject it with a reason) or their answer to the agent's question."""
    run = owned_run(request, pk)
    gate = run.gate
    form = ToolDecisionForm(request.POST, gate=gate)
    typed = {"typed_feedback": without_control_characters(request.POST.get("feedback", ""))}
    if "args" in request.POST:
        typed["pending_args"] = without_control_characters(request.POST["args"])
    if not form.is_valid():
        return _items_panel(request, run, 400, error=read_errors(form), **typed)
    d = form.cleaned_data
    # At the approval gate the call approved is the one on the screen; the pattern compares
    # it with the proposed call to record whether it was edited.
    edits = d["args"] if d["action"] == "approve" and gate == APPROVAL_GATE else None
    decision = Decision(action=d["action"], feedback=d["feedback"], edits=edits,
                        author=request.user.get_username())

    def show(r, status, **extra):
        return _items_panel(request, r, status, **extra)

    said = "Your answer to the agent" if gate == ASK_GATE else "Your reason"
    unsent = [(said, typed["typed_feedback"])]
    if d["action"] == "approve" and gate == APPROVAL_GATE and "pending_args" in typed:
        unsent.append(("The arguments you approved", typed["pending_args"]))
    return decide_and_show(request, run, d["seq"], decision, show, unsent=unsent, **typed)

