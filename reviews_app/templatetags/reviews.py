from __future__ import annotations

from django import template

from ..services import daily_usage

register = template.Library()


@register.inclusion_tag("reviews_app/_usage.html")
def review_usage():
    """Today's reviews against the daily limit, and their spend (for the dashboard)."""
    return {"usage": daily_usage()}
