"""Review pages: start a review and browse past ones; the review page (live progress,
reviewers, diff with anchored findings, triage, verdict, costs, coverage); exports.

Only the owner sees a review: anyone else gets a 404, anonymous visitors the sign-in page.
htmx requests get the named partial of the page; plain posts redirect back to it.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from agents_app import engine
from agents_app.models import Run
from agents_app.patterns.base import Decision, InvalidDecision
from agents_app.views import keyset_page, live_message

from . import services
from .forms import (
    AcceptAllForm,
    ExportForm,
    FindingDecisionForm,
    NewReviewForm,
    ReviewFilterForm,
    VerdictForm,
)
from .models import Finding, Review
from .pipeline import coverage, export
from .pipeline.pattern import VERDICT_LABELS
from .pipeline.schema import SEVERITIES
from .rendering import anchors, file_views

PAGE = "reviews_app/review_detail.html"


# --- start and history ---------------------------------------------------------------------------
def _history(request) -> dict:
    form = ReviewFilterForm(request.GET or None)
    reviews = Review.objects.filter(owner=request.user).select_related("run").only(
        "id", "run_id", "source_kind", "source_label", "proposed_verdict", "final_verdict",
        "counts", "created_at", "total_files", "run__status", "run__cost_usd", "run__offline",
        "run__prompt_tokens", "run__completion_tokens")
    params = {}
    if form.is_valid():
        d = form.cleaned_data
        if d.get("status"):
            reviews = reviews.filter(run__status=d["status"])
            params["status"] = d["status"]
        if d.get("verdict"):
            reviews = reviews.filter(Q(final_verdict=d["verdict"]) | Q(
                final_verdict="", proposed_verdict=d["verdict"]))
            params["verdict"] = d["verdict"]
        if d.get("source"):
            reviews = reviews.filter(source_kind=d["source"])
            params["source"] = d["source"]
        if d.get("q"):
            reviews = reviews.filter(Q(source_label__icontains=d["q"]) |
                                     Q(summary__icontains=d["q"]))
            params["q"] = d["q"]
    return {**keyset_page(reviews, form, params, "reviews"),
            "usage": services.daily_usage(), "severities": SEVERITIES}


@login_required
@require_GET
def review_list(request):
    ctx = {"form": NewReviewForm(), **_history(request)}
    if request.htmx and request.htmx.target == "history":
        return render(request, "reviews_app/review_list.html#history", ctx)
    return render(request, "reviews_app/review_list.html", ctx)


@login_required
@require_POST
def start_review(request):
    form = NewReviewForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            run = services.start_review(request.user, form.review_input, form.prepared,
                                        models=form.models(),
                                        min_confidence=form.cleaned_data.get("min_confidence"))
        except services.InputError as exc:
            form.add_error(None, str(exc))
        else:
            if request.htmx:
                return HttpResponseClientRedirect(run.get_absolute_url())
            return redirect(run)
    ctx = {"form": form, **_history(request)}
    if request.htmx:
        return render(request, "reviews_app/review_list.html#new-review", ctx, status=400)
    return render(request, "reviews_app/review_list.html", ctx, status=400)


# --- the review page ----------------------------------------------------------------------------
def owned_review(request, pk: int) -> Review:
    return get_object_or_404(Review.objects.select_related("run", "verdict_decided_by"),
                             run_id=pk, owner=request.user)


def review_context(review: Review, *, with_diff: bool = True, timeline: bool = True,
                   **extra) -> dict:
    """Everything the review page shows. Live updates and single-finding answers leave out
    the highlighted diff (``with_diff``) and the whole timeline (``timeline``: then only the
    newest event, for the header), which they do not render."""
    run: Run = review.run
    findings = list(review.findings.select_related("decided_by"))
    kept = [f for f in findings if f.kept]
    dropped = [f for f in findings if not f.kept]
    views = file_views(review.files, kept) if with_diff else []
    events = list(run.events.all()) if timeline else list(run.events.order_by("-seq")[:1])
    state = run.state or {}
    pending = {s: sum(1 for f in kept if f.severity == s and f.decision == "pending")
               for s in SEVERITIES}
    reflection = state.get("reflection") or {}
    # While a stage runs, its calls are already recorded one by one: show each reviewer's
    # answer as it lands, before the stage's summary exists.
    answered: dict[tuple[str, str], list] = {}
    for c in run.model_calls.only("stage", "role", "error", "latency_ms"):
        answered.setdefault((c.stage, c.role), []).append(c)
    reviewers = []
    for name in ("security", "architecture", "style"):
        r = (review.reviewers or {}).get(name)
        reviewers.append({"name": name, "model": run.models_used.get(name, ""),
                          "info": r, "reflection": reflection.get(name),
                          "calls": answered.get(("review", name), []),
                          "reflect_calls": answered.get(("reflect", name), [])})
    costs = services.cost_breakdown(run)
    return {
        "review": review, "run": run, "kept": kept, "dropped": dropped, "files": views,
        "anchors": anchors(review.files, kept), "events": events,
        "last_seq": events[-1].seq if events else 0,
        "reviewers": reviewers, "costs": costs, "analysis": state.get("analysis") or {},
        "pending_by_severity": {s: n for s, n in pending.items() if n},
        "decided": sum(1 for f in kept if f.decision != "pending"),
        "at_gate": run.status == "awaiting_triage",
        "verdict_labels": VERDICT_LABELS, "severities": SEVERITIES,
        "skipped": [c for c in review.coverage if not c.get("reviewed")],
        "partial": [c for c in review.coverage if c.get("reviewed")],
        "unexamined": coverage.unexamined(review.coverage),
        **extra,
    }


@login_required
@require_GET
def review_detail(request, pk: int):
    review = owned_review(request, pk)
    return render(request, PAGE, review_context(review))


def _panel(request, review: Review, name: str, status: int = 200, **extra):
    review.refresh_from_db()
    ctx = review_context(review, **extra)
    if request.htmx:
        return render(request, f"{PAGE}#{name}", ctx, status=status)
    if status >= 400:
        return render(request, PAGE, ctx, status=status)
    return redirect(review)


@login_required
@require_POST
def finding_decision(request, pk: int, key: str):
    review = owned_review(request, pk)
    finding = get_object_or_404(Finding, review=review, key=key, kept=True)
    form = FindingDecisionForm(request.POST)
    if not form.is_valid():
        return _panel(request, review, "findings-panel", 400,
                      error="That decision could not be read: accept or reject the finding.")
    services.decide_finding(finding, request.user, form.cleaned_data["decision"],
                            form.cleaned_data["comment"])
    if not request.htmx:
        return redirect(f"{review.get_absolute_url()}#finding-{finding.key}")
    ctx = review_context(review, with_diff=False, timeline=False, f=finding)
    card = render_to_string(f"{PAGE}#finding-card", ctx, request=request)
    summary = render_to_string(f"{PAGE}#triage-summary", {**ctx, "oob": True}, request=request)
    return HttpResponse(card + summary)


@login_required
@require_POST
def accept_all(request, pk: int):
    review = owned_review(request, pk)
    form = AcceptAllForm(request.POST)
    if not form.is_valid():
        return _panel(request, review, "findings-panel", 400, error="Choose a severity.")
    n = services.accept_all(review, form.cleaned_data["severity"], request.user)
    return _panel(request, review, "findings-panel",
                  notice=f"Accepted {n} {form.cleaned_data['severity']} finding(s).")


@login_required
@require_POST
def verdict_decision(request, pk: int):
    review = owned_review(request, pk)
    form = VerdictForm(request.POST)
    if not form.is_valid():
        return _panel(request, review, "verdict-panel", 400,
                      error="That decision could not be read; reload the page and try again.")
    d = form.cleaned_data
    decision = Decision(action=d["action"], feedback=d["reason"],
                        edits={"verdict": d["verdict"]} if d["action"] == "override" else None,
                        author=request.user.get_username())
    try:
        engine.decide(review.run, request.user, d["seq"], decision)
    except engine.StaleDecision as exc:
        return _panel(request, review, "verdict-panel", 409, error=str(exc))
    except InvalidDecision as exc:
        return _panel(request, review, "verdict-panel", 400, error=str(exc),
                      chosen=d.get("verdict"), reason=d["reason"])
    return _panel(request, review, "verdict-panel")


@login_required
@require_GET
def review_file(request, pk: int, index: int):
    """One file's diff, for a large review whose page loads files on demand."""
    review = owned_review(request, pk)
    if index >= len(review.files):
        raise Http404("No such file in this review.")
    [view] = file_views(review.files, list(review.findings.filter(kept=True)), only=index)
    return render(request, f"{PAGE}#diff-table", {"v": view, "run": review.run})


@login_required
@require_GET
def export_review(request, pk: int):
    review = owned_review(request, pk)
    form = ExportForm(request.GET or {"format": "markdown"})
    if not form.is_valid():
        return HttpResponse("Unknown export: choose format=markdown, json or sarif and "
                            "scope=all or accepted.", status=400, content_type="text/plain")
    fmt = form.cleaned_data["format"]
    only_accepted = form.cleaned_data.get("scope") == "accepted"
    body = export.render(services.export_dict(review), fmt, only_accepted=only_accepted)
    mime, ext = export.EXPORT_FORMATS[fmt]
    resp = HttpResponse(body, content_type=f"{mime}; charset=utf-8")
    suffix = "-accepted" if only_accepted else ""
    resp["Content-Disposition"] = f'attachment; filename="review-{review.run_id}{suffix}.{ext}"'
    return resp


# --- live updates over the run's WebSocket ----------------------------------------------------
_PANELS_BY_KIND = {
    "reviewer_done": {"reviewers-panel"}, "reviewer_failed": {"reviewers-panel"},
    "reflection_done": {"reviewers-panel"}, "reflection_failed": {"reviewers-panel"},
    "reflection_skipped": {"reviewers-panel"}, "analysis_done": {"reviewers-panel"},
    "model_call": {"costs-panel", "reviewers-panel"},
    "review_synthesized": {"verdict-panel", "findings-panel", "reviewers-panel", "diff-panel",
                           "header", "coverage-panel"},
    "gate_opened": {"verdict-panel", "findings-panel"},
    "verdict_decided": {"verdict-panel"},
    "run_finished": {"verdict-panel", "reviewers-panel", "findings-panel", "costs-panel"},
    "run_cancelled": {"verdict-panel"}, "budget_exceeded": {"verdict-panel"},
}


def render_live_update(run: Run, events, panels: set[str]) -> str:
    review = Review.objects.select_related("run", "verdict_decided_by").get(run=run)
    for e in events:
        panels = panels | _PANELS_BY_KIND.get(e.kind, set())
    ctx = review_context(review, with_diff="diff-panel" in panels, timeline=False)
    # A very large review does not fit one WebSocket message: the diff and findings give way
    # to a notice asking the person to load the page.
    return live_message(PAGE, ctx, events, panels,
                        ("header", "reviewers-panel", "verdict-panel", "findings-panel",
                         "diff-panel", "costs-panel", "coverage-panel"),
                        bulky=("diff-panel", "findings-panel"), too_large="too-large")
