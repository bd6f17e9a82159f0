"""Triage on the review page: a decision on one finding, accepting a severity, settling the
rest, the verdict, and reopening. htmx requests get the panel the form targets back, with the
other triage panels out of band; plain posts redirect back to the page, or get the whole
page with the message when refused."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from agents_app.patterns.base import InvalidDecision

from ..models import Finding, Review
from ..views import PAGE, owned_review, review_context
from . import service as triage
from .forms import AcceptAllForm, FindingDecisionForm, ReopenForm, SettleRestForm, VerdictForm


def _triage_panels(request, review: Review, first: str, status: int = 200, **extra):
    """Answer a triage action: ``first`` (the panel the form targets, with the message) and
    the other triage panels out of band, since one action changes what they offer. A plain
    form post is redirected back to the page, or gets the whole page when refused."""
    review.refresh_from_db()
    if not request.htmx:
        if status >= 400:
            return render(request, PAGE, review_context(review, **extra), status=status)
        return redirect(review)
    ctx = review_context(review, with_diff=False, timeline=False)
    html = [render_to_string(f"{PAGE}#{first}", {**ctx, **extra}, request=request)]
    html += [render_to_string(f"{PAGE}#{name}", {**ctx, "oob": True}, request=request)
             for name in TRIAGE_PANELS if name != first]
    return HttpResponse("".join(html), status=status)


# What one triage action can change: the verdict, the cards, the history, and on the diff the
# triage bar and every finding's thread.
TRIAGE_PANELS = ("verdict-panel", "findings-panel", "history-panel", "triage-bar",
                 "diff-threads")


@login_required
@require_POST
def finding_decision(request, pk: int, key: str):
    review = owned_review(request, pk)
    finding = get_object_or_404(Finding.objects.select_related("decided_by"), review=review,
                                key=key, kept=True)
    # The same decision from the finding's thread on the diff or from its card in the list:
    # the answer is the one it came from, and the other is redrawn out of band.
    on_diff = (request.htmx.target == f"thread-{finding.key}" if request.htmx
               else request.POST.get("view") == "diff")
    form = FindingDecisionForm(request.POST)
    notice, error, status = "", "", 200
    if not form.is_valid():
        error, status = form.error_text(), 400
    else:
        d = form.cleaned_data
        try:
            finding, notice = triage.decide_finding(review, key, request.user, d["decision"],
                                                    d["comment"], seen=d["seen"],
                                                    reason=d["reason"])
        except triage.Refused as exc:
            finding.refresh_from_db()
            error, status = str(exc), exc.status
    if not request.htmx:
        if status >= 400:
            return _triage_panels(request, review, "findings-panel", status,
                                  error_for="findings", error=error)
        anchor = "thread" if on_diff else "finding"
        return redirect(f"{review.get_absolute_url()}#{anchor}-{finding.key}")
    # The form targets the finding's thread or card: answer with it (and its message), and
    # refresh what the decision changes elsewhere out of band.
    review.refresh_from_db()
    ctx = review_context(review, with_diff=False, timeline=False)
    main, other = (("finding-thread", "finding-card") if on_diff
                   else ("finding-card", "finding-thread"))
    answer = render_to_string(f"{PAGE}#{main}",
                              {**ctx, "f": finding, "card_error": error, "card_notice": notice,
                               "announce": True}, request=request)
    oob = [render_to_string(f"{PAGE}#{other}", {**ctx, "f": finding, "oob": True},
                            request=request)]
    oob += [render_to_string(f"{PAGE}#{name}", {**ctx, "oob": True}, request=request)
            for name in ("triage-bar", "triage-summary", "verdict-panel", "history-panel")]
    return HttpResponse(answer + "".join(oob), status=status)


@login_required
@require_POST
def accept_all(request, pk: int):
    review = owned_review(request, pk)
    form = AcceptAllForm(request.POST)
    if not form.is_valid():
        return _triage_panels(request, review, "findings-panel", 400, error_for="findings",
                              error="Choose a severity.")
    sev = form.cleaned_data["severity"]
    try:
        n = triage.accept_severity(review, sev, request.user)
    except triage.Refused as exc:
        return _triage_panels(request, review, "findings-panel", exc.status,
                              error_for="findings", error=str(exc))
    return _triage_panels(request, review, "findings-panel",
                          notice=f"Accepted {n} {sev} finding(s).")


@login_required
@require_POST
def settle_rest(request, pk: int):
    """Accept or reject every finding still untriaged, so the verdict can be finalised."""
    review = owned_review(request, pk)
    form = SettleRestForm(request.POST)
    if not form.is_valid():
        return _triage_panels(request, review, "verdict-panel", 400, error_for="verdict",
                              error="Choose to accept or to reject the remaining findings.")
    decision = form.cleaned_data["decision"]
    try:
        n = triage.settle_rest(review, decision, request.user, seen=form.seen_keys())
    except triage.Refused as exc:
        return _triage_panels(request, review, "verdict-panel", exc.status,
                              error_for="verdict", error=str(exc))
    done = "accepted" if decision == Finding.Decision.ACCEPTED else "rejected"
    notice = (f"{n} remaining finding{'s' if n != 1 else ''} {done}. You can finalise the "
              "verdict now." if n else "No finding was left to settle; nothing changed.")
    return _triage_panels(request, review, "verdict-panel", notice=notice)


@login_required
@require_POST
def verdict_decision(request, pk: int):
    review = owned_review(request, pk)
    form = VerdictForm(request.POST)
    if not form.is_valid():
        return _triage_panels(request, review, "verdict-panel", 400, error_for="verdict",
                              error="That decision could not be read; reload the page and "
                                    "try again.")
    d = form.cleaned_data
    try:
        triage.finalise(review, request.user, action=d["action"], verdict=d["verdict"],
                        reason=d["reason"], seq=d["seq"],
                        confirmed_critical=form.confirmed_keys())
    except (triage.Refused, InvalidDecision) as exc:
        # An override keeps what the person typed, and its part of the form stays open.
        kept_input = ({"chosen": d["verdict"], "reason": d["reason"], "override_open": True}
                      if d["action"] == "override" else {})
        return _triage_panels(request, review, "verdict-panel", getattr(exc, "status", 400),
                              error_for="verdict", error=str(exc),
                              confirm_asked=bool(getattr(exc, "critical", None)), **kept_input)
    return _triage_panels(request, review, "verdict-panel")


@login_required
@require_POST
def reopen_triage(request, pk: int):
    """Unlock the triage of a finalised review; finalising again makes a new version."""
    review = owned_review(request, pk)
    form = ReopenForm(request.POST)
    if not form.is_valid():
        return _triage_panels(request, review, "verdict-panel", 400, error_for="verdict",
                              error="The note is too long: keep it under 4,000 characters.")
    try:
        triage.reopen(review, request.user, form.cleaned_data["note"])
    except triage.Refused as exc:
        return _triage_panels(request, review, "verdict-panel", exc.status,
                              error_for="verdict", error=str(exc))
    return _triage_panels(request, review, "verdict-panel")  # the panel says it is open again
