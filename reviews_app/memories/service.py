"""Memories on the Django side: suggesting one when a person rejects a finding with a reason,
withdrawing the suggestion when the rejection is undone, choosing the active memories a new
review receives, and counting how often each changed a finding.

A suggestion is a *pending* ``Memory``: it changes nothing until a person approves it on the
memories page. Which reasons suggest what:

- wrong → "… is a false alarm", effect drop;
- intended → "… is intended", effect drop;
- not important here → "… is not important", effect downgrade (to info: the finding stays
  visible, at the end of the list, and never blocks the verdict);
- other → only with a comment, which becomes the memory's text, effect drop;
- duplicate → none (the other finding stays; nothing to remember about the code).

One suggestion per (owner, repository, glob, match): a second rejection of the same kind
updates the pending suggestion instead of adding another, and an active memory that already
covers it is left as it is.
"""

from __future__ import annotations

from django.db.models import F, Q

from common.secret_keys import mask

from ..models import Finding, Memory, RejectReason, Review
from . import match as pure

SUGGESTING = {RejectReason.WRONG: "is a false alarm", RejectReason.INTENDED: "is intended",
              RejectReason.NOT_IMPORTANT: "is not important"}
COMMENT_CHARS = 300


def connection_of(review: Review):
    pr = review.pull_request
    return pr.connection if pr is not None else None


def _text(finding: Finding, glob: str, reason: str, comment: str) -> str:
    title = " ".join(finding.title.split())[:160]
    comment = " ".join(mask(comment).split())[:COMMENT_CHARS]
    if reason == RejectReason.OTHER:
        return f"In `{glob}`, about “{title}”: {comment}"
    text = f"In `{glob}`, “{title}” {SUGGESTING[reason]}"
    return text + (f" ({comment})" if comment else "") + "."


def _finding_dict(finding: Finding) -> dict:
    return {"file": finding.file, "rules": finding.rules, "category": finding.category,
            "title": finding.title}


def _same(owner, connection, glob: str, match: dict):
    """Non-retired memories of ``owner`` for the same repository, glob and match."""
    qs = Memory.objects.filter(owner=owner, path_glob=glob).exclude(status=Memory.Status.RETIRED)
    qs = qs.filter(connection=connection) if connection else qs.filter(connection__isnull=True)
    return [m for m in qs.select_for_update() if m.match == match]


def suggest(review: Review, finding: Finding, user) -> Memory | None:
    """The pending memory a rejection suggests (created or updated), or None. Runs inside the
    triage transaction."""
    reason, comment = finding.reject_reason, (finding.comment or "").strip()
    if reason not in SUGGESTING and not (reason == RejectReason.OTHER and comment):
        return None
    connection = connection_of(review)
    glob = pure.glob_for(finding.file)
    if pure.glob_error(glob):
        return None  # a path we cannot express safely (e.g. "..") suggests nothing
    match = pure.match_for(_finding_dict(finding))
    fields = {"text": _text(finding, glob, reason, comment), "reason": reason,
              "effect": "downgrade" if reason == RejectReason.NOT_IMPORTANT else "drop",
              "source_finding": finding, "created_by": user}
    same = _same(review.owner, connection, glob, match)
    if any(m.status == Memory.Status.ACTIVE for m in same):
        return None  # already remembered
    if same:
        memory = same[0]
        for k, v in fields.items():
            setattr(memory, k, v)
        memory.save(update_fields=[*fields])
        return memory
    return Memory.objects.create(owner=review.owner, connection=connection, path_glob=glob,
                                 match=match, status=Memory.Status.PENDING, **fields)


def withdraw(review: Review, finding: Finding, user) -> None:
    """Undoing a rejection removes the pending suggestion it made; if another rejected
    finding of the review suggests the same memory, the suggestion is made from it instead."""
    mine = Memory.objects.filter(source_finding=finding, status=Memory.Status.PENDING)
    if not mine.exists():
        return
    mine.delete()
    glob, match = pure.glob_for(finding.file), pure.match_for(_finding_dict(finding))
    others = (review.findings.filter(decision=Finding.Decision.REJECTED)
              .exclude(pk=finding.pk).exclude(reject_reason="").order_by("-decided_at", "-pk"))
    for other in others:
        if (pure.glob_for(other.file), pure.match_for(_finding_dict(other))) == (glob, match):
            if suggest(review, other, user):
                return


# --- what a new review receives ---------------------------------------------------------------
def as_option(m: Memory) -> dict:
    return {"id": m.pk, "path_glob": m.path_glob, "text": m.text, "match": m.match or {},
            "effect": m.effect if m.effect in pure.EFFECTS else "drop"}


def for_review(owner, connection, paths) -> list[dict]:
    """``owner``'s active memories for ``connection`` (None: a review of no connected
    repository) and those for every review (connection None), whose glob matches at least
    one of ``paths``; oldest first, so the first memory approved decides."""
    scope = Q(connection__isnull=True)
    if connection is not None:
        scope |= Q(connection=connection)
    active = Memory.objects.filter(scope, owner=owner, status=Memory.Status.ACTIVE).order_by("id")
    return pure.for_paths([as_option(m) for m in active], paths)


def count_applied(review: Review, findings: list[dict]) -> None:
    """Add to each memory's ``times_applied`` the findings it changed in a synthesis."""
    counts: dict[int, int] = {}
    for f in findings:
        for m in f.get("memories") or ():
            if isinstance(m, dict) and isinstance(m.get("id"), int):
                counts[m["id"]] = counts.get(m["id"], 0) + 1
    for pk, n in counts.items():
        Memory.objects.filter(pk=pk, owner_id=review.owner_id).update(
            times_applied=F("times_applied") + n)


# --- the review page -------------------------------------------------------------------------
def page_context(review: Review, findings: list[Finding]) -> dict:
    """What the finding cards show about memories: the suggestion each rejection made, how
    many suggestions of this review wait for approval, and the memories that changed a
    finding (by id; only the owner's)."""
    rejected = [f.pk for f in findings if f.decision == Finding.Decision.REJECTED]
    pending = list(Memory.objects.filter(owner=review.owner, status=Memory.Status.PENDING,
                                         source_finding__review=review)
                   .only("id", "source_finding_id")) if rejected else []
    used = {m["id"] for f in findings for m in f.memories or () if isinstance(m, dict)}
    named = {m.pk: m for m in Memory.objects.filter(owner=review.owner, pk__in=used)} \
        if used else {}
    return {"reasons": RejectReason.choices,
            "suggested": {m.source_finding_id: m for m in pending},
            "pending_count": len(pending), "named": named}
