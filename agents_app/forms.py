from __future__ import annotations

from datetime import date
from decimal import Decimal

from django import forms
from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator

from .llm.gateway import check_model_name
from .models import Status, gate_status_labels, status_groups
from .option_fields import option_fields, options_from
from .patterns import PATTERNS, task_patterns
from .patterns.gate_input import control_message
from .search import search_terms
from .teams.fields import add_team_field


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

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        add_team_field(self, user)
        self.role_fields = {}
        for role, patterns in _task_roles().items():
            name = f"model_{role}"
            default = role_default(role)
            self.fields[name] = forms.CharField(
                label=f"{role.replace('_', ' ').capitalize()} model", required=False, help_text=f"Default: {default}",
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
        """Lists of choices, text boxes and check boxes, each on a line of its own: (bound
        field, kind, boxes), where a list of choices has its boxes, each with the patterns
        that take it (ReWOO's tools have no "ask person"), so the page shows only those."""
        order = {"choices": 0, "text": 1, "flag": 2}
        entries = sorted((e for e in self.options_fields.values() if e.kind != "value"),
                         key=lambda e: order[e.kind])
        return [(self[e.name], e.kind, [
            (box, " ".join(e.choice_patterns.get(box.data["value"], e.patterns)))
            for box in self[e.name]] if e.kind == "choices" else [])
            for e in entries]

    def pattern_purposes(self):
        """What each pattern is for, in one line, shown under the chosen pattern's name."""
        return [p for p in task_patterns() if p.purpose]

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


def _statuses():
    """Any status, then the groups people think in, each with its detailed statuses inside."""
    labels = {**dict(Status.choices), **gate_status_labels()}
    return [("", "Any status"), *[
        (words, [(key, f"Anything {words.lower()}"), *[(s, labels.get(s, s)) for s in statuses]])
        for key, words, statuses in status_groups()]]


# The history's orders: value → words. The default is newest first; "-" puts the largest first.
SORTS = {"-started": "Newest first", "started": "Oldest first",
         "-cost": "Cost, highest first", "cost": "Cost, lowest first",
         "-tokens": "Tokens, most first", "tokens": "Tokens, fewest first",
         "-duration": "Duration, longest first", "duration": "Duration, shortest first"}
# Dates the history accepts: wide enough for any real run, narrow enough that a day's bounds
# are valid datetimes in every time zone.
FIRST_DAY, LAST_DAY = date(2000, 1, 1), date(2100, 12, 31)
MAX_SEARCH_TERMS = 10
MAX_ID = 2**63 - 1


def _day_field(label: str) -> forms.DateField:
    return forms.DateField(required=False, label=label, widget=forms.DateInput(
        attrs={"type": "date", "min": FIRST_DAY.isoformat(), "max": LAST_DAY.isoformat()}))


def _cost_field(label: str) -> forms.DecimalField:
    return forms.DecimalField(required=False, label=label, min_value=Decimal(0),
                              max_value=Decimal(1_000_000), decimal_places=6, widget=forms.NumberInput(
                                  attrs={"step": "any", "min": "0", "placeholder": "USD"}))


class HistoryFilterForm(forms.Form):
    """The history's filters, sort and page position: all query parameters. A value that cannot
    be used is named in the page's message and left out; the rest still apply."""

    status = forms.ChoiceField(choices=_statuses, required=False)
    pattern = forms.ChoiceField(choices=_all_patterns, required=False)
    q = forms.CharField(required=False, max_length=200, label="Search")
    start = _day_field("From")
    end = _day_field("To")
    model = forms.CharField(required=False, max_length=200, label="Model")
    min_cost = _cost_field("Min cost (USD)")
    max_cost = _cost_field("Max cost (USD)")
    sort = forms.ChoiceField(choices=list(SORTS.items()), required=False, label="Sort")
    before = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                label="Page position", widget=forms.HiddenInput)
    after = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                               label="Page position", widget=forms.HiddenInput)

    # ``from`` and ``to`` are the parameters' names (``from`` is a Python keyword).
    PARAM_NAMES = {"start": "from", "end": "to"}

    def __init__(self, data=None, **kwargs):
        if data is not None:
            data = data.copy()
            for field, param in self.PARAM_NAMES.items():
                if param in data:
                    data[field] = data[param]
        super().__init__(data, **kwargs)

    def clean_q(self):
        q = self.cleaned_data["q"]
        if len(search_terms(q)) > MAX_SEARCH_TERMS:
            raise forms.ValidationError(f"Use at most {MAX_SEARCH_TERMS} words.")
        return q

    def _clean_day(self, name: str):
        day = self.cleaned_data[name]
        if day and not FIRST_DAY <= day <= LAST_DAY:
            raise forms.ValidationError(f"Pick a day between {FIRST_DAY} and {LAST_DAY}.")
        return day

    def clean_start(self):
        return self._clean_day("start")

    def clean_end(self):
        return self._clean_day("end")

    def clean(self):
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        if start and end and start > end:
            self.add_error("start", f"{start} is after the “To” day, {end}.")
        low, high = data.get("min_cost"), data.get("max_cost")
        if low is not None and high is not None and low > high:
            self.add_error("min_cost", f"{low} is more than the max cost, {high}.")
        if data.get("before") and (data.get("sort") or "-started") != "-started":
            self.add_error("before", "This position pages the newest-first order only; use the "
                           "pager's links.")
        return data

    def problems(self) -> list[tuple[str, str]]:
        """(label, message) of each value that could not be used."""
        return [(self.fields[name].label or name.capitalize() if name in self.fields else "Filters",
                 " ".join(str(m) for m in messages)) for name, messages in self.errors.items()]

    def usable(self) -> dict:
        """The values that can be used: every field that has no error."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return {name: value for name, value in self.cleaned_data.items()
                if name not in self.errors and value not in (None, "")}


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


