from __future__ import annotations

from decimal import Decimal

from django import forms
from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator

from .llm.gateway import check_model_name
from .models import Status
from .patterns import PATTERNS, safe_json
from .patterns.base import InvalidDecision
from .patterns.debate import DEFAULT_POSITIONS, parse_positions
from .patterns.gate_input import check_arguments, control_message, without_control_characters
from .patterns.react import APPROVAL_GATE, ASK_GATE
from .patterns.team_lead import DEFAULT_TEAM, parse_team


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
    return [(p.name, p.label) for p in PATTERNS.values() if p.starts_from_task]


def _all_patterns():
    return [("", "Any pattern"), *[(p.name, p.label) for p in PATTERNS.values()]]


def _task_roles() -> dict[str, list[str]]:
    """Each role of the patterns started from a task, with the patterns that use it."""
    roles: dict[str, list[str]] = {}
    for p in PATTERNS.values():
        if p.starts_from_task:
            for role in p.roles:
                roles.setdefault(role, []).append(p.name)
    return roles


class StartRunForm(forms.Form):
    """The dashboard's start form. Every task pattern's roles and options are fields; each
    carries the patterns it belongs to (``data-patterns``), so the page shows only those of
    the chosen pattern, and only those are read."""

    pattern = forms.ChoiceField(choices=_task_patterns)
    task = forms.CharField(error_messages={"required": "Describe the task."},
                           widget=forms.Textarea(attrs={"rows": 5, "placeholder":
                           "What should the agents do? e.g. Compare three vector databases, "
                           "then recommend one for a small team."}))
    max_cost_usd = forms.DecimalField(label="Max cost (USD)", min_value=Decimal("0.0001"),
                                      max_value=Decimal("1000"), decimal_places=4, required=False)
    max_tokens = forms.IntegerField(label="Max tokens", min_value=100, max_value=50_000_000,
                                    required=False)
    max_steps = forms.IntegerField(label="Max steps", min_value=1, max_value=30, required=False)
    max_replans = forms.IntegerField(label="Max replans", min_value=0, max_value=10, required=False)
    max_reflections = forms.IntegerField(label="Max rounds", min_value=1, max_value=10,
                                         required=False)
    max_rounds = forms.IntegerField(label="Rounds", min_value=1, max_value=5, required=False)
    positions = forms.CharField(label="Positions", required=False, max_length=6000,
                                widget=forms.Textarea(attrs={"rows": 3}),
                                help_text="One per line, “name: stance”; 2 to 5 positions.")
    max_iterations = forms.IntegerField(label="Max iterations", min_value=1, max_value=30,
                                        required=False)
    max_tool_calls = forms.IntegerField(label="Max tool calls", min_value=1, max_value=50,
                                        required=False)
    top_k_sketches = forms.IntegerField(label="Max tool calls planned", min_value=1,
                                        max_value=10, required=False)
    max_parallel_work = forms.IntegerField(label="Calls at once", min_value=1, max_value=10,
                                           required=False)
    max_verify_passes = forms.IntegerField(label="Verify passes", min_value=0, max_value=3,
                                           required=False)
    tools = forms.MultipleChoiceField(label="Tools", required=False,
                                      widget=forms.CheckboxSelectMultiple,
                                      help_text="None ticked: all of them.")
    approval = forms.MultipleChoiceField(label="Ask me before running", required=False,
                                         widget=forms.CheckboxSelectMultiple)
    strategy = forms.ChoiceField(label="Strategy", required=False, initial="dynamic",
                                 choices=[("dynamic", "Dynamic (the lead reviews and may "
                                           "reassign)"), ("sequential", "Sequential"),
                                          ("parallel", "Parallel")])
    team = forms.CharField(label="Team", required=False, max_length=4000,
                           widget=forms.Textarea(attrs={"rows": 3}),
                           help_text="One per line, “name: what they do”; 1 to 6 members.")
    max_reassignments = forms.IntegerField(label="Reassignment rounds", min_value=0,
                                           max_value=5, required=False)
    auto_approve = forms.BooleanField(label="Auto-approve the plan", required=False)
    complexity_gate = forms.BooleanField(label="Skip planning for simple tasks", required=False)

    OPTION_PATTERNS = {
        "strategy": "team_lead", "team": "team_lead", "max_reassignments": "team_lead",
        "max_iterations": "react", "max_tool_calls": "react", "approval": "react",
        "top_k_sketches": "rewoo", "max_parallel_work": "rewoo", "max_verify_passes": "rewoo",
        "tools": "react rewoo",
        "max_steps": "plan_execute", "max_replans": "plan_execute",
        "auto_approve": "plan_execute", "complexity_gate": "plan_execute",
        "max_reflections": "reflective", "max_rounds": "debate", "positions": "debate",
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.role_fields = {}
        for role, patterns in _task_roles().items():
            name = f"model_{role}"
            default = settings.QUORUM_ROLE_MODELS.get(role, settings.QUORUM_DEFAULT_MODEL)
            self.fields[name] = forms.CharField(
                label=f"{role.capitalize()} model", required=False, help_text=f"Default: {default}",
                widget=forms.TextInput(attrs={"placeholder": default,
                                              "data-patterns": " ".join(patterns)}))
            self.role_fields[role] = name
        from .patterns.toolbox import PERSON, registry

        every = registry([])
        self.fields["tools"].choices = [(n, n.replace("_", " ")) for n in every]
        self.fields["approval"].choices = [(n, n.replace("_", " ")) for n, t in every.items()
                                           if t.kind != PERSON]
        for name, pattern in self.OPTION_PATTERNS.items():
            self.fields[name].widget.attrs["data-patterns"] = pattern
        self.fields["max_cost_usd"].widget.attrs["placeholder"] = settings.QUORUM_DEFAULT_MAX_COST_USD
        self.fields["max_tokens"].widget.attrs["placeholder"] = settings.QUORUM_DEFAULT_MAX_TOKENS
        self.fields["max_steps"].widget.attrs["placeholder"] = settings.QUORUM_MAX_STEPS
        self.fields["max_replans"].widget.attrs["placeholder"] = settings.QUORUM_MAX_REPLANS
        self.fields["max_reflections"].widget.attrs["placeholder"] = 3
        self.fields["max_rounds"].widget.attrs["placeholder"] = 2
        self.fields["positions"].widget.attrs["placeholder"] = "For: argue in favour\nAgainst: argue against"
        self.fields["team"].widget.attrs["placeholder"] = ("researcher: finds and summarizes "
                                                           "information\nwriter: writes clear "
                                                           "reports")
        self.fields["max_reassignments"].widget.attrs["placeholder"] = 2

    def model_fields(self):
        return [self[name] for name in self.role_fields.values()]

    def clean_task(self):
        return clean_task_text(self.cleaned_data["task"], "task", "Describe the task.")

    def clean(self):
        data = super().clean()
        pattern = PATTERNS.get(data.get("pattern") or "")
        if pattern is None:
            return data
        # Fields of other patterns are not read, so their values cannot block this one.
        for name, patterns in self.OPTION_PATTERNS.items():
            if pattern.name not in patterns.split() and name in self._errors:
                del self._errors[name]
                data.pop(name, None)
        for role, name in self.role_fields.items():
            if role not in pattern.roles and name in self._errors:
                del self._errors[name]
        if pattern.name == "rewoo" and "ask_person" in (data.get("tools") or []):
            self.add_error("tools", "ReWOO plans all its calls before any runs, so it cannot "
                                    "stop to ask a person: untick “ask person”.")
        check_models(self, data, [self.role_fields[role] for role in pattern.roles])
        if pattern.name in ("debate", "team_lead"):
            # the pattern's list of named participants: (field, parser, default)
            field, parse, default = {"debate": ("positions", parse_positions, DEFAULT_POSITIONS),
                                     "team_lead": ("team", parse_team, DEFAULT_TEAM)}[pattern.name]
            text = (data.get(field) or "").strip()
            try:
                data[f"{field}_parsed"] = parse(text) if text else default
            except InvalidDecision as exc:
                self.add_error(field, str(exc))
        return data


    def models(self) -> dict[str, str]:
        d = self.cleaned_data
        pattern = PATTERNS[d["pattern"]]
        return {role: (d.get(self.role_fields[role]) or "").strip()
                or settings.QUORUM_ROLE_MODELS.get(role, settings.QUORUM_DEFAULT_MODEL)
                for role in pattern.roles}

    def options(self) -> dict:
        d = self.cleaned_data
        if d["pattern"] == "reflective":
            return {"max_reflections": d.get("max_reflections") or 3}
        if d["pattern"] == "debate":
            return {"max_rounds": d.get("max_rounds") or 2, "positions": d["positions_parsed"]}
        if d["pattern"] == "team_lead":
            return {"strategy": d.get("strategy") or "dynamic", "team": d["team_parsed"],
                    "max_reassignments": 2 if d.get("max_reassignments") is None
                    else d["max_reassignments"]}
        if d["pattern"] == "react":
            return {"max_iterations": d.get("max_iterations") or 10,
                    "max_tool_calls": d.get("max_tool_calls") or 20,
                    "tools": d.get("tools") or [], "approval": d.get("approval") or [],
                    "repo_roots": list(settings.QUORUM_REPO_ROOTS)}
        if d["pattern"] == "rewoo":
            return {"top_k_sketches": d.get("top_k_sketches") or 4,
                    "max_parallel_work": d.get("max_parallel_work") or 4,
                    "max_verify_passes": 1 if d.get("max_verify_passes") is None
                    else d["max_verify_passes"],
                    "tools": d.get("tools") or [], "repo_roots": list(settings.QUORUM_REPO_ROOTS)}
        return {
            "auto_approve": d["auto_approve"],
            "complexity_gate": d["complexity_gate"],
            "max_steps": d.get("max_steps") or settings.QUORUM_MAX_STEPS,
            "max_replans": settings.QUORUM_MAX_REPLANS if d.get("max_replans") is None
            else d["max_replans"],
        }

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
