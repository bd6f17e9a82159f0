"""Reading a model's text as a pydantic object: strict first, then json-repair."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

from .safe_json import TooDeep, check_depth

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class ParseError(ValueError):
    """The text is not a valid instance of the schema; the message says why, for the model."""


def parse_structured(text: str, schema: type[T]) -> T:
    """Parse ``text`` into ``schema``; repair near-JSON (fences, trailing commas, quotes)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        check_depth(body)
    except TooDeep as exc:
        raise ParseError(str(exc)) from None
    try:
        return schema.model_validate_json(body)
    except ValidationError as strict_error:
        first_error = strict_error
    try:
        repaired = json_repair.loads(body)
    except Exception as exc:  # json-repair raises assorted errors on hopeless input
        raise ParseError(f"not JSON: {exc}") from exc
    if not isinstance(repaired, dict | list) or (not repaired and body[:1] not in "[{"):
        raise ParseError(f"not JSON: {_summarise(first_error)}")
    # A bare list where an object with one list field was asked for is a common slip.
    if isinstance(repaired, list):
        list_fields = [n for n, f in schema.model_fields.items() if _is_list(f.annotation)]
        if len(list_fields) == 1:
            repaired = {list_fields[0]: repaired}
    try:
        return schema.model_validate(repaired)
    except ValidationError as exc:
        raise ParseError(_summarise(exc)) from exc


def _is_list(annotation: Any) -> bool:
    return getattr(annotation, "__origin__", None) is list


def _summarise(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"]) or "(root)"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


@functools.lru_cache(maxsize=256)
def schema_instructions(schema: type[BaseModel]) -> str:
    """The text appended for models that cannot take a JSON schema as a response format
    (made once per schema: pydantic builds a schema anew, in about a millisecond, each time)."""
    return (
        "Reply with a single JSON object and nothing else (no prose, no code fences). "
        "It must validate against this JSON Schema:\n"
        + json.dumps(schema.model_json_schema(), indent=None)
    )


@functools.lru_cache(maxsize=256)
def _schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema())


def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """``schema.model_json_schema()``, made once per schema; a fresh copy each time (the
    caller's to change)."""
    copy: dict[str, Any] = json.loads(_schema_text(schema))
    return copy
