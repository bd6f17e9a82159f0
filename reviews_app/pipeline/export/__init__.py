"""Export a finished code review as Markdown, JSON or SARIF 2.1.0.

Everything here is pure Python and works on the plain ``review`` dict the Django side builds
and touches neither Django nor the database.

Trust: titles, descriptions, suggestions, the summary, file names and reviewer errors come from
a model or from the reviewed diff, so they are treated as hostile. The Markdown export escapes
only the characters that could open HTML tags or create Markdown structure (links, headings,
lists, tables, emphasis, code blocks), so text reads as written; file names and rule ids are
inline code spans fenced by their content; multi-line suggestions go into fenced blocks whose
fence is longer than any backtick run they contain, at the top level of the document so that
no container can be closed early. The SARIF export percent-encodes file names into relative
URI references, treating ``\\`` like ``/`` and dropping ``.``/``..`` segments, so that a path
can never climb out of the checkout (not even for a consumer on Windows), and replaces
characters that hide or reorder text in messages.

Modules: ``common`` (selection, order, counts, shared fields, text hygiene), ``json_export``
(the documented JSON structure), ``sarif`` and ``sarif_rules``, ``markdown`` and
``markdown_text`` (escaping).
"""

from __future__ import annotations

import json

from .common import select_findings
from .json_export import JSON_SCHEMA_VERSION, to_json
from .markdown import to_markdown
from .sarif import to_sarif

__all__ = [
    "EXPORT_FORMATS",
    "JSON_SCHEMA_VERSION",
    "render",
    "select_findings",
    "to_json",
    "to_markdown",
    "to_sarif",
]

EXPORT_FORMATS = {
    "markdown": ("text/markdown", "md"),
    "json": ("application/json", "json"),
    "sarif": ("application/sarif+json", "sarif"),
}


def render(review: dict, fmt: str, *, only_accepted: bool = False) -> str:
    """The review as text in one of ``EXPORT_FORMATS``; ValueError for any other format."""
    if fmt == "markdown":
        return to_markdown(review, only_accepted=only_accepted)
    if fmt == "json":
        return to_json(review, only_accepted=only_accepted)
    if fmt == "sarif":
        return json.dumps(to_sarif(review, only_accepted=only_accepted), indent=2)
    raise ValueError(f"unknown export format: {fmt!r}")
