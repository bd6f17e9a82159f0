from __future__ import annotations

from django import template

from ..services import REASON_TEXT, daily_usage

register = template.Library()


@register.inclusion_tag("reviews_app/_usage.html")
def review_usage():
    """Today's reviews against the daily limit, and their spend (for the dashboard)."""
    return {"usage": daily_usage()}


@register.filter
def coverage_reason(code: str) -> str:
    """A coverage entry's reason in words (``not_examined`` → "not examined by any analyzer or
    model"); a code without words is shown as it is."""
    return REASON_TEXT.get(code, code)
