"""Untrusted text as inert Markdown: inline text, code spans, paragraphs and fenced blocks."""

from __future__ import annotations

import re

from .common import is_hidden

# Untrusted text is escaped only where a character could make structure, so that the report
# reads as written both raw and rendered (a path like src/my_file.py stays as it is):
# - anywhere: "\\" (before punctuation or at the end), unpaired backticks, "*", "[", "]", "~"
#   (GFM strikethrough), "|" (GFM tables), "$" (GitHub math), "<" (HTML, autolinks), "&" when it
#   would start a character reference, "_" unless inside a word, "#" after a space (headings'
#   closing sequence);
# - at the start of a line or list item: what would open a block (">", "-", "+", "=", "1.").
# Pairs of backtick runs become code spans of their own, so a tool's "`os` imported but
# unused" shows `os` as code; the span is re-fenced by its content and cannot reach past it.
# Bare http(s) addresses stay text; renderers that auto-link them (GitHub) link them as shown.
_ALWAYS = frozenset("`*[]~|$")
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_BLOCK_START = re.compile(r"[>\-+=]|\d{1,9}[.)]")
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_BACKTICKS = re.compile(r"`+")


def _one_line(value) -> str:
    text = " ".join(str(value if value is not None else "").split())
    return "".join("\ufffd" if is_hidden(c) else c for c in text)


def _escape_text(text: str, *, at_start: bool) -> str:
    out = []
    for i, char in enumerate(text):
        before = text[i - 1] if i else ""
        after = text[i + 1] if i + 1 < len(text) else ""
        if char in _ALWAYS:
            out.append("\\" + char)
        elif char == "\\":
            out.append("\\\\" if not after or after in _ASCII_PUNCT else char)
        elif char == "_":
            out.append(char if before.isalnum() and after.isalnum() else "\\_")
        elif char == "<":
            out.append("&lt;")
        elif char == "&":
            out.append("&amp;" if _ENTITY.match(text, i) else char)
        elif char == "#" and (not before or before.isspace()):
            out.append("\\#")
        else:
            out.append(char)
    escaped = "".join(out)
    if at_start and (m := _BLOCK_START.match(escaped)):
        escaped = escaped[: m.end() - 1] + "\\" + escaped[m.end() - 1:]
    return escaped


def md_code(value, *, at_start: bool = False) -> str:
    """Untrusted text as an inline code span (one line). Text with a run of two or more
    backticks is escaped text instead: its fence would be three backticks, which opens a code
    block at the start of a line. ``at_start``: the text begins a line or list item."""
    text = _one_line(value)
    if not text:
        return ""
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)
    if longest >= 2:
        return _escape_text(text, at_start=at_start)
    fence = "`" * (longest + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_inline(value, *, at_start: bool = False) -> str:
    """Untrusted text as one line of inert Markdown: line breaks become spaces, characters
    that could make HTML or Markdown structure are escaped, paired backticks are code.
    ``at_start``: the text begins a line or list item, where more characters open blocks."""
    text = _one_line(value)
    out, pos = [], 0
    runs = list(_BACKTICKS.finditer(text))
    i = 0
    while i < len(runs):
        opening = runs[i]
        closing = next((j for j in range(i + 1, len(runs))
                        if len(runs[j].group()) == len(opening.group())), None)
        if closing is None or not text[opening.end():runs[closing].start()].strip():
            i += 1
            continue
        out.append(_escape_text(text[pos:opening.start()], at_start=at_start and pos == 0))
        out.append(md_code(text[opening.end():runs[closing].start()]))
        pos, i = runs[closing].end(), closing + 1
    out.append(_escape_text(text[pos:], at_start=at_start and pos == 0))
    return "".join(out)


def _md_lines(text: str) -> list[str]:
    return str(text or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")


def md_block(value) -> str:
    """Untrusted multi-line text as inert Markdown paragraphs; line breaks are kept as hard
    breaks, blank lines separate paragraphs."""
    paragraphs, current = [], []
    for line in _md_lines(value):
        escaped = md_inline(line, at_start=True)
        if escaped:
            current.append(escaped)
        elif current:
            paragraphs.append("\\\n".join(current))
            current = []
    if current:
        paragraphs.append("\\\n".join(current))
    return "\n\n".join(paragraphs)


def md_fence(value) -> str:
    """Untrusted text as a fenced code block that it cannot close (top level only)."""
    lines = _md_lines(value)
    while lines and not lines[-1].strip():
        lines.pop()
    body = "\n".join(lines)
    longest = run = 0
    for char in body:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"
