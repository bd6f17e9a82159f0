"""Commit subjects and messages, the person's comments, and clipping long text."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from ..base import (
    InvalidDecision,
)
from .offline import LABEL as OFFLINE_LABEL
from .schemas import (
    MAX_COMMIT_MESSAGE,
)


def subject(text: str) -> str:
    """A commit subject: the first line, whole (a cut subject loses what the change does),
    without the offline model's label (the page and the body say which model wrote it)."""
    line = (text or "").split("\n", 1)[0].replace(OFFLINE_LABEL, "")
    return " ".join(line.split()) or "Quorum change"


_TRAILER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*: \S")


def with_trailer(message: str, key: str, value: str) -> str:
    """``message`` ending in the trailer ``key: value``: added to its last paragraph when that
    is a block of trailers already (``Co-authored-by: …``), else as a paragraph of its own;
    never twice."""
    message = message.rstrip()
    line = f"{key}: {value}"
    if line in message.split("\n"):
        return message
    paragraphs = message.split("\n\n")
    if len(paragraphs) > 1 and all(_TRAILER.match(x) for x in paragraphs[-1].split("\n")):
        return f"{message}\n{line}"
    return f"{message}\n\n{line}"


def clean_identity(value: object) -> str:
    """A person as a commit names them (``Name <email>`` or a name), or "" if unusable."""
    if not isinstance(value, str):
        return ""
    value = " ".join(value.split())
    if not value or len(value) > 200 or any(unicodedata.category(ch) == "Cc" for ch in value):
        return ""
    return value


def person_comments(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in comments or [] if c.get("by")]


def proposed_merge_message(state: dict[str, Any]) -> str:
    """The commit message offered to the person at the merge gate: the plan's goal as the
    subject, the last round's summary, and where it came from."""
    plan = state.get("plan") or {}
    report = (state.get("last_round") or {}).get("report") or {}
    parts = [subject(plan.get("goal", ""))]
    if (report.get("summary") or "").strip():
        parts.append(report["summary"].strip()[:2000])
    parts.append(f"Approved in Quorum after {state.get('round', 0)} round(s) of execution and "
                 f"review (branch {(state.get('options') or {}).get('branch', '')}).")
    return "\n\n".join(parts)


def clean_commit_message(text: object) -> str:
    """The person's commit message, or InvalidDecision saying plainly what is wrong."""
    if not isinstance(text, str):
        raise InvalidDecision("The commit message could not be read; reload the page.")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if any(unicodedata.category(ch) == "Cc" and ch not in "\n\t" for ch in text):
        raise InvalidDecision("The commit message contains control characters (such as NUL "
                              "bytes); remove them and merge again. Nothing was merged.")
    text = "\n".join(line.rstrip() for line in text.strip().split("\n"))
    if not text:
        raise InvalidDecision("Write a commit message: it cannot be empty. Nothing was merged.")
    if len(text) > MAX_COMMIT_MESSAGE:
        raise InvalidDecision(f"The commit message is {len(text):,} characters; the limit is "
                              f"{MAX_COMMIT_MESSAGE:,}. Nothing was merged.")
    return text


def clip(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n[... {len(text) - limit:,} more characters not shown ...]\n", True


