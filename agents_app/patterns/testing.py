"""Scripted model clients for tests and benchmarks (no network, no LiteLLM).

``QueueModel``: replies are queued with ``enqueue`` and handed out in order; every call is
kept in ``history``. ``FunctionModel``: a function ``(messages, info) -> reply`` answers,
so a test can script multi-turn behaviour. A reply may be a string, a dict (sent as JSON),
a pydantic object, or an exception instance to raise.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .base import ModelError, Reply
from .structured import ParseError, parse_structured


@dataclass
class CallInfo:
    role: str
    key: str | None
    schema: type[BaseModel] | None
    messages: list[dict[str, str]] = field(default_factory=list)

    @property
    def prompt(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


def _to_reply(raw: Any, schema: type[BaseModel] | None) -> Reply[Any]:
    if isinstance(raw, BaseException):
        raise raw
    if isinstance(raw, BaseModel):
        text = raw.model_dump_json()
    elif isinstance(raw, dict | list):
        text = json.dumps(raw)
    else:
        text = str(raw)
    if schema is None:
        return Reply(text=text, data=None)
    try:
        return Reply(text=text, data=parse_structured(text, schema))
    except ParseError as exc:
        raise ModelError(f"scripted reply does not fit {schema.__name__}: {exc}") from exc


class _Recording:
    def __init__(self) -> None:
        self.history: list[CallInfo] = []
        self._lock = threading.Lock()

    def _record(self, role: str, messages: list[dict[str, str]],
                schema: type[BaseModel] | None, key: str | None) -> CallInfo:
        info = CallInfo(role=role, key=key, schema=schema, messages=list(messages))
        with self._lock:
            self.history.append(info)
        return info

    def roles(self) -> list[str]:
        return [c.role for c in self.history]


class QueueModel(_Recording):
    def __init__(self, *replies: Any) -> None:
        super().__init__()
        self._queue: deque[Any] = deque(replies)

    def enqueue(self, *replies: Any) -> QueueModel:
        self._queue.extend(replies)
        return self

    def complete(self, role: str, messages: list[dict[str, str]], *,
                 schema: type[BaseModel] | None = None, key: str | None = None) -> Reply[Any]:
        self._record(role, messages, schema, key)
        if not self._queue:
            raise AssertionError(f"QueueModel ran out of replies at a {role} call")
        return _to_reply(self._queue.popleft(), schema)


class FunctionModel(_Recording):
    def __init__(self, fn: Callable[[list[dict[str, str]], CallInfo], Any]) -> None:
        super().__init__()
        self.fn = fn

    def complete(self, role: str, messages: list[dict[str, str]], *,
                 schema: type[BaseModel] | None = None, key: str | None = None) -> Reply[Any]:
        info = self._record(role, messages, schema, key)
        return _to_reply(self.fn(messages, info), schema)
