"""The form behind every decision on a change page: the plan gate (with the edited plan
document), the merge request (merge with a commit message and mode, send back with a
comment, discard) and the escalation. Its errors are sentences for the person."""

from __future__ import annotations

from django import forms

from .converters import MAX_ID
from .patterns.plan_execute_review import MAX_COMMIT_MESSAGE, MERGE_MODES

ACTIONS = ("approve", "reject", "discard", "another_round", "replan", "stop")
PLAN_FIELDS = ("goal", "files", "approach", "steps", "test_strategy", "risks")


def _text(label: str, limit: int) -> forms.CharField:
    return forms.CharField(required=False, max_length=limit, error_messages={
        "max_length": f"The {label} is too long: at most {limit:,} characters.",
        "null_characters_not_allowed": f"The {label} contains a NUL byte; remove it.",
    })


class ChangeDecisionForm(forms.Form):
    action = forms.ChoiceField(choices=[(a, a) for a in ACTIONS], error_messages={
        "required": "Choose one of the buttons.",
        "invalid_choice": "That action is not one this page offers; reload the page."})
    seq = forms.IntegerField(min_value=0, error_messages={
        "required": "The page is out of date; reload it.",
        "invalid": "The page is out of date; reload it.",
        "min_value": "The page is out of date; reload it."})
    feedback = _text("comment", 4000)
    goal = _text("goal", 4000)
    files = _text("list of files", 20000)
    approach = _text("approach", 4000)
    steps = _text("list of steps", 60000)
    test_strategy = _text("test strategy", 4000)
    risks = _text("list of risks", 20000)
    # Checked by the pattern (clean_commit_message), which says how long it may be; the bound
    # here only keeps absurd posts out of memory.
    commit_message = forms.CharField(required=False, strip=False,
                                     max_length=MAX_COMMIT_MESSAGE * 10, error_messages={
        "max_length": f"The commit message is too long: at most {MAX_COMMIT_MESSAGE:,} "
                      "characters. Nothing was merged.",
        "null_characters_not_allowed": "The commit message contains a NUL byte; remove it. "
                                       "Nothing was merged."})
    merge_mode = forms.ChoiceField(required=False, choices=[("", "")] + [
        (m, m) for m in MERGE_MODES], error_messages={
        "invalid_choice": "Choose a squashed commit or a merge commit."})

    def problem(self) -> str:
        """The form's errors as one plain sentence or a few."""
        return " ".join(str(e) for errors in self.errors.values() for e in errors)

    def edited_plan(self) -> dict | None:
        """The plan document exactly as the editor posted it (an emptied field is empty), or
        None when the post carried no plan editor at all."""
        if not any(name in self.data for name in PLAN_FIELDS):
            return None
        d = self.cleaned_data

        def lines(name):
            return [ln.strip() for ln in (d.get(name) or "").splitlines() if ln.strip()]

        return {"goal": (d.get("goal") or "").strip(), "files": lines("files"),
                "approach": (d.get("approach") or "").strip(), "steps": lines("steps"),
                "test_strategy": (d.get("test_strategy") or "").strip(), "risks": lines("risks")}

    def merge_choice(self) -> dict | None:
        """The commit message and mode from the merge form, or None when the post carried no
        message field (the proposal and a squash then apply)."""
        if "commit_message" not in self.data:
            return None
        return {"message": self.cleaned_data.get("commit_message") or "",
                "mode": self.cleaned_data.get("merge_mode") or ""}


class ChangeListForm(forms.Form):
    """The change list's pager: changes older than ``before`` (a run id)."""

    before = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                widget=forms.HiddenInput)
