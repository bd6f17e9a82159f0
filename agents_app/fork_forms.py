"""The fork form (issue 33): the edit at the fork point as fields made from the pattern's
schema for that stage, another model for any role, a policy per gate, a budget and a note.

Fields come from the pydantic schema the pattern gives (``Pattern.fork_edit``): a list of
strings is a textarea with one item per line, a string a textarea, numbers and booleans
their own inputs, anything else (lists of objects, say) JSON in a textarea. The pattern's
schema checks the values, so the messages are the ones its gate forms give.
"""

from __future__ import annotations

import json
import typing
from decimal import Decimal
from typing import Any

from django import forms

from .forking.create import GATE_POLICIES
from .patterns.base import ForkEdit, Pattern

MAX_EDIT_CHARS = 200_000
POLICY_WORDS = {"ask": "ask me again", "reuse": "reuse the original decision when what is "
                "decided is the same", "approve": "approve automatically"}


def _kind(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is str:
        return "text"
    if annotation is bool:
        return "bool"
    if annotation is int:
        return "int"
    if annotation is float:
        return "float"
    if origin is list and args and args[0] is str:
        return "lines"
    return "json"


class ForkForm(forms.Form):
    note = forms.CharField(required=False, max_length=2000, label="Why this fork (optional)",
                           widget=forms.TextInput())
    max_cost_usd = forms.DecimalField(required=False, min_value=Decimal("0.0001"),
                                      max_value=Decimal("1000"), decimal_places=4,
                                      label="Cost budget (USD)")
    max_tokens = forms.IntegerField(required=False, min_value=100, max_value=50_000_000,
                                    label="Token budget")
    nonce = forms.CharField(max_length=64, widget=forms.HiddenInput(), required=False)

    def __init__(self, *args, pattern: Pattern, run, edit: ForkEdit | None, **kwargs):
        super().__init__(*args, **kwargs)
        self.pattern, self.edit = pattern, edit
        self.edit_fields: list[str] = []
        if edit is not None:
            for name, info in edit.schema.model_fields.items():
                kind = _kind(info.annotation)
                value = edit.value.get(name)
                label = (info.description or name.replace("_", " ").capitalize())
                if kind == "lines":
                    field: forms.Field = forms.CharField(
                        required=False, max_length=MAX_EDIT_CHARS, label=f"{label} (one per line)",
                        widget=forms.Textarea(attrs={"rows": max(3, len(value or []) + 1)}),
                        initial="\n".join(value or []))
                elif kind == "text":
                    field = forms.CharField(required=False, max_length=MAX_EDIT_CHARS,
                                            label=label, initial=value,
                                            widget=forms.Textarea(attrs={"rows": 6}))
                elif kind == "bool":
                    field = forms.BooleanField(required=False, label=label, initial=value)
                elif kind == "int":
                    field = forms.IntegerField(required=False, label=label, initial=value)
                elif kind == "float":
                    field = forms.FloatField(required=False, label=label, initial=value)
                else:
                    field = forms.CharField(
                        required=False, max_length=MAX_EDIT_CHARS, label=f"{label} (JSON)",
                        initial=json.dumps(value, indent=1, ensure_ascii=False),
                        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}))
                field.kind = kind  # type: ignore[attr-defined]
                self.fields[f"edit_{name}"] = field
                self.edit_fields.append(name)
        for role in pattern.roles:
            self.fields[f"model_{role}"] = forms.CharField(
                required=False, max_length=200, label=role,
                initial=(run.models_used or {}).get(role, ""))
        for gate in pattern.gates:
            self.fields[f"gate_{gate}"] = forms.ChoiceField(
                choices=[(p, POLICY_WORDS[p]) for p in GATE_POLICIES], initial="ask",
                required=False,
                label=f"At the {gate.replace('_', ' ')} gate", widget=forms.RadioSelect)
        self.run = run

    def edits(self) -> dict[str, Any] | None:
        """The edited values, or None when nothing was changed. Raises ValidationError with
        the field's message for JSON that cannot be read."""
        if self.edit is None:
            return None
        out: dict[str, Any] = {}
        for name in self.edit_fields:
            field = self.fields[f"edit_{name}"]
            raw = self.cleaned_data.get(f"edit_{name}")
            kind = getattr(field, "kind", "json")
            if kind == "lines":
                value: Any = [ln.strip() for ln in (raw or "").replace("\r\n", "\n").split("\n")
                              if ln.strip()]
            elif kind == "json":
                try:
                    value = json.loads(raw or "null")
                except ValueError:
                    raise forms.ValidationError(f"{field.label}: this is not JSON.") from None
            else:
                value = raw
            out[name] = value
        return None if out == self.edit.value else out

    def models(self) -> dict[str, str]:
        current = self.run.models_used or {}
        return {role: self.cleaned_data[f"model_{role}"].strip()
                for role in self.pattern.roles
                if self.cleaned_data.get(f"model_{role}", "").strip()
                and self.cleaned_data[f"model_{role}"].strip() != current.get(role)}

    def gates(self) -> dict[str, str]:
        return {g: self.cleaned_data[f"gate_{g}"] for g in self.pattern.gates
                if (self.cleaned_data.get(f"gate_{g}") or "ask") != "ask"}

    @property
    def model_fields(self) -> list:
        return [self[f"model_{r}"] for r in self.pattern.roles]

    @property
    def gate_fields(self) -> list:
        return [self[f"gate_{g}"] for g in self.pattern.gates]

    @property
    def edit_bound(self) -> list:
        return [self[f"edit_{n}"] for n in self.edit_fields]


class BudgetForm(forms.Form):
    """"Continue with a higher budget"."""

    max_cost_usd = forms.DecimalField(required=False, min_value=Decimal("0.0001"),
                                      max_value=Decimal("1000"), decimal_places=4,
                                      label="New cost budget (USD)")
    max_tokens = forms.IntegerField(required=False, min_value=100, max_value=50_000_000,
                                    label="New token budget")
