"""What the comparison page adds for code reviews (issue 33): the findings each review kept
that the other compared reviews lack, and each review's verdict. A finding is the same
problem on both sides when its fingerprint matches (pipeline/fingerprint.py: the problem at
that code, not the words the reviewer used); a finding with no fingerprint is matched by its
place and title."""

from __future__ import annotations

from agents_app.forking.extras import Extra, only_each, register

from .models import Finding, Review


def _key(f: Finding) -> str:
    return f.fingerprint or f"{f.file}:{f.line or ''}:{' '.join(f.title.lower().split())}"


def _words(f: Finding) -> str:
    return f"{f.severity} · {f.where} · {f.title}"


def _verdict(review: Review) -> str:
    final = review.get_final_verdict_display() or "no final verdict"
    if review.proposed_verdict:
        return f"{final} (proposed: {review.get_proposed_verdict_display()})"
    return final


@register
def findings_each_lacks(runs: list) -> Extra | None:
    reviews = {r.run_id: r for r in Review.objects.filter(run_id__in=[r.pk for r in runs])}
    if not reviews:
        return None
    found: dict[int, dict[str, str]] = {pk: {} for pk in reviews}
    for f in Finding.objects.filter(review__run_id__in=list(reviews), kept=True).select_related(
            "review").order_by("review_id", "position"):
        found[f.review.run_id].setdefault(_key(f), _words(f))
    compared = [r for r in runs if r.pk in reviews]
    verdicts = "; ".join(f"run {r.pk}: {_verdict(reviews[r.pk])}" for r in compared)
    extra = Extra(key="findings", title="Findings each review has that the others lack",
                  note=f"Kept findings, matched by what they point at. Verdicts: {verdicts}.")
    if len(compared) < 2:
        extra.note = "Only one of these runs is a code review: its findings are not compared."
        return extra
    extra.only = only_each([f"Only in run {r.pk}" for r in compared],
                           [found[r.pk] for r in compared])
    return extra
