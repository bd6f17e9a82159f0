"""The plan gate's form. (Django side of the package.)"""

from __future__ import annotations

from django import forms

from ...forms import PersonTextField
from ..gate_input import control_message, without_control_characters


class PlanDecisionForm(forms.Form):
    """The plan gate. ``steps`` (repeated) is the plan on the screen, every step in order:
    approving approves exactly that list, so a form whose steps were all deleted approves
    nothing (the plan pattern refuses an empty plan). ``seq`` is the state the page saw."""

    action = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    seq = forms.IntegerField(min_value=0)
    feedback = PersonTextField(what="Your feedback", required=False, max_length=4000)

    def shown_steps(self) -> list[str]:
        """The steps as posted, for the page to show again (control characters removed)."""
        return [without_control_characters(s) for s in self.data.getlist("steps")]

    def clean(self):
        data = super().clean()
        steps = [s.replace("\r\n", "\n") for s in self.data.getlist("steps")]
        if data.get("action") == "approve":
            for n, step in enumerate(steps, 1):
                if message := control_message(f"Step {n}", step, removed=True):
                    self.add_error(None, message)
                    break
        data["steps"] = steps
        return data
