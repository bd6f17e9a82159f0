"""Persisting what the review pattern's stages and its gate produce (see agents_app.records).
Runs inside the engine's commit, under the run's row lock, so a stage run twice after a
crash cannot write its findings twice (and the unique key per finding would refuse it)."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth import get_user_model
from django.utils import timezone

from agents_app.models import Run
from agents_app.records import persister
from common.secret_keys import mask, mask_deep, mask_finding

from .memories import service as memories
from .models import Finding, Review, TriageDecision
from .pipeline.pattern.records import ReviewersFinished, ReviewSynthesized, VerdictDecided
from .pipeline.synthesis import severity_counts
from .prflow import status as commit_status
from .prflow.publishing import dispatch as publishing
from .rules import service as review_rules
from .triage.service import record_final

User = get_user_model()


@persister(ReviewersFinished)
def _reviewers(run: Run, rec: ReviewersFinished, user) -> None:
    Review.objects.filter(run=run).update(reviewers=rec.reviewers)
    commit_status.touch(Review.objects.values_list("pk", flat=True).get(run=run))


def _row(review: Review, f: dict, position: int, kept: bool) -> Finding:
    f = mask_finding(dict(f))  # the pipeline masks secrets already; this is the last check
    return Finding(
        review=review, key=f["key"], position=position, kept=kept,
        drop_reason=f.get("drop_reason", ""), duplicate_of=f.get("duplicate_of", ""),
        category=f["category"], severity=f["severity"], file=f["file"], line=f.get("line") or None,
        end_line=f.get("end_line") or None, title=f["title"], description=f.get("description", ""),
        suggestion=f.get("suggestion", ""), confidence=float(f.get("confidence") or 0),
        reviewer=f["reviewer"], reviewers=f.get("reviewers") or [f["reviewer"]],
        rules=f.get("rules") or [], history=f.get("history") or [],
        fingerprint=f.get("fingerprint", ""), memories=f.get("memories") or [],
        carried_from=f.get("carried_from", ""), resolution=f.get("resolution", ""),
        kind=f.get("kind", ""), locations=f.get("locations") or [],
        quality=mask_deep(f.get("quality") or []), rule=mask_deep(f.get("rule") or {}),
        fix=mask_deep(f.get("fix") or {}))


def _carry_decision(row: Finding, f: dict) -> dict | None:
    """A kept finding carried with a person's decision from an earlier round (its code
    untouched) keeps it: the decision, who made it and when. Returns the change to record."""
    d = f.get("carried_decision")
    if not row.kept or not isinstance(d, dict) or d.get("decision") != Finding.Decision.ACCEPTED:
        return None
    row.decision = Finding.Decision.ACCEPTED
    by = d.get("by")
    row.decided_by_id = by if isinstance(by, int) and User.objects.filter(pk=by).exists() \
        else None
    try:
        row.decided_at = dt.datetime.fromisoformat(str(d.get("at") or ""))
    except ValueError:
        row.decided_at = timezone.now()
    row.comment = mask(str(d.get("comment") or ""))[:4000]
    return {"finding": row.key, "before": Finding.Decision.PENDING, "after": row.decision,
            "round": d.get("round"), "by": str(d.get("by_name") or "")[:150]}


@persister(ReviewSynthesized)
def _synthesized(run: Run, rec: ReviewSynthesized, user) -> None:
    review = Review.objects.get(run=run)
    rows = [_row(review, f, i, True) for i, f in enumerate(rec.kept)]
    rows += [_row(review, f, len(rows) + i, False) for i, f in enumerate(rec.dropped)]
    carried = [c for row, f in zip(rows, [*rec.kept, *rec.dropped], strict=True)
               if (c := _carry_decision(row, f))]
    Finding.objects.bulk_create(rows)
    if carried:  # the triage history says which decisions came from earlier rounds
        TriageDecision.objects.create(
            review=review, kind=TriageDecision.Kind.CARRY, actor=None, actor_name="Quorum",
            version=0, changes=carried,
            note="Accepted in an earlier round of this pull request; the code they point at "
                 "is unchanged, so the decisions stand.")
    # coverage: what the analyzers and reviewers really examined (None from older runs)
    extra = {"coverage": rec.coverage} if rec.coverage is not None else {}
    Review.objects.filter(pk=review.pk).update(
        proposed_verdict=rec.verdict, rule_verdict=rec.rule_verdict, summary=mask(rec.summary),
        notes=mask_deep(rec.notes), counts=severity_counts(rec.kept), **extra)
    memories.count_applied(review, rec.kept + rec.dropped)
    review_rules.count_applied(review, rec.kept)
    publishing.after_synthesis(review)  # the automatic policy publishes now
    commit_status.touch(review)  # the pull request's status: waiting for triage


@persister(VerdictDecided)
def _verdict(run: Run, rec: VerdictDecided, user) -> None:
    # The web page, a reopened review and the headless CLI all finalise through here, so
    # each final verdict is a recorded, numbered version.
    record_final(Review.objects.get(run=run), user, rec.verdict, rec.reason)
