"""The vote gate's form (Django side of the package)."""

from __future__ import annotations

from django import forms

from ...forms import PersonTextField
from .pattern import ACTIONS, MAX_ANSWER_CHARS, MAX_VOTERS


class VoteDecisionForm(forms.Form):
    """A decision at the ``vote_pick`` gate: ``pick`` a group's answer, ``edit`` a group's
    answer (``answer`` is the text on the screen) and pick it, or ask for ``again`` (another
    round, with optional ``feedback``). ``seq`` is the state the page saw. Whether the group
    exists and the edit is not empty is the pattern's to say (``decide``), for every caller."""

    action = forms.ChoiceField(choices=[(a, a) for a in ACTIONS])
    seq = forms.IntegerField(min_value=0)
    group = forms.IntegerField(required=False, min_value=1, max_value=MAX_VOTERS,
                               error_messages={"min_value": "There is no such group.",
                                               "max_value": "There is no such group.",
                                               "invalid": "There is no such group."})
    answer = PersonTextField(what="The edited answer", required=False, strip=False,
                             max_length=MAX_ANSWER_CHARS)
    feedback = PersonTextField(what="Your feedback", required=False, max_length=4000)

    def clean(self):
        data = super().clean()
        if data.get("action") in ("pick", "edit") and data.get("group") is None \
                and "group" not in self.errors:
            self.add_error("group", "Choose the group whose answer you pick.")
        return data
