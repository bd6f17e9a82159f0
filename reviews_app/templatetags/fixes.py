"""The proven-fix card's diff (issue 16): a fix's unified diff as rows the template escapes
(model output: never marked safe)."""

from __future__ import annotations

from django import template

register = template.Library()
MAX_ROWS = 400


@register.filter
def fix_diff_rows(diff: object) -> list[dict]:
    """``[{"kind": "add" | "del" | "ctx" | "hunk" | "file", "sign", "text"}]`` for a unified
    diff's lines (at most MAX_ROWS; the last row says how many more there were)."""
    rows: list[dict] = []
    lines = str(diff or "").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for ln in lines[:MAX_ROWS]:
        if ln.startswith(("--- ", "+++ ")):
            rows.append({"kind": "file", "sign": "", "text": ln})
        elif ln.startswith("@@"):
            rows.append({"kind": "hunk", "sign": "", "text": ln})
        elif ln.startswith("+"):
            rows.append({"kind": "add", "sign": "+", "text": ln[1:]})
        elif ln.startswith("-"):
            rows.append({"kind": "del", "sign": "-", "text": ln[1:]})
        elif ln.startswith("\\"):
            rows.append({"kind": "hunk", "sign": "", "text": ln})
        else:
            rows.append({"kind": "ctx", "sign": "", "text": ln[1:]})
    if len(lines) > MAX_ROWS:
        rows.append({"kind": "hunk", "sign": "", "text": f"… {len(lines) - MAX_ROWS} more lines"})
    return rows


@register.simple_tag
def fixes_offer(review) -> dict:
    """What the review page offers for its accepted fixes (see ``fixes/apply.py``: ``offer``)."""
    from ..fixes.apply import offer

    return offer(review)
