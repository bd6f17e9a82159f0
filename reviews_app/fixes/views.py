"""The review page's "Apply accepted fixes" action (issue 16): owner only (another user gets
404, an anonymous visitor the login page), POST with CSRF, idempotent (see ``apply``)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from ..views import PAGE, owned_review, review_context
from .apply import FixesError, start


@login_required
@require_POST
def apply_fixes(request, pk: int):
    review = owned_review(request, pk)
    try:
        run = start(request.user, review)
    except FixesError as exc:
        return render(request, PAGE, review_context(review, fixes_error=str(exc)), status=400)
    if request.htmx:
        return HttpResponseClientRedirect(run.get_absolute_url())
    return redirect(run)
