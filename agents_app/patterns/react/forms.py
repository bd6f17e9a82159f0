"""The form of ReAct's gates: approve or reject a tool call, or answer the agent's question.
(Django side of the package.)"""

from __future__ import annotations

from django import forms

from ...forms import PersonTextField
from .. import safe_json
from ..base import InvalidDecision
from ..gate_input import check_arguments
from .pattern import APPROVAL_GATE, ASK_GATE


class ToolDecisionForm(forms.Form):
    """A decision at a tool gate: approve the call with the arguments on the screen (edited
    or not), reject it with a reason, or the answer to the agent's question (in ``feedback``).
    At the approval gate, approving needs the arguments: a cleared box is not "unchanged"."""

    action = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    seq = forms.IntegerField(min_value=0)
    feedback = PersonTextField(what="Your reason", required=False, max_length=4000)
    args = PersonTextField(what="The arguments box", required=False, max_length=20000)

    def __init__(self, *args, gate: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = gate
        if gate == ASK_GATE:
            self.fields["feedback"].what = "Your answer"

    def clean_args(self):
        text = (self.cleaned_data.get("args") or "").strip()
        if not text:
            return None
        try:
            value = safe_json.loads(text)
        except safe_json.TooDeep:
            raise forms.ValidationError(
                f"The arguments are nested too deeply (more than {safe_json.MAX_DEPTH} "
                "levels of brackets).") from None
        except ValueError:
            raise forms.ValidationError("The arguments are not valid JSON.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("The arguments must be a JSON object.")
        try:
            return check_arguments(value)
        except InvalidDecision as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        data = super().clean()
        if self.gate == APPROVAL_GATE and data.get("action") == "approve" \
                and "args" not in self.errors and data.get("args") is None:
            self.add_error("args", "Write the arguments of the call as a JSON object "
                                   "({} when the tool takes none), then approve.")
        return data
