"""Form fields and command-line flags made from the patterns' option models.

A pattern's options are one pydantic model (``patterns/options.py``). Here each option becomes
a Django form field for the start form and an argparse flag for ``manage.py run_pattern``, with
the same limits and the same messages; the values they read are then checked by the model
itself, so a rule (a range, a list of named lines, "ReWOO cannot ask a person") lives in one
place. Nothing here names a pattern.
"""

from __future__ import annotations

import argparse
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from django import forms
from django.conf import settings
from pydantic import ValidationError

from .cli import form_type
from .patterns import task_patterns
from .patterns.base import Pattern
from .patterns.options import extra, first_error


@dataclass
class OptionField:
    """One form field / flag, shared by the patterns whose option of that name is the same."""

    name: str  # the form field's name and the flag's (--max-rounds)
    option: str  # the option's name in the patterns' models
    field: forms.Field
    patterns: list[str] = field(default_factory=list)
    kind: str = "value"  # value | flag | choices | text
    helps: list[str] = field(default_factory=list)
    # For a list of choices shared by patterns that do not all take every choice (ReAct's
    # tools and ReWOO's, which has no ask_person): the patterns each choice belongs to.
    choice_patterns: dict[str, list[str]] = field(default_factory=dict)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _choices(annotation) -> list[str] | None:
    if typing.get_origin(annotation) is Literal:
        return [str(v) for v in typing.get_args(annotation)]
    return None


def _inner_list(annotation):
    """``X`` for ``list[X]`` (also inside Annotated / Optional), else None."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _inner_list(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if (inner := _inner_list(arg)) is not None:
                return inner
    if origin is list:
        return typing.get_args(annotation)[0]
    return None


def default_of(pattern: Pattern, option: str) -> Any:
    """The option's default, or the site's setting for it when one is set."""
    info = pattern.options.model_fields[option]
    setting = extra(info).get("setting")
    if setting and getattr(settings, setting, None) is not None:
        return getattr(settings, setting)
    return info.get_default(call_default_factory=True)


def setting_errors(patterns: list[Pattern]) -> list[str]:
    """One sentence for each number a site setting gives a pattern option that the option
    refuses (``QUORUM_MAX_STEPS=100`` where at most 30 is allowed): a worker and ``make dev``
    stop on it at start, instead of each run's form finding out."""
    out: dict[str, str] = {}
    for pattern in patterns:
        for option, info in pattern.options.model_fields.items():
            setting = extra(info).get("setting")
            value = getattr(settings, setting, None) if setting else None
            if setting in out or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            try:
                pattern.check_options({option: value}, headless=True)
            except ValidationError as exc:
                refused, message = first_error(exc)
                if refused == option:
                    out[setting] = f"{setting} is out of range for {pattern.label}: {message}."
    return list(out.values())


def check_pattern_settings() -> None:
    """At a worker's or ``make dev``'s start: every pattern loaded, its options' settings
    checked (ImproperlyConfigured: manage.py says it on one line, exit 2)."""
    from django.core.exceptions import ImproperlyConfigured

    from .patterns.registry import load_all

    if errors := setting_errors(load_all()):
        raise ImproperlyConfigured(" ".join(errors))


def _placeholder(value: Any) -> str:
    if isinstance(value, list):
        if value and isinstance(value[0], dict):  # named lines: shown as they are typed
            return "\n".join(": ".join(str(v) for v in item.values()) for item in value)
        return ", ".join(map(str, value)) or ""
    return "" if value is None else str(value)


def _make_field(pattern: Pattern, option: str) -> tuple[forms.Field, str]:
    info = pattern.options.model_fields[option]
    meta = extra(info)
    label = info.title or option.replace("_", " ").capitalize()
    common: dict[str, Any] = {"label": label, "required": False,
                              "help_text": info.description or ""}
    limits = {m.__class__.__name__: m for m in info.metadata}
    annotation = info.annotation
    labels = meta.get("choice_labels", {})
    if annotation is bool:
        return forms.BooleanField(**common), "flag"
    if (choices := _choices(annotation)) is not None:
        return forms.ChoiceField(choices=[(c, labels.get(c, c.replace("_", " ")))
                                          for c in choices], initial=info.default,
                                 **common), "value"
    inner = _inner_list(annotation)
    if inner is not None and (choices := _choices(inner)) is not None:
        return forms.MultipleChoiceField(
            choices=[(c, labels.get(c, c.replace("_", " "))) for c in choices],
            widget=forms.CheckboxSelectMultiple, **common), "choices"
    if annotation is int:
        low = getattr(limits.get("Ge"), "ge", None)
        high = getattr(limits.get("Le"), "le", None)
        return forms.IntegerField(min_value=low, max_value=high, **common), "value"
    max_length = meta.get("max_chars")
    widget = forms.Textarea(attrs={"rows": 3}) if meta.get("widget") == "textarea" else None
    return forms.CharField(max_length=max_length, widget=widget, **common), "text"


def _same(a: forms.Field, b: forms.Field) -> bool:
    def shape(f):
        return (type(f), f.label, getattr(f, "min_value", None), getattr(f, "max_value", None),
                getattr(f, "max_length", None), tuple(getattr(f, "choices", ()) or ()))
    return shape(a) == shape(b)


def _mergeable(a: forms.Field, b: forms.Field) -> bool:
    """Two lists of check boxes of the same name and label: one field, each box shown for the
    patterns that take it."""
    return isinstance(a, forms.MultipleChoiceField) and type(a) is type(b) \
        and a.label == b.label


def option_fields(patterns: list[Pattern] | None = None) -> dict[str, OptionField]:
    """The fields of every option a person may set, by field name, in registry order. Two
    patterns share a field when their option of that name is the same; otherwise the later
    one's field is named ``<pattern>_<option>``."""
    fields: dict[str, OptionField] = {}
    for pattern in task_patterns() if patterns is None else patterns:
        for option, info in pattern.options.model_fields.items():
            meta = extra(info)
            if meta.get("hidden"):
                continue
            made, kind = _make_field(pattern, option)
            name = option
            if name in fields and not _same(fields[name].field, made) \
                    and not _mergeable(fields[name].field, made):
                name = f"{pattern.name}_{option}"
            entry = fields.setdefault(name, OptionField(name, option, made, kind=kind))
            entry.patterns.append(pattern.name)
            if kind == "choices":
                _add_choices(entry, made, pattern.name)
            default = default_of(pattern, option)
            entry.helps.append(f"{pattern.name}: {info.description or info.title}"
                               + (f" (default {_placeholder(default)})"
                                  if kind != "flag" and _placeholder(default) else ""))
            shown = entry.field  # the shared field (``made`` is dropped when one exists)
            if kind in ("value", "text") and "placeholder" not in shown.widget.attrs:
                shown.widget.attrs["placeholder"] = meta.get("placeholder", _placeholder(default))
            shown.widget.attrs["data-patterns"] = " ".join(entry.patterns)
            if meta.get("web_only"):
                entry.helps[-1] += " [web only]"
    return fields


def _add_choices(entry: OptionField, made: forms.Field, pattern: str) -> None:
    """``made``'s choices in ``entry``'s field (the union, in first-seen order), each noting
    that ``pattern`` takes it."""
    shared = entry.field
    known = [value for value, _ in shared.choices]
    extra_choices = [(v, label) for v, label in made.choices
                     if v not in known]
    if extra_choices:
        shared.choices = [*shared.choices, *extra_choices]
    for value, _ in made.choices:
        entry.choice_patterns.setdefault(value, []).append(pattern)


def options_from(pattern: Pattern, fields: dict[str, OptionField], values: dict[str, Any], *,
                 headless: bool = False) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """The pattern's checked options from the values read for ``fields`` (by field name; empty
    ones take the default), and (field name, message) when the model refuses them."""
    data: dict[str, Any] = {}
    field_of: dict[str, str] = {}
    for name, entry in fields.items():
        if pattern.name not in entry.patterns:
            continue
        field_of[entry.option] = name
        value = values.get(name)
        if value in (None, "", []) and entry.kind != "flag":
            continue
        if entry.kind == "flag" and not value:
            continue
        data[entry.option] = value
    site: dict[str, str] = {}  # option → the setting its value came from
    for option, info in pattern.options.model_fields.items():
        if option not in data and (extra(info).get("setting") or extra(info).get("hidden")):
            value = default_of(pattern, option)
            if value is not None:
                data[option] = list(value) if isinstance(value, (list, tuple)) else value
                if (setting := extra(info).get("setting")) and \
                        getattr(settings, setting, None) is not None:
                    site[option] = setting
    try:
        return pattern.check_options(data, headless=headless), None
    except ValidationError as exc:
        option, message = first_error(exc)
        if option in site:  # nobody typed it: say where it came from (and the way round it)
            hidden = extra(pattern.options.model_fields[option]).get("hidden")
            message = (f"{message}: the site's setting {site[option]} is out of range"
                       + (" and must be changed." if hidden else
                          "; give this option a value instead."))
        return None, (field_of.get(option, ""), message)


def add_flags(parser: argparse.ArgumentParser, fields: dict[str, OptionField]) -> None:
    """One flag per option field, typed by the form field (same limits, same messages)."""
    group = parser.add_argument_group("pattern options (each names the patterns it applies to)")
    for entry in fields.values():
        if all("[web only]" in h for h in entry.helps):
            continue
        helptext = "; ".join(h.replace("%", "%%") for h in entry.helps)
        if entry.kind == "flag":
            group.add_argument(entry.flag, dest=entry.name, action="store_true", help=helptext)
        elif entry.kind == "choices":
            group.add_argument(entry.flag, dest=entry.name, default=None, metavar="A,B",
                               type=_comma_list(entry.field), help=helptext)
        elif entry.kind == "text":
            group.add_argument(entry.flag, dest=entry.name, default=None, help=helptext,
                               type=form_type(entry.field))
        else:
            group.add_argument(entry.flag, dest=entry.name, default=None,
                               type=form_type(entry.field), help=helptext)


def _comma_list(field: forms.MultipleChoiceField):
    def parse(text: str):
        items = [t.strip() for t in text.split(",") if t.strip()]
        known = [c for c, _ in field.choices]
        unknown = [i for i in items if i not in known]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; choose from "
                                             f"{', '.join(known)}.")
        return items

    parse.__name__ = "a comma-separated list"
    return parse
