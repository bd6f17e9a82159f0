"""A request with the wrong method, or a form past Django's limits, gets a page that says so,
never an empty answer or Django's bare error page."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.views.defaults import page_not_found

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


class FormOverLimits:
    """A form past Django's limits (``DATA_UPLOAD_MAX_NUMBER_FIELDS`` fields or
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes: a plan edited to thousands of steps, a pasted
    megabyte) answers 413 with a sentence saying so, before any view runs (nothing is saved),
    instead of Django's bare 400 page, or its debug page swapped into a panel. A form sent with
    htmx gets the sentence as plain text, which the page shows beside the form
    (``static/quorum/app.js``); 413 is never swapped in, so the panel keeps what it had."""

    FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method == "POST" and request.content_type in self.FORM_TYPES:
            try:
                request.POST  # noqa: B018  (parsed once, as the CSRF check would next)
            except (TooManyFieldsSent, RequestDataTooBig) as exc:
                return self.refuse(request, exc)
        return self.get_response(request)

    @staticmethod
    def refuse(request, exc: Exception) -> HttpResponse:
        if isinstance(exc, TooManyFieldsSent):
            text = (f"This form sent more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} "
                    "fields, more than Quorum accepts at once; nothing was saved. Send less "
                    "(fewer plan steps, say) and try again.")
        else:
            text = (f"This form sent more than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes, "
                    "more than Quorum accepts at once; nothing was saved. Send less and try "
                    "again.")
        if request.headers.get("HX-Request"):
            return HttpResponse(text, status=413, content_type="text/plain; charset=utf-8")
        return render(request, "413.html", {"text": text, "back": page_above(request.path)},
                      status=413)


class NotFoundPage:
    """Under DEBUG (``make dev`` sets it), a missing page is the app's own 404 page, the one
    production serves (``templates/404.html``), not Django's technical 404, which lists every
    URL pattern and says "you have DEBUG = True" to a person who mistyped an address.

    Why a middleware: Django calls ``handler404`` only when DEBUG is off; with DEBUG on it
    always renders its technical page, and no setting of Django's changes that. A middleware
    sees both ways a page is missing: a view's Http404 (``process_exception``) and an address
    no URL pattern matched (a 404 answer with no ``resolver_match``: the resolver raised
    before any view). It answers both with Django's own ``page_not_found``, as production
    does, and leaves a view's own 404 answer alone (a webhook's, say). DEBUG keeps its other
    help (tracebacks of errors, static files from the source tree, the network guard).
    Placed after CommonMiddleware, whose missing-slash redirect still sees the 404.
    ``QUORUM_DEBUG_404=true`` brings Django's technical page back (to look at the URL
    patterns)."""

    def __init__(self, get_response):
        self.get_response = get_response

    @staticmethod
    def active() -> bool:
        return settings.DEBUG and not settings.QUORUM_DEBUG_404

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code == 404 and request.resolver_match is None and self.active():
            return page_not_found(request, Resolver404({"path": request.path_info}))
        return response

    def process_exception(self, request, exception):
        if isinstance(exception, Http404) and self.active():
            return page_not_found(request, exception)
        return None
