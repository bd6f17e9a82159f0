"""The "Publish now" / "Publish again" button, and what the review page's publication panel
shows. Only the owner publishes (anyone else gets a 404, anonymous visitors the sign-in
page); htmx gets the panel back, a plain form is redirected to the page."""

from __future__ import annotations

import re

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from ...models import Review
from . import dispatch, policy

PANEL = "reviews_app/_publication.html#publication-panel"
_WEB = re.compile(r"https?://[^\s\"'<>]+")


def review_status(review: Review):
    """The commit status this review reports on its pull request's head, if any."""
    from ...models import CommitStatus

    return CommitStatus.objects.filter(review=review).order_by("-id").first()


def state(review: Review) -> dict:
    """The publication panel's context for ``review`` (empty for a review of no pull
    request)."""
    if review.pull_request_id is None:
        return {}
    review = (Review.objects.select_related("pull_request__connection", "run")
              .get(pk=review.pk))
    pubs = list(review.publications.order_by("-id")[:5])
    latest = pubs[0] if pubs else None
    current = [p for p in pubs if p.triage_version == review.triage_version
               and p.trigger in policy.TRIAGED]
    pr = review.pull_request
    chosen, source = policy.policy_of(review)
    return {
        "policy": chosen, "policy_text": policy.describe(review), "policy_source": source,
        "latest": latest, "earlier": pubs[1:], "why_not": policy.can_publish_now(review),
        "show_button": policy.can_press_publish(review),
        "button": "Publish again" if current else "Publish now",
        "closed": policy.closed_text(review),
        "can_closed": policy.can_publish_now(review, to_closed=True) is None,
        "status": review_status(review),
        "pr": pr, "pr_url": pr.url if _WEB.fullmatch(pr.url or "") else "",
    }


@login_required
@require_POST
def publish_now(request, pk: int):
    from ...views import PAGE, owned_review, review_context

    review = owned_review(request, pk)
    if review.pull_request_id is None:
        raise Http404("This review is not of a pull request.")
    notice, error, status = "", "", 200
    try:
        _, notice = dispatch.publish_now(review, request.user,
                                         to_closed=request.POST.get("to_closed") == "1")
    except dispatch.Refused as exc:
        error, status = str(exc), exc.status
    review.refresh_from_db()
    if not request.htmx:
        if status >= 400:
            return render(request, PAGE, review_context(review, pub_error=error),
                          status=status)
        return redirect(f"{review.get_absolute_url()}#publication-panel")
    return render(request, PANEL, {"review": review, "run": review.run, "pub_error": error,
                                   "pub_notice": notice}, status=status)
