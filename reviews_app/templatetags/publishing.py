from __future__ import annotations

from django import template

register = template.Library()


@register.simple_tag
def publication_state(review) -> dict:
    """What the publication panel shows for ``review`` (see prflow/publishing/views.py)."""
    from ..prflow.publishing.views import state

    return state(review)
