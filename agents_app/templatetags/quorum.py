from __future__ import annotations

import re

from django import template
from django.utils.safestring import mark_safe

from ..rendering import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> str:
    return mark_safe(render_markdown(text))  # noqa: S308 - nh3 has sanitised it


@register.inclusion_tag("agents_app/_role_usage.html")
def role_usage(run) -> dict:
    """Cost and tokens per role of ``run``, for the header of its page."""
    from ..run_usage import usage_by_role

    return {"run": run, "roles": usage_by_role(run)}


@register.filter(is_safe=True)
def clip(value, length: int):
    """``truncatechars``, without its work for a text already short enough (the inbox's 200
    cards clip three texts each): the same text either way."""
    import unicodedata

    from django.template.defaultfilters import truncatechars

    if isinstance(value, str) and len(value) <= int(length) and unicodedata.is_normalized(
            "NFC", value):
        return value
    return truncatechars(value, length)


@register.filter
def usd(value) -> str:
    try:
        v = float(value or 0)
    except (TypeError, ValueError):
        return "—"
    return f"${v:.4f}" if v < 1 else f"${v:,.2f}"


@register.filter
def seconds(value) -> str:
    if value is None:
        return "—"
    v = float(value)
    if v < 60:
        return f"{v:.1f} s"
    minutes, secs = divmod(int(v), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@register.filter
def thousands(value) -> str:
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "—"


@register.filter
def status_class(status: str) -> str:
    if status in ("completed",):
        return "ok"
    if status in ("failed", "budget_exceeded"):
        return "bad"
    if status == "cancelled":
        return "muted"
    if status.startswith("awaiting_"):
        return "wait"
    return "busy"


@register.filter
def get_item(mapping, key):
    """``mapping|get_item:key`` for dict lookups with a variable key."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def tojson_text(value) -> str:
    """A value as compact JSON text, for display (autoescaped by the template)."""
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 600 else text[:600] + "…"


_CITE = re.compile(r"\[(E\d{1,3})\]")


@register.filter
def markdown_cited(text: str) -> str:
    """Markdown rendered safely, with evidence citations like [E1] linked to their rows. The
    replacement only ever inserts a fixed tag around a matched id of digits."""
    html = render_markdown(text or "")
    return mark_safe(_CITE.sub(r'<a class="cite" href="#evidence-\1">[\1]</a>', html))  # noqa: S308


@register.filter
def stage_label(stage: str, pattern: str) -> str:
    """``{{ call.stage|stage_label:run.pattern }}``: a stage key in words."""
    from ..trace import stage_label as label

    return label(pattern, stage)


@register.filter
def pattern_label(name: str) -> str:
    """``{{ run.pattern|pattern_label }}``: a pattern's name in words, never its key."""
    from ..patterns import pattern_label as label

    return label(name)
