"""Review pages: start a review and browse past ones; the review page (live progress,
reviewers, diff with anchored findings, triage, verdict, costs, coverage); exports.

Only the owner sees a review: anyone else gets a 404, anonymous visitors the sign-in page.
htmx requests get the named partial of the page; plain posts redirect back to it.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from agents_app.live import live_message
from agents_app.models import Run
from agents_app.run_page import newest_only
from agents_app.run_page import timeline as run_timeline
from agents_app.search import keyset_page
from agents_app.teams.access import can_manage, visible
from agents_app.teams.fields import chosen_team

from . import services
from .forms import ExportForm, NewReviewForm, ReviewFilterForm
from .memories import service as memories
from .models import Finding, Review
from .pipeline import coverage, export, synthesis
from .pipeline.pattern import VERDICT_LABELS, analyze
from .pipeline.schema import SEVERITIES
from .rendering import anchors, elsewhere, file_views
from .triage import service as triage

PAGE = "reviews_app/review_detail.html"
PUBLICATION_PANEL = "reviews_app/_publication.html"  # issue 15: the publish part's panel


# --- start and history ---------------------------------------------------------------------------
def _history(request) -> dict:
    form = ReviewFilterForm(request.GET or None)
    reviews = visible(Review.objects, request.user, owner="run__owner", team="run__team"
                      ).select_related("run").only(
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
    ctx = {"form": NewReviewForm(user=request.user), **_history(request)}
    if request.htmx and request.htmx.target == "history":
        return render(request, "reviews_app/review_list.html#history", ctx)
    return render(request, "reviews_app/review_list.html", ctx)


@login_required
@require_http_methods(["GET", "POST"])
def start_review(request):
    if request.method == "GET":  # a bookmark or a reload: the form is on the reviews page
        return redirect(reverse("review_list") + "#new-review")
    form = NewReviewForm(request.POST, request.FILES, user=request.user)
    if form.is_valid():
        try:
            run = services.start_review(request.user, form.review_input, form.prepared,
                                        models=form.models(),
                                        min_confidence=form.cleaned_data.get("min_confidence"),
                                        options=form.imported, team=chosen_team(form))
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
    """The review, if the person may see its run (its owner, or a member of its team; a 404
    otherwise). A POST needs the owner while a member, or one of the team's approvers."""
    review = get_object_or_404(visible(Review.objects.select_related("run", "verdict_decided_by"),
                                       request.user, owner="run__owner", team="run__team"),
                               run_id=pk)
    if request.method == "POST" and not can_manage(request.user, review.run):
        raise PermissionDenied("Only the team's approvers, or the person who started the "
                               "review, may act on it.")
    return review


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
    shown = run_timeline(run) if timeline else newest_only(run)
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
        "elsewhere": elsewhere(review.files, kept) if with_diff else [],
        "analyzers_ran": [a["name"] for a in analyze.ran(state.get("analysis") or {})],
        "anchors": anchors(review.files, kept), **shown,
        "reviewers": reviewers, "costs": costs, "analysis": state.get("analysis") or {},
        "pending_by_severity": {s: n for s, n in pending.items() if n},
        "decided": sum(1 for f in kept if f.decision != "pending"),
        "at_gate": run.status == "awaiting_triage",
        **_triage_context(review, kept),
        "verdict_labels": VERDICT_LABELS, "severities": SEVERITIES,
        "skipped": [c for c in review.coverage if not c.get("reviewed")],
        "partial": [c for c in review.coverage if c.get("reviewed")
                    and c.get("reason") != coverage.EXAMINED],
        "examined": [c for c in review.coverage if c.get("reason") == coverage.EXAMINED],
        "unexamined": coverage.unexamined(review.coverage),
        "memory": memories.page_context(review, findings),
        **extra,
    }


def triaged_verdict(review: Review, kept: list[Finding]) -> str:
    """The verdict the severity rules give for the findings the person accepted, once every
    finding is triaged (else ""). Like the proposed one it is never approve for a review
    that left part of the change unexamined or missed a reviewer."""
    if not review.proposed_verdict or any(f.decision == Finding.Decision.PENDING for f in kept):
        return ""
    return synthesis.rule_verdict(
        [{"severity": f.severity, "category": f.category}
         for f in kept if f.decision == Finding.Decision.ACCEPTED],
        incomplete=bool(coverage.unfinished(review.reviewers)
                        or coverage.unexamined(review.coverage)))


def _triage_context(review: Review, kept: list[Finding]) -> dict:
    closed = triage.closed_reason(review)
    pending = [f.key for f in kept if f.decision == Finding.Decision.PENDING]
    decisions = triage.history(review)
    after = triaged_verdict(review, kept) if closed is None else ""
    return {"triage_open": closed is None, "triage_closed": closed,
            "triaged_verdict": after,
            "triaged_verdict_label": dict(Review._meta.get_field("proposed_verdict").choices)
            .get(after, ""),
            "suggested_verdict": after if after != review.proposed_verdict else "",
            "pending_keys": pending, "version_text": triage.version_text(review),
            "settle_choices": [("accepted", "Accept"), ("rejected", "Reject")],
            **_critical_context(review if closed is None else None),
            "history": [(d, triage.describe(d)) for d in decisions],
            "last_reopen": next((d for d in reversed(decisions) if d.kind == "reopen"), None)
            if closed is None and review.triage_version else None}


def _critical_context(review: Review | None) -> dict:
    """The accepted critical findings an approval must confirm (none while triage is shut)."""
    critical = triage.accepted_critical(review) if review is not None else []
    return {"critical_accepted": critical, "critical_names": triage.named(critical),
            "critical_keys": ",".join(f.key for f in critical)}


@login_required
@require_GET
def review_detail(request, pk: int):
    review = owned_review(request, pk)
    return render(request, PAGE, review_context(review))


@login_required
@require_GET
def review_file(request, pk: int, index: int):
    """One file's diff, for a large review whose page loads files on demand."""
    review = owned_review(request, pk)
    if index >= len(review.files):
        raise Http404("No such file in this review.")
    kept = list(review.findings.filter(kept=True).select_related("decided_by"))
    [view] = file_views(review.files, kept, only=index)
    return render(request, f"{PAGE}#diff-table", {
        "v": view, "run": review.run, "review": review,
        "triage_open": triage.closed_reason(review) is None,
        "memory": memories.page_context(review, kept)})


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
                           "header", "coverage-panel", "triage-bar"},
    "gate_opened": {"verdict-panel", "findings-panel", "triage-bar", "diff-threads"},
    "verdict_decided": {"verdict-panel", "findings-panel", "history-panel",
                        "publication-panel", "triage-bar", "diff-threads"},
    "triage_reopened": {"verdict-panel", "findings-panel", "history-panel",
                        "publication-panel", "triage-bar", "diff-threads"},
    "findings_triaged": {"verdict-panel", "findings-panel", "history-panel", "triage-bar",
                         "diff-threads"},
    "publication": {"publication-panel"},
    "run_finished": {"verdict-panel", "reviewers-panel", "findings-panel", "costs-panel",
                     "triage-bar", "diff-threads"},
    "run_cancelled": {"verdict-panel", "triage-bar", "diff-threads"},
    "budget_exceeded": {"verdict-panel"},
}


def render_live_update(run: Run, events, panels: set[str]) -> str:
    review = Review.objects.select_related("run", "verdict_decided_by").get(run=run)
    for e in events:
        panels = panels | _PANELS_BY_KIND.get(e.kind, set())
    if "diff-panel" in panels:  # it holds the threads already
        panels = panels - {"diff-threads"}
    ctx = review_context(review, with_diff="diff-panel" in panels, timeline=False)
    # A very large review does not fit one WebSocket message: the diff and findings give way
    # to a notice asking the person to load the page.
    return live_message(PAGE, ctx, events, panels,
                        ("header", "reviewers-panel", "verdict-panel", "publication-panel",
                         "triage-bar", "findings-panel", "history-panel", "diff-panel",
                         "diff-threads", "costs-panel", "coverage-panel"),
                        bulky=("diff-panel", "diff-threads", "findings-panel"),
                        too_large="too-large",
                        sources={"publication-panel": PUBLICATION_PANEL})
