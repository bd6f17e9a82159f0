"""What a person types at a gate (plan steps, feedback, answers, tool arguments) is checked
here before a pattern acts on it, whoever calls: the web forms, the command line, a test.

Control characters are refused: NUL cannot be stored by PostgreSQL at all, and the others
(escape sequences, bidirectional overrides) make the text that runs differ from the text
the person saw. Tab and newline are ordinary text and stay."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from .base import InvalidDecision

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
MAX_JSON_DEPTH = 32  # tool arguments are flat objects; far deeper is an attack or a mistake


def control_characters(text: str) -> list[str]:
    """The control characters in ``text``, each once, named for a person: "U+0000 (NUL)"."""
    found = dict.fromkeys(_CONTROL.findall(text or ""))
    return [f"U+{ord(c):04X}" + (f" ({_name(c)})" if _name(c) else "") for c in found]


def _name(c: str) -> str:
    names = {"\x00": "NUL", "\x1b": "ESC", "\x7f": "DEL"}
    return names.get(c, "") or unicodedata.name(c, "")


def without_control_characters(text: str) -> str:
    return _CONTROL.sub("", (text or "").replace("\r\n", "\n").replace("\r", "\n"))


def control_message(what: str, text: str, *, removed: bool = False) -> str:
    """The sentence that tells a person why ``text`` was refused, or "" when it is clean.
    ``removed``: the page shows the text again without them."""
    found = control_characters(text)
    if not found:
        return ""
    return (f"{what} contains invisible control characters ({', '.join(found[:3])}) that "
            "cannot be kept; " + ("they have been removed: check the text and send it again."
                                  if removed else "remove them."))


def check_text(what: str, text: str) -> str:
    """``text`` unchanged; InvalidDecision when it holds control characters."""
    if message := control_message(what, text):
        raise InvalidDecision(message)
    return text


def check_field(what: str, text: str, *, max_chars: int, required: bool = True) -> str:
    """A text a person typed (a fork's edit of a draft, a subtask, a label), stripped:
    InvalidDecision when it is empty (and ``required``), longer than ``max_chars`` or holds
    control characters, naming ``what``."""
    if not isinstance(text, str):
        raise InvalidDecision(f"{what} must be text.")
    text = text.strip()
    if required and not text:
        raise InvalidDecision(f"{what} is empty.")
    if len(text) > max_chars:
        raise InvalidDecision(f"{what} is {len(text):,} characters; the limit is "
                              f"{max_chars:,}.")
    return check_text(what, text)


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (counted without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def texts(value: Any) -> Iterator[str]:
    """Every text in a JSON value, keys included (walked without recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            yield item


def controls_in(value: Any) -> list[str]:
    """The control characters of the first text of ``value`` that has any (named), or []."""
    for text in texts(value):
        if found := control_characters(text):
            return found
    return []


def check_arguments(args: Any) -> Any:
    """Tool arguments a person wrote: not nested absurdly deep, no control characters in any
    key or text (NUL in JSON cannot be stored by PostgreSQL)."""
    if json_depth(args) > MAX_JSON_DEPTH:
        raise InvalidDecision(f"The arguments are nested more than {MAX_JSON_DEPTH} levels "
                              "deep.")
    if found := controls_in(args):
        raise InvalidDecision(f"The arguments contain invisible control characters "
                              f"({', '.join(found[:3])}); remove them.")
    return args
