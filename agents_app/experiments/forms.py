"""The dataset upload and the experiment launch forms (issue 34). The launch form reads into
the same ``GridSpec`` as ``manage.py experiment run SPEC.toml``; each field's text here is how
its flag or TOML key is written there."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django import forms

from ..forms import clean_task_text
from ..models import Dataset, Experiment
from ..patterns import task_patterns
from .datasets import MAX_BYTES

ASSIGNMENT_HELP = ("One assignment per line: role=model pairs separated by commas, \"*\" for "
                   "every role not named, and an optional label before a colon — e.g. "
                   "\"brief: *=offline/default, executor=offline/brief\".")


MAX_JSON_CHARS = 100_000


def read_json_field(text: str, label: str) -> Any:
    """A JSON field of the form: its value, or a ValidationError in words (too big, too deep,
    not JSON)."""
    if len(text) > MAX_JSON_CHARS:
        raise forms.ValidationError(f"{label} is {len(text):,} characters; at most "
                                    f"{MAX_JSON_CHARS:,}.")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(f"Not JSON: {exc.msg} (line {exc.lineno}).") from None
    except RecursionError:
        raise forms.ValidationError(f"{label} is nested too deeply.") from None


def no_nul(value: str, label: str) -> str:
    if "\x00" in value:
        raise forms.ValidationError(f"{label} contains a NUL character.")
    return value


class DatasetUploadForm(forms.Form):
    name = forms.CharField(max_length=200)
    file = forms.FileField(help_text="JSONL (one object per line) or CSV with a header row; "
                                     "each row a \"task\", optionally an \"id\", a "
                                     "\"reference\", \"expected_findings\" and \"checks\".")

    def clean_name(self) -> str:
        return clean_task_text(no_nul(self.cleaned_data["name"], "The name"), "name",
                               "Give the dataset a name.")

    def clean_file(self):
        f = self.cleaned_data["file"]
        if f.size > MAX_BYTES:
            raise forms.ValidationError(f"The file is {f.size:,} bytes; at most {MAX_BYTES:,}.")
        return f


def parse_assignments(text: str) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        label = ""
        if ":" in line.split("=", 1)[0]:
            label, line = (part.strip() for part in line.split(":", 1))
        models = {}
        for pair in line.split(","):
            if not pair.strip():
                continue
            if "=" not in pair:
                raise forms.ValidationError(f"Line {n}: {pair.strip()!r} is not role=model.")
            role, model = (p.strip() for p in pair.split("=", 1))
            if not role or not model:
                raise forms.ValidationError(f"Line {n}: a role and a model on each side of "
                                            "\"=\".")
            if role in models:
                raise forms.ValidationError(f"Line {n}: {role} is named twice.")
            models[role] = model
        if not models:
            raise forms.ValidationError(f"Line {n}: no role=model pair.")
        out.append({"label": label, "models": models})
    if not out:
        raise forms.ValidationError("Give at least one model assignment.")
    return out


class ExperimentForm(forms.Form):
    nonce = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
    name = forms.CharField(max_length=200)
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(),
                                     empty_label="Choose a dataset")
    patterns = forms.MultipleChoiceField(choices=(), widget=forms.CheckboxSelectMultiple)
    options = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                              help_text="Optional: the patterns' options as JSON, e.g. "
                                        "{\"debate\": {\"max_rounds\": 2}}.")
    assignments = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}),
                                  initial="*=offline/default", help_text=ASSIGNMENT_HELP)
    repetitions = forms.IntegerField(min_value=1, max_value=50, initial=3)
    evaluators = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}),
                                 initial='[{"kind": "exact"}]', required=False,
                                 help_text="A JSON list of evaluators (exact, regex, "
                                           "json_schema, numeric, findings, judge).")
    pairwise = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                               label="Pairwise judge",
                               help_text="Optional: two cells' answers judged against each "
                                         "other in both orders once the grid ends, e.g. "
                                         "{\"cells\": [1, 2], \"rubric\": \"Which answer "
                                         "is more correct and complete?\"}.")
    reject_note = forms.CharField(max_length=2000, required=False,
                                  initial="Rejected by the experiment's gate policy.")
    budget_usd = forms.DecimalField(required=False, min_value=Decimal(0), max_digits=10,
                                    decimal_places=4, label="Budget (USD)",
                                    help_text="A hard cap: no run starts once it is spent.")
    concurrency = forms.IntegerField(min_value=1, max_value=200, initial=8,
                                     help_text="Runs of this experiment at once.")
    baseline = forms.ModelChoiceField(queryset=Experiment.objects.none(), required=False,
                                      empty_label="No baseline")

    def __init__(self, *args, owner, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            import secrets

            self.initial.setdefault("nonce", secrets.token_hex(16))
        from ..teams.fields import add_team_field

        add_team_field(self, owner)  # a team's experiment: its members see it (issue 35)
        self.fields["dataset"].queryset = Dataset.objects.filter(owner=owner)
        self.fields["baseline"].queryset = Experiment.objects.filter(owner=owner)
        patterns = task_patterns()
        self.fields["patterns"].choices = [(p.name, p.label) for p in patterns]
        self.gate_names = sorted({g for p in patterns for g in p.gates})
        for gate in self.gate_names:
            self.fields[f"gate_{gate}"] = forms.ChoiceField(
                choices=[("wait", "wait for a person"), ("approve", "approve"),
                         ("reject", "reject once with the note, then approve the revision")], initial="wait", required=False,
                label=gate.replace("_", " ").capitalize(), widget=forms.RadioSelect)

    @property
    def gate_fields(self):
        return [self[f"gate_{g}"] for g in self.gate_names]

    def clean_name(self) -> str:
        return clean_task_text(no_nul(self.cleaned_data["name"], "The name"), "name",
                               "Give the experiment a name.")

    def clean_options(self) -> dict[str, Any]:
        text = no_nul(self.cleaned_data.get("options") or "", "The options").strip()
        if not text:
            return {}
        value = read_json_field(text, "The options")
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise forms.ValidationError("An object of pattern name → its options object.")
        return value

    def clean_assignments(self) -> list[dict[str, Any]]:
        return parse_assignments(no_nul(self.cleaned_data["assignments"], "The assignments"))

    def clean_evaluators(self) -> list[dict[str, Any]]:
        text = no_nul(self.cleaned_data.get("evaluators") or "", "The evaluators").strip()
        if not text:
            return []
        value = read_json_field(text, "The evaluators")
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise forms.ValidationError("A JSON list of evaluator objects.")
        return value

    def clean_pairwise(self) -> dict[str, Any] | None:
        text = no_nul(self.cleaned_data.get("pairwise") or "", "The pairwise judge").strip()
        if not text:
            return None
        value = read_json_field(text, "The pairwise judge")
        if not isinstance(value, dict):
            raise forms.ValidationError("An object with \"cells\" and \"rubric\".")
        return value

    def clean_reject_note(self) -> str:
        return no_nul(self.cleaned_data.get("reject_note") or "", "The note")

    def spec_data(self) -> dict[str, Any]:
        d = self.cleaned_data
        options = d.get("options") or {}
        unknown = set(options) - set(d["patterns"])
        if unknown:
            raise forms.ValidationError(f"Options for patterns not chosen: "
                                        f"{', '.join(sorted(unknown))}.")
        return {
            "name": d["name"],
            "patterns": [{"name": p, "options": options.get(p, {})} for p in d["patterns"]],
            "assignments": d["assignments"], "repetitions": d["repetitions"],
            "evaluators": d.get("evaluators") or [],
            "gates": {g: d[f"gate_{g}"] for g in self.gate_names if d.get(f"gate_{g}")},
            "reject_note": d.get("reject_note") or "Rejected by the experiment's gate policy.",
            "budget_usd": str(d["budget_usd"]) if d.get("budget_usd") is not None else None,
            "concurrency": d["concurrency"],
            "baseline": d["baseline"].pk if d.get("baseline") else None,
            "pairwise": d.get("pairwise"),
        }
