"""The trace of a run as people read it: stage names in words, and each model call's prompt and
reply with secrets blanked and JSON indented."""

from __future__ import annotations

import json
import re

from .llm.gateway import redact
from .patterns import PATTERNS
from .patterns.base import fill_stage


def stage_label(pattern: str, stage: str) -> str:
    """``stage`` of a run of ``pattern`` in words (its ``stage_labels``): ``step:2:0`` → "Step 1
    of plan v2"; a kind without words is shown as it is."""
    kind, *args = [part for part in (stage or "").split(":")]
    spec = PATTERNS.get(pattern)
    label = fill_stage(spec.stage_labels.get(kind) if spec else None, stage or "")
    if label is None:
        words = kind.replace("_", " ").capitalize() or "Stage"
        return " ".join([words, *[a for a in args if a]])
    return label


def readable(text: str) -> tuple[str, bool]:
    """``text`` for a person: JSON indented (a fenced JSON block too), then secrets blanked.
    Returns the text and whether it was JSON. The template escapes it."""
    body = (text or "").strip()
    fenced = re.fullmatch(r"```(?:json)?\s*\n(.*)\n```", body, re.S)
    try:
        value = json.loads(fenced.group(1) if fenced else body)
    except ValueError:
        return redact(text or ""), False
    if not isinstance(value, (dict, list)):
        return redact(text or ""), False
    return redact(json.dumps(value, indent=2, ensure_ascii=False)), True


# A message longer than this is folded (<details>) so the page stays readable.
FOLD_CHARS = 1500


def call_io(call) -> dict:
    """What the trace shows of one ``ModelCall``: its messages and its reply."""
    messages = []
    for m in call.messages or []:
        content = m.get("content")
        text, is_json = readable(content if isinstance(content, str)
                                 else json.dumps(content, ensure_ascii=False, default=str))
        messages.append({"role": str(m.get("role") or "message"), "text": text,
                         "json": is_json, "fold": len(text) > FOLD_CHARS})
    reply, reply_json = readable(call.response)
    return {"prompt": messages, "reply": reply, "reply_json": reply_json,
            "reply_fold": len(reply) > FOLD_CHARS * 4, "error": redact(call.error)}
