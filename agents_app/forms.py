from __future__ import annotations

from decimal import Decimal

from django import forms
from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator

from .llm.gateway import check_model_name
from .models import Status
from .option_fields import option_fields, options_from
from .patterns import PATTERNS, task_patterns
from .patterns.gate_input import control_message, without_control_characters


def check_models(form: forms.Form, data: dict, names) -> None:
    """Add each filled model field's problem (unknown name, no credentials) to ``form``."""
    for name in names:
        value = (data.get(name) or "").strip()
        if value and (problem := check_model_name(value)):
            form.add_error(name, problem)


def clean_task_text(text: str, noun: str, empty: str) -> str:
    text = (text or "").strip()
    limit = settings.QUORUM_MAX_TASK_CHARS
    if not text:
        raise forms.ValidationError(empty)
    if len(text) > limit:
        raise forms.ValidationError(f"The {noun} is {len(text):,} characters; the limit is "
                                    f"{limit:,}.")
    return text


def _task_patterns():
    return [(p.name, p.label) for p in task_patterns()]


def _all_patterns():
    return [("", "Any pattern"), *[(p.name, p.label) for p in PATTERNS.values()]]


def _task_roles() -> dict[str, list[str]]:
    """Each role of the patterns started from a task, with the patterns that use it."""
    roles: dict[str, list[str]] = {}
    for p in task_patterns():
        for role in p.roles:
            roles.setdefault(role, []).append(p.name)
    return roles


def role_default(role: str) -> str:
    return settings.QUORUM_ROLE_MODELS.get(role, settings.QUORUM_DEFAULT_MODEL)


class StartRunForm(forms.Form):
    """The dashboard's start form. Every task pattern's roles and options are fields, made
    from the patterns' option models (``option_fields``); each carries the patterns it belongs
    to (``data-patterns``), so the page shows only those of the chosen pattern, and only those
    are read."""

    pattern = forms.ChoiceField(choices=_task_patterns)
    task = forms.CharField(error_messages={"required": "Describe the task."},
                           widget=forms.Textarea(attrs={"rows": 5, "placeholder":
                           "What should the agents do? e.g. Compare three vector databases, "
                           "then recommend one for a small team."}))
    max_cost_usd = forms.DecimalField(label="Max cost (USD)", min_value=Decimal("0.0001"),
                                      max_value=Decimal("1000"), decimal_places=4, required=False)
    max_tokens = forms.IntegerField(label="Max tokens", min_value=100, max_value=50_000_000,
                                    required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.role_fields = {}
        for role, patterns in _task_roles().items():
            name = f"model_{role}"
            default = role_default(role)
            self.fields[name] = forms.CharField(
                label=f"{role.capitalize()} model", required=False, help_text=f"Default: {default}",
                widget=forms.TextInput(attrs={"placeholder": default,
                                              "data-patterns": " ".join(patterns)}))
            self.role_fields[role] = name
        self.options_fields = option_fields()
        for name, entry in self.options_fields.items():
            self.fields[name] = entry.field
        self.fields["max_cost_usd"].widget.attrs["placeholder"] = settings.QUORUM_DEFAULT_MAX_COST_USD
        self.fields["max_tokens"].widget.attrs["placeholder"] = settings.QUORUM_DEFAULT_MAX_TOKENS
        self._options: dict | None = None

    def model_fields(self):
        return [self[name] for name in self.role_fields.values()]

    def limit_fields(self):
        """The budget and the number-and-choice options, laid out in a grid."""
        names = ["max_cost_usd", "max_tokens", *[n for n, e in self.options_fields.items()
                                                 if e.kind == "value"]]
        return [self[n] for n in names]

    def other_option_fields(self):
        """Lists of choices, text boxes and check boxes, each on a line of its own."""
        order = {"choices": 0, "text": 1, "flag": 2}
        entries = sorted((e for e in self.options_fields.values() if e.kind != "value"),
                         key=lambda e: order[e.kind])
        return [(self[e.name], e.kind) for e in entries]

    def clean_task(self):
        return clean_task_text(self.cleaned_data["task"], "task", "Describe the task.")

    def clean(self):
        data = super().clean()
        pattern = PATTERNS.get(data.get("pattern") or "")
        if pattern is None:
            return data
        # Fields of other patterns are not read, so their values cannot block this one.
        for name, entry in self.options_fields.items():
            if pattern.name not in entry.patterns and name in self._errors:
                del self._errors[name]
                data.pop(name, None)
        for role, name in self.role_fields.items():
            if role not in pattern.roles and name in self._errors:
                del self._errors[name]
        check_models(self, data, [self.role_fields[role] for role in pattern.roles])
        if not any(pattern.name in e.patterns and n in self._errors
                   for n, e in self.options_fields.items()):
            self._options, problem = options_from(pattern, self.options_fields, data)
            if problem:
                self.add_error(problem[0] or None, problem[1])
        return data

    def models(self) -> dict[str, str]:
        d = self.cleaned_data
        pattern = PATTERNS[d["pattern"]]
        return {role: (d.get(self.role_fields[role]) or "").strip() or role_default(role)
                for role in pattern.roles}

    def options(self) -> dict:
        assert self._options is not None, "options() before a valid clean()"  # noqa: S101
        return self._options

    def budget(self) -> tuple[Decimal, int]:
        d = self.cleaned_data
        cost = d.get("max_cost_usd") or Decimal(str(settings.QUORUM_DEFAULT_MAX_COST_USD))
        return cost, d.get("max_tokens") or settings.QUORUM_DEFAULT_MAX_TOKENS


class HistoryFilterForm(forms.Form):
    status = forms.ChoiceField(choices=[("", "Any status"), *Status.choices], required=False)
    pattern = forms.ChoiceField(choices=_all_patterns, required=False)
    q = forms.CharField(required=False, max_length=200, label="Search")
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)


class PersonTextField(forms.CharField):
    """Text a person types at a gate. Control characters are refused with a message that
    names them and says they were taken out of the text shown again (Django's own check
    covers NUL only, in words that do not say where)."""

    def __init__(self, *, what: str, **kwargs):
        super().__init__(**kwargs)
        self.what = what
        self.validators = [v for v in self.validators
                           if not isinstance(v, ProhibitNullCharactersValidator)]

    def validate(self, value):
        super().validate(value)
        if message := control_message(self.what, value, removed=True):
            raise forms.ValidationError(message)


def read_errors(form: forms.Form) -> str:
    """The form's errors in one message for the gate. A missing or garbled action or
    ``seq`` does not come from the page as it is: the person is asked to reload."""
    if {"action", "seq"} & set(form.errors):
        return "That decision could not be read; reload the page and try again."
    return " ".join(e for errs in form.errors.values() for e in errs)


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

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from .changes import default_models, test_commands

        defaults = default_models()
        for role, name in self.ROLE_FIELDS.items():
            self.fields[name].widget.attrs["placeholder"] = defaults[role]
            self.fields[name].help_text = f"Default: {defaults[role]}"
        commands = test_commands()
        self.fields["test_command"].choices = [("", "No tests"), *[(c, c) for c in commands]]
        if not commands:
            self.fields["test_command"].help_text = ("No test command is configured "
                                                     "(QUORUM_TEST_COMMANDS).")
        self.fields["max_rounds"].widget.attrs["placeholder"] = settings.QUORUM_CHANGE_MAX_ROUNDS
        self.fields["max_cost_usd"].widget.attrs["placeholder"] = settings.QUORUM_DEFAULT_MAX_COST_USD
        self.fields["max_tokens"].widget.attrs["placeholder"] = settings.QUORUM_DEFAULT_MAX_TOKENS
        self.repo_top = ""

    def clean_repo(self):
        from .changes import ChangeError, check_repo

        try:
            self.repo_top = check_repo(self.cleaned_data["repo"])
        except ChangeError as exc:
            raise forms.ValidationError(str(exc)) from None
        return self.repo_top

    def clean_task(self):
        return clean_task_text(self.cleaned_data["task"], "change request",
                               "Describe the change.")

    def clean(self):
        from .changes import ChangeError, check_base

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
        from .changes import default_models, family_warning

        if self.is_bound and hasattr(self, "cleaned_data"):
            return family_warning(self.models())
        return family_warning(default_models())

    def models(self) -> dict[str, str]:
        from .changes import default_models

        defaults = default_models()
        d = self.cleaned_data
        return {role: (d.get(name) or "").strip() or defaults[role]
                for role, name in self.ROLE_FIELDS.items()}

