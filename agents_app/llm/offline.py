"""The built-in offline model: deterministic, schema-valid replies with no provider at all.

It does no reasoning. It reads the sections our prompts are made of ("## Task", "## Current
step", ...) and answers each role in the shape asked for, so every page and gate of the app
can be used without an API key. Its text says plainly that it came from the offline model.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

from . import runtime

_SECTION = re.compile(r"^## (.+?)\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.+)$", re.MULTILINE)
_SEQUENCE_SPLIT = re.compile(
    r"(?:;|\.\s+|,?\s+(?:and\s+)?\b(?:then|after that|afterwards|finally|next)\b\s*,?\s*)",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{3,}")
_STOP = set(
    "this that with from into your what when then than them they their there have will "
    "would should could about after before write make each step steps task plan using "
    "also just only some more most very such which while where finally first second".split()
)
LABEL = "_Offline model: a deterministic stand-in with no language model behind it._"
PLAIN_LABEL = "(Offline model: a deterministic stand-in, no language model.)"


def sections(messages: list[dict[str, str]]) -> dict[str, str]:
    text = "\n".join(m.get("content", "") for m in messages if m.get("role") == "user")
    return {m.group(1).strip(): m.group(2).strip() for m in _SECTION.finditer(text)}


def find_section(secs: dict[str, str], prefix: str) -> str:
    for title, body in secs.items():
        if title.lower().startswith(prefix.lower()):
            return body
    return ""


def clip(text: str, n: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def key_terms(text: str, n: int = 6) -> list[str]:
    seen: list[str] = []
    for word in _WORD.findall(text):
        w = word.lower()
        if w not in _STOP and w not in seen:
            seen.append(w)
    return seen[:n]


def split_task(task: str) -> list[str]:
    """Concrete steps from the task's own structure: its list items or its sequence."""
    items = [m.strip() for m in LIST_ITEM.findall(task)]
    if len(items) >= 2:
        return items
    parts = [p.strip(" .,") for p in _SEQUENCE_SPLIT.split(task) if p and p.strip(" .,")]
    return parts if len(parts) >= 2 else []


def capitalise(s: str) -> str:
    return s[:1].upper() + s[1:]


def direct(messages: list[dict[str, str]]) -> str:
    task = find_section(sections(messages), "Task")
    return (f"### {clip(task, 120)}\n\nKey terms: {', '.join(key_terms(task)) or 'none'}.\n\n"
            f"{LABEL} Set a provider key to get a real answer.")


# Other apps teach the offline model their schemas: schema name -> (messages -> answer dict).
HANDLERS: dict[str, Callable[[list[dict[str, str]]], dict]] = {}


# A schema several roles answer in (an agent's turn) is handled per role: (schema, role).
ROLE_HANDLERS: dict[tuple[str | None, str], Callable[[list[dict[str, str]]], dict | str]] = {}


def register(schema_name: str | None, handler: Callable[[list[dict[str, str]]], dict | str], *,
             role: str | None = None) -> None:
    if role is None:
        HANDLERS[schema_name] = handler
    else:
        ROLE_HANDLERS[(schema_name, role)] = handler


# Teaches every pattern's replies at once (the registry sets it): a pattern's replies are
# registered when its package loads, and a call may ask for a schema another package answers.
teach_all: Callable[[], object] | None = None


def reply(role: str, schema_name: str | None, messages: list[dict[str, str]]) -> str:
    """The offline model's reply text for a call of ``role`` asking for ``schema_name``."""
    for attempt in range(2):
        if (schema_name, role) in ROLE_HANDLERS:
            answer = ROLE_HANDLERS[(schema_name, role)](messages)
            return answer if isinstance(answer, str) else json.dumps(answer)
        if schema_name in HANDLERS:
            return json.dumps(HANDLERS[schema_name](messages))
        if attempt or teach_all is None:
            break
        teach_all()
    return direct(messages)


BRIEF_LABEL = "_Brief offline model: the first paragraph of the offline model's answer._"


def _first_paragraph(text: str) -> str:
    blocks = [b for b in text.split("\n\n") if b.strip()]
    if len(blocks) < 2:
        return text
    heading = blocks[0].lstrip().startswith(("#", "**")) and "\n" not in blocks[0].strip()
    keep = blocks[:2] if heading else blocks[:1]
    return "\n\n".join([*keep, BRIEF_LABEL]) if len(keep) < len(blocks) else text


def _shorten(value):
    if isinstance(value, str):
        return _first_paragraph(value)
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    return value


def brief(text: str) -> str:
    """The "brief" offline model's reply: the same answer, each text of more than one
    paragraph cut to its first (with its heading), in free text and inside a structured
    answer alike; names, lists of steps and every other field as they were."""
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.dumps(_shorten(json.loads(text)))
        except ValueError:
            return text
    return _first_paragraph(text)


def complete(role: str, schema_name: str | None, messages: list[dict[str, str]],
             timeout: float | None = None, model: str = "default") -> tuple[str, int, int]:
    """One call of the offline model (``model``: "default" or "brief"): its reply and
    (prompt, completion) token estimates, after the configured fixed latency
    (``runtime.offline_latency``, cut at ``timeout``)."""
    latency = runtime.offline_latency
    if latency:
        time.sleep(min(latency, float(timeout or latency)))
    text = reply(role, schema_name, messages)
    if model.removeprefix(runtime.OFFLINE_PROVIDER + "/") == "brief":
        text = brief(text)
    return text, sum(len(m.get("content", "")) for m in messages) // 4, len(text) // 4
