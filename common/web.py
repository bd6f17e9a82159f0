"""Small helpers shared by the views of both apps."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, resolve_url
from django_htmx.http import HttpResponseClientRedirect


def go(request: HttpRequest, to: Any) -> HttpResponse:
    """After a successful POST: a redirect to ``to`` (a URL, a URL name or an object with
    ``get_absolute_url``); for htmx, the client-side redirect htmx follows."""
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(resolve_url(to))
    return redirect(to)
