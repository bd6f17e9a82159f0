"""Review rules on the Django side: which active rules a new review receives, counting how
often each produced a kept finding, and suggesting rules from what people said in triage
(``generate``: filter → generate → dedupe against existing).

The material for suggestions is the owner's decided findings (optionally of one connection):
the comment left when accepting or rejecting one, and the reason a finding was rejected for
(wrong, not important here, intended, other). A finding a saved rule already came from is not
sent again, so asking twice costs one model call and suggests nothing twice. Suggestions are
saved *pending*; only an approved (active) rule reaches a review.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F, Q

import config
from agents_app.engine.journal import gateway_config
from agents_app.llm.gateway import Gateway, is_in_process, is_offline, missing_credentials
from agents_app.patterns.base import ModelClient, ModelError
from common.secret_keys import mask

from ..memories import match as globs
from ..models import Finding, RejectReason, Review, ReviewRule
from . import generate as rulegen

log = logging.getLogger(__name__)
Status = ReviewRule.Status
REASONS = (RejectReason.WRONG, RejectReason.NOT_IMPORTANT, RejectReason.INTENDED,
           RejectReason.OTHER)
MAX_MATERIAL_ROWS = 400


# --- what a new review receives ---------------------------------------------------------------
def as_option(rule: ReviewRule) -> dict:
    """The contract with the guardian pass (``pipeline/pattern/checks.py``)."""
    matcher = rule.matcher if isinstance(rule.matcher, dict) else {}
    return {"id": f"rule:{rule.pk}", "title": rule.title, "text": rule.text,
            "path_glob": rule.path_glob, "severity": rule.severity,
            "pattern": str(matcher.get("pattern") or ""), "source": rule.origin}


def for_review(owner, connection, paths) -> list[dict]:
    """``owner``'s active rules for every review (connection None) and for ``connection``'s
    repository, whose glob matches at least one of ``paths``; oldest first."""
    scope = Q(connection__isnull=True)
    if connection is not None:
        scope |= Q(connection=connection)
    active = ReviewRule.objects.filter(scope, owner=owner, status=Status.ACTIVE).order_by("id")
    return globs.for_paths([as_option(r) for r in active], paths)


def _rule_pk(value) -> int | None:
    if isinstance(value, str) and value.startswith("rule:") and value[5:].isdigit():
        return int(value[5:])
    return None


def count_applied(review: Review, findings: list[dict]) -> None:
    """Add to each rule's ``times_applied`` the kept findings that name it."""
    counts: dict[int, int] = {}
    for f in findings:
        rule = f.get("rule") if isinstance(f, dict) else None
        pk = _rule_pk(rule.get("id")) if isinstance(rule, dict) else None
        if pk is not None:
            counts[pk] = counts.get(pk, 0) + 1
    for pk, n in counts.items():
        ReviewRule.objects.filter(pk=pk, owner_id=review.owner_id).update(
            times_applied=F("times_applied") + n)


# --- suggesting rules ---------------------------------------------------------------------------
def _used(owner) -> set[str]:
    used: set[str] = set()
    for ids in ReviewRule.objects.filter(owner=owner).values_list("source_findings", flat=True):
        used.update(str(i) for i in ids or () if isinstance(i, (int, str)))
    return used


def material(owner, connection=None) -> list[dict]:
    """The triage material of ``owner``'s reviews (of ``connection`` when given), newest first,
    without the findings a saved rule already came from. Texts are masked."""
    qs = (Finding.objects.filter(review__owner=owner)
          .filter(Q(decision=Finding.Decision.ACCEPTED, comment__gt="")
                  | Q(decision=Finding.Decision.REJECTED, reject_reason__in=REASONS)
                  | Q(decision=Finding.Decision.REJECTED, comment__gt=""))
          .order_by("-decided_at", "-pk"))
    if connection is not None:
        qs = qs.filter(review__pull_request__connection=connection)
    used = _used(owner)
    items = []
    for f in qs[:MAX_MATERIAL_ROWS]:
        if str(f.pk) in used:
            continue
        rejected = f.decision == Finding.Decision.REJECTED
        items.append({"id": str(f.pk), "kind": "rejection" if rejected else "comment",
                      "reason": f.reject_reason if rejected else "",
                      "text": mask(f.comment or ""), "title": f.title, "category": f.kind
                      or f.category, "severity": f.severity, "file": f.file})
    return items


def existing(owner) -> list[dict]:
    """Every rule of ``owner``'s, whatever its status or scope (a retired rule is not
    suggested again)."""
    return [{"id": r.pk, "title": r.title, "text": r.text}
            for r in ReviewRule.objects.filter(owner=owner).order_by("id")]


def generation_model() -> str:
    return settings.QUORUM_ROLE_MODELS[rulegen.ROLE]


def generation_client(model: str) -> ModelClient:
    rulegen.register()  # the offline model's answer (idempotent)
    return Gateway(gateway_config({rulegen.ROLE: model}))


def runs_inline(model: str) -> bool:
    """The offline model (and in-process ones) answer at once: no worker needed."""
    return is_offline(model) or is_in_process(model)


@dataclass
class Suggested:
    created: list[ReviewRule] = field(default_factory=list)
    duplicates: int = 0
    material: int = 0
    model: str = ""
    offline: bool = False
    queued: bool = False
    error: str = ""


def refusal(model: str) -> str:
    """Why a suggestion with ``model`` cannot be asked for now, or ""."""
    if problem := missing_credentials(model):
        return problem
    from ..services import daily_usage  # services imports this module

    if not is_offline(model) and daily_usage()["cost_reached"]:
        return ("Reviews have reached today's cost cap; rules can be suggested with a priced "
                "model tomorrow (or by the offline model now).")
    return ""


def suggest(owner, connection=None, *, user=None, client: ModelClient | None = None,
            model: str | None = None) -> Suggested:
    """Filter → generate → dedupe, and save the new rules as pending suggestions."""
    model = model or generation_model()
    out = Suggested(model=model, offline=is_offline(model))
    items = material(owner, connection)
    out.material = len(items)
    if not rulegen.filter_items(items):
        return out
    try:
        generated = rulegen.candidates(items, existing(owner),
                                       client or generation_client(model))
    except ModelError as exc:
        out.error = mask(str(exc))[:500]
        log.warning("rule suggestions for user %s failed: %s", owner.pk, out.error)
        return out
    with transaction.atomic():
        # One suggestion at a time per owner: a second request waits, then dedupes against
        # what the first one saved.
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        fresh, dropped = rulegen.dedupe(generated, existing(owner))
        used = _used(owner)
        for r in fresh:
            ids = [i for i in r["source_findings"] if i not in used]
            if r["source_findings"] and not ids:
                out.duplicates += 1  # every finding it came from was used meanwhile
                continue
            out.created.append(ReviewRule.objects.create(
                owner=owner, connection=connection, path_glob=r["path_glob"],
                title=mask(r["title"])[:200], text=mask(r["text"]), severity=r["severity"],
                matcher={"pattern": r["pattern"]} if r["pattern"] else {},
                status=Status.PENDING, origin=r["origin"], source_text=mask(r["source_text"]),
                source_findings=[int(i) for i in ids if i.isdigit()], created_by=user))
        out.duplicates += len(dropped)
    return out


def start_suggest(owner, connection=None, *, user=None) -> Suggested:
    """Suggest now with the offline (in-process) model, else hand the model call to a worker
    and say so (the suggestions appear on the page when it is done)."""
    model = generation_model()
    if problem := refusal(model):
        return Suggested(model=model, error=problem)
    if runs_inline(model):
        return suggest(owner, connection, user=user, model=model)
    if not rulegen.filter_items(material(owner, connection)):
        return Suggested(model=model)
    config.send_task("reviews_app.tasks.suggest_rules", args=(
        owner.pk, connection.pk if connection else None, user.pk if user else None))
    return Suggested(model=model, queued=True)


def run_task(owner_id: int, connection_id: int | None, user_id: int | None) -> str:
    """The worker's side of ``start_suggest``."""
    from ..models import Connection

    User = get_user_model()
    owner = User.objects.filter(pk=owner_id).first()
    if owner is None:
        return "gone"
    connection = None
    if connection_id is not None:
        connection = Connection.objects.filter(pk=connection_id, owner=owner).first()
        if connection is None:
            return "gone"
    user = User.objects.filter(pk=user_id).first() if user_id else None
    out = suggest(owner, connection, user=user)
    return "failed" if out.error else f"created {len(out.created)}"
