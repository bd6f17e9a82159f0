"""JSON from untrusted text (model output, tool arguments a person edited, WebSocket
messages) with a nesting limit.

``json.loads`` recurses once per level and raises RecursionError (not a ValueError) at
about a thousand, which would escape every ``except ValueError`` around it as a 500 or a
crashed stage. Nothing Quorum reads legitimately nests deeper than a few levels, so the
depth is checked before parsing, and the answer is an ordinary ``ValueError`` saying why."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64

# Strings first (their brackets do not count), then every bracket that remains.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class TooDeep(ValueError):
    """The JSON nests deeper than allowed."""


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting of ``text`` outside JSON strings."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def check_depth(text: str | bytes, max_depth: int = MAX_DEPTH) -> None:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if nesting_depth(text) > max_depth:
        raise TooDeep(f"JSON nested more than {max_depth} levels deep")


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that refuses nesting beyond ``max_depth`` with a ValueError."""
    check_depth(text, max_depth)
    return json.loads(text)
