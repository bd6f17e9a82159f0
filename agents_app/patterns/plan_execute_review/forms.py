"""The form behind every decision on a change page: the plan gate (with the edited plan
document), the merge request (merge with a commit message and mode, send back with a
comment, discard) and the escalation. Its errors are sentences for the person."""

from __future__ import annotations

from decimal import Decimal

from django import forms
from django.conf import settings

from ...converters import MAX_ID
from ...forms import check_models, clean_task_text
from ...option_fields import default_of
from .pattern import PlanExecuteReview
from .schemas import MAX_COMMIT_MESSAGE, MERGE_MODES

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


class StartChangeForm(forms.Form):
    """Plan → execute → review on a repository under QUORUM_REPO_ROOTS."""

    repo = forms.CharField(label="Repository", max_length=1000,
                           widget=forms.TextInput(attrs={"placeholder": "/path/to/repository"}))
    base = forms.CharField(label="Base branch", max_length=250, required=False,
                           help_text="The branch the change is merged into. Default: the "
                                     "repository's current branch.")
    task = forms.CharField(label="Change request",
                           error_messages={"required": "Describe the change."},
                           widget=forms.Textarea(attrs={
        "rows": 5, "placeholder": "What should change? e.g. Add a --verbose flag to the CLI "
                                  "and document it in the README."}))
    model_planner = forms.CharField(label="Planner model", required=False)
    model_executor = forms.CharField(label="Executor model", required=False)
    model_reviewer = forms.CharField(label="Reviewer model", required=False)
    test_command = forms.ChoiceField(label="Test command", required=False)
    max_rounds = forms.IntegerField(label="Execute/review rounds before asking you",
                                    min_value=1, max_value=5, required=False)
    max_cost_usd = forms.DecimalField(label="Max cost (USD)", min_value=Decimal("0.0001"),
                                      max_value=Decimal("1000"), decimal_places=4, required=False)
    max_tokens = forms.IntegerField(label="Max tokens", min_value=100, max_value=50_000_000,
                                    required=False)
    auto_approve_plan = forms.BooleanField(label="Approve the plan without asking",
                                           required=False)

    ROLE_FIELDS = {"planner": "model_planner", "executor": "model_executor",
                   "reviewer": "model_reviewer"}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        from ...teams.fields import add_team_field
        from .service import default_models, test_commands

        add_team_field(self, user)
        defaults = default_models()
        for role, name in self.ROLE_FIELDS.items():
            self.fields[name].widget.attrs["placeholder"] = defaults[role]
            self.fields[name].help_text = f"Default: {defaults[role]}"
        commands = test_commands()
        self.fields["test_command"].choices = [("", "No tests"), *[(c, c) for c in commands]]
        if not commands:
            self.fields["test_command"].help_text = ("No test command is configured "
                                                     "(QUORUM_TEST_COMMANDS).")
        self.fields["max_rounds"].widget.attrs["placeholder"] = default_of(PlanExecuteReview, "max_rounds")
        self.fields["max_cost_usd"].widget.attrs["placeholder"] = settings.QUORUM_DEFAULT_MAX_COST_USD
        self.fields["max_tokens"].widget.attrs["placeholder"] = settings.QUORUM_DEFAULT_MAX_TOKENS
        self.repo_top = ""

    def clean_repo(self):
        from .service import ChangeError, check_repo

        try:
            self.repo_top = check_repo(self.cleaned_data["repo"])
        except ChangeError as exc:
            raise forms.ValidationError(str(exc)) from None
        return self.repo_top

    def clean_task(self):
        return clean_task_text(self.cleaned_data["task"], "change request",
                               "Describe the change.")

    def clean(self):
        from .service import ChangeError, check_base

        data = super().clean()
        check_models(self, data, self.ROLE_FIELDS.values())
        if self.repo_top:
            try:
                data["base"] = check_base(self.repo_top, data.get("base", ""))
            except ChangeError as exc:
                self.add_error("base", str(exc))
        return data

    def family_warning(self) -> str:
        """The same-family warning for the models chosen (or the defaults)."""
        from .service import default_models, family_warning

        if self.is_bound and hasattr(self, "cleaned_data"):
            return family_warning(self.models())
        return family_warning(default_models())

    def models(self) -> dict[str, str]:
        from .service import default_models

        defaults = default_models()
        d = self.cleaned_data
        return {role: (d.get(name) or "").strip() or defaults[role]
                for role, name in self.ROLE_FIELDS.items()}
