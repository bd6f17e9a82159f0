"""Model output is untrusted: Markdown is rendered with raw HTML disabled, then the HTML
is cleaned by nh3 against a small allowlist (no scripts, no event handlers, no
``javascript:`` links)."""

from __future__ import annotations

import difflib

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_TAGS = {
    "p", "br", "hr", "strong", "em", "code", "pre", "blockquote", "ul", "ol", "li", "a",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "del",
}
_ATTRS = {"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"}}


def render_markdown(text: str) -> str:
    html = _md.render(text or "")
    return nh3.clean(html, tags=_TAGS, attributes=_ATTRS, url_schemes={"http", "https", "mailto"},
                     link_rel="noopener noreferrer nofollow")


def step_diff(old: list[str], new: list[str]) -> list[tuple[str, str]]:
    """What changed between two plan versions, step by step: (op, text) with op one of
    "same", "added", "removed"."""
    out: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out += [("same", s) for s in old[i1:i2]]
        else:
            out += [("removed", s) for s in old[i1:i2]]
            out += [("added", s) for s in new[j1:j2]]
    return out
