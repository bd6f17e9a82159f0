"""A pattern's options as one pydantic model: the single place their types, defaults, limits,
labels and help live. The start form, ``manage.py run_pattern`` and the run itself all read
them from here (the form and the command through ``agents_app.option_fields``).

Use :func:`option` for each field::

    class Options(PatternOptions):
        max_rounds: int = option(2, label="Rounds", ge=1, le=5, help="How many rounds.")

Extra keys an option may carry (all optional):

- ``placeholder``: what the empty form field shows (default: the default value);
- ``setting``: the name of a Django setting that, when set, replaces the default (a site-wide
  override such as ``QUORUM_MAX_STEPS``);
- ``hidden``: never a form field or flag; always the setting's value (e.g. repository roots);
- ``widget``: ``"textarea"`` for multi-line text;
- ``choice_labels``: {value: label} for a choice or multiple choice;
- ``web_only``: offered by the form but not the command line.

Validators may read ``info.context["headless"]``: true when a run starts from the command
line, where no person is at hand to answer a question.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUseDefault


class PatternOptions(BaseModel):
    """Base of every pattern's options: unknown keys are ignored, values validated on
    assignment too."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)


class NoOptions(PatternOptions):
    """For a pattern with nothing to set."""


def option(default: Any, *, label: str, help: str = "", ge: float | None = None,  # noqa: A002
           le: float | None = None, max_length: int | None = None, **extra: Any) -> Any:
    """A pattern option (see the module docstring for ``extra``)."""
    return Field(default, title=label, description=help, ge=ge, le=le, max_length=max_length,
                 json_schema_extra=extra or None)


def named_lines(parse: Callable[[str], list[dict[str, str]]]) -> Callable[[Any], Any]:
    """A before-validator for a list typed as lines of ``name: text`` (debate positions, team
    members): text is parsed with ``parse`` (its ValueError is the message), blank text means
    the default, and a list (already parsed) is kept."""

    def before(value: Any) -> Any:
        if isinstance(value, str):
            return parse(value) if value.strip() else PydanticUseDefault()
        return value

    return before


def extra(info: FieldInfo) -> dict[str, Any]:
    """The extra keys of a field (``option(..., **extra)``)."""
    value = info.json_schema_extra
    return dict(value) if isinstance(value, dict) else {}


def first_error(exc: ValidationError) -> tuple[str, str]:
    """(field name or "", message) of a validation error, in words for a person: pydantic's
    "Value error, " prefix is dropped."""
    err = exc.errors()[0]
    name = str(err["loc"][0]) if err.get("loc") else ""
    message = str(err.get("msg", ""))
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return name, message
