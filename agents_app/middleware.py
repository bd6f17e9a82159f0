"""A request with the wrong method gets a page that says so, never an empty answer."""

from __future__ import annotations

from django.shortcuts import render
from django.urls import Resolver404, resolve

METHOD_WORDS = {"GET": "opening it as a page", "POST": "sending a form to it"}


def page_above(path: str) -> str:
    """The nearest address above ``path`` that is a page of the site (``/runs/7/cancel/`` →
    ``/runs/7/``), for the link back."""
    parts = [p for p in path.split("/") if p]
    while parts:
        parts.pop()
        candidate = "/" + "/".join(parts) + ("/" if parts else "")
        try:
            resolve(candidate)
        except Resolver404:
            continue
        return candidate
    return "/"


class MethodNotAllowedPage:
    """Django's ``require_POST`` and friends answer 405 with an empty body: a blank page for a
    person who followed a link or reloaded after a form. Give that 405 a body that says what
    the address is for and links to the page it belongs to (the Allow header is kept)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code != 405 or response.content:
            return response
        allowed = [m.strip() for m in response.get("Allow", "").split(",") if m.strip()]
        page = render(request, "405.html", {
            "method": request.method, "allowed": allowed,
            "allowed_words": [METHOD_WORDS.get(m, m) for m in allowed],
            "back": page_above(request.path)}, status=405)
        page["Allow"] = response.get("Allow", "")
        return page
