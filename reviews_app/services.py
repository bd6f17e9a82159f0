"""Starting code reviews and reading them back: the Django side of ``reviews_app.pipeline``.

The web form and ``manage.py review`` share all of it: loading an input (paste, upload, git
range, GitHub pull request), parsing it within the configured limits, the daily caps, and
creating the run and its review in one transaction, so a refused input saves nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

import reviews_app
from agents_app import engine
from agents_app.llm.gateway import is_offline
from agents_app.models import ModelCall, Run
from common.analyzers import sarif_import

from . import sources
from .fixes import config as fix_config
from .memories import service as memories
from .models import Finding, Review
from .pipeline import diffs
from .pipeline.pattern import CodeReview, analyze
from .rules import service as review_rules
from .sources import git

PATTERN = CodeReview.name
ROLES = CodeReview.roles
UPLOAD_SUFFIXES = (".diff", ".patch", ".txt")


class InputError(ValueError):
    """The input cannot be reviewed; the message says why and what to do."""


class DailyLimitReached(InputError):
    pass


@dataclass
class ReviewInput:
    kind: str  # paste | upload | git | github
    label: str
    diff_text: str
    contents: dict[str, str | None] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    coverage: list[dict] = field(default_factory=list)  # notes about the input as a whole


def limits() -> diffs.Limits:
    return diffs.Limits(
        max_bytes=settings.QUORUM_REVIEW_MAX_BYTES, max_files=settings.QUORUM_REVIEW_MAX_FILES,
        max_lines_per_file=settings.QUORUM_REVIEW_MAX_LINES_PER_FILE,
        heavy_max_lines=settings.QUORUM_REVIEW_HEAVY_MAX_LINES)


def size_text(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    if n >= 1_000:
        return f"{n / 1_000:.0f} KB"
    return f"{n} bytes"


def too_big(name: str, size: int) -> InputError | None:
    limit = settings.QUORUM_REVIEW_MAX_UPLOAD_BYTES
    if size <= limit:
        return None
    return InputError(f"{name} is {size_text(size)}; the limit is {size_text(limit)}. Review a "
                      "smaller range, or raise QUORUM_REVIEW_MAX_UPLOAD_BYTES.")


def imported_evidence(named: list[tuple[str, bytes]]) -> tuple[list[dict], list[str]]:
    """Evidence and notes from SARIF 2.1.0 files of other analyzers, for
    ``options["imported"]``. Raises InputError naming the first file refused."""
    evidence: list[dict] = []
    notes: list[str] = []
    for name, data in named:
        try:
            got = sarif_import.read_sarif(data, name=name,
                                          max_bytes=settings.QUORUM_REVIEW_MAX_UPLOAD_BYTES)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        room = sarif_import.MAX_RESULTS - len(evidence)
        if len(got.evidence) > room:
            notes.append(f"{name}: {len(got.evidence) - room} result(s) over the "
                         f"{sarif_import.MAX_RESULTS} imported in all were left out.")
        evidence += got.evidence[:max(room, 0)]
        notes += got.notes
    return evidence, notes


# --- loading an input ------------------------------------------------------------------------
def from_text(text: str, *, kind: str = "paste", label: str = "") -> ReviewInput:
    text = text or ""
    if error := too_big("The diff", len(text.encode("utf-8", "replace"))):
        raise error
    return ReviewInput(kind=kind, label=label or "Pasted diff", diff_text=text)


def from_bytes(data: bytes, *, name: str, kind: str = "upload") -> ReviewInput:
    if error := too_big(name, len(data)):
        raise error
    text, had_invalid = diffs.decode_input(data)
    inp = ReviewInput(kind=kind, label=name, diff_text=text)
    if had_invalid:
        inp.coverage.append({
            "path": name, "reason": "not_utf8", "reviewed": True,
            "detail": "Some bytes were not valid UTF-8; they were replaced with � and the rest "
                      "was reviewed."})
    return inp


def from_upload(upload) -> ReviewInput:
    name = (upload.name or "upload").rsplit("/", 1)[-1][:200]
    if not name.lower().endswith(UPLOAD_SUFFIXES):
        raise InputError(f"Upload a .diff or .patch file (got {name!r}).")
    if error := too_big(name, upload.size):
        raise error
    return from_bytes(upload.read(), name=name)


def _from_source(src: sources.Source) -> ReviewInput:
    inp = ReviewInput(kind=src.kind, label=src.label, diff_text=src.diff_text,
                      contents=src.contents, meta=src.meta)
    if src.meta.get("truncated"):
        n = src.meta.get("truncated_files")
        inp.coverage.append({
            "path": "(rest of the change)", "reason": "over_byte_limit", "reviewed": False,
            "detail": f"The change is larger than the fetch limit; {n or 'some'} file(s) at the "
                      "end were not fetched."})
    return inp


def from_git(repo: str, rng: str) -> ReviewInput:
    try:
        return _from_source(git.git_range(
            repo, rng, roots=settings.QUORUM_REPO_ROOTS,
            max_bytes=settings.QUORUM_REVIEW_MAX_UPLOAD_BYTES,
            max_files=settings.QUORUM_REVIEW_MAX_FILES))
    except sources.SourceError as exc:
        raise InputError(str(exc)) from None


def from_github(url: str) -> ReviewInput:
    # Imported here: its HTTP client (httpx) is a tenth of a second of every command's start.
    from .sources import github

    try:
        return _from_source(github.github_pr(
            url, token=settings.GITHUB_TOKEN or None, api_url=settings.QUORUM_GITHUB_API_URL,
            max_bytes=settings.QUORUM_REVIEW_MAX_UPLOAD_BYTES,
            max_files=settings.QUORUM_REVIEW_MAX_FILES))
    except sources.SourceError as exc:
        raise InputError(str(exc)) from None


REASON_TEXT = {
    "binary": "binary", "deleted": "deleted", "generated": "generated",
    "rename_only": "renamed without changes", "mode_only": "only the file mode changed",
    "unreadable": "could not be read", "over_file_limit": "over the file limit",
    "over_byte_limit": "over the size limit", "clipped": "clipped", "not_utf8": "not UTF-8",
    "nul_bytes": "NUL bytes replaced",
    "model_only": "reviewed by the models only", "analyzers_only": "checked by the analyzers only",
    "imported": "reported on by imported analyzers (SARIF)",
    "not_examined": "not examined by any analyzer or model",
    "full_round": "reviewed in full instead of the new commits alone",
}


def replace_nul(inp: ReviewInput) -> None:
    """NUL characters become U+FFFD, and the coverage says so. A diff of text has none, but a
    file made with ``git diff --text`` or cut from a binary does; PostgreSQL stores neither
    the raw diff nor its per-file JSON with one in it, and the analyzers and the models read
    the replaced text, so the review is of a changed text and cannot pass as a full one."""
    texts = [inp.diff_text, *(t for t in (inp.contents or {}).values() if t)]
    count = sum(t.count("\x00") for t in texts)
    if not count:
        return
    inp.diff_text = inp.diff_text.replace("\x00", "\ufffd")
    inp.contents = {path: text.replace("\x00", "\ufffd") if text else text
                    for path, text in (inp.contents or {}).items()}
    inp.coverage.append({
        "path": inp.label or "the diff", "reason": "nul_bytes", "reviewed": True,
        "detail": f"The diff{' and its files' if inp.contents else ''} held {count:,} NUL "
                  f"byte{'s' if count != 1 else ''}; each was replaced with \ufffd and the "
                  "rest was reviewed."})


def prepare(inp: ReviewInput) -> diffs.Prepared:
    """Parse the input within the limits. Raises InputError when nothing can be reviewed."""
    replace_nul(inp)
    try:
        prepared = diffs.prepare(inp.diff_text, contents=inp.contents or None, limits=limits())
    except diffs.DiffError as exc:
        raise InputError(str(exc)) from None
    prepared.coverage = inp.coverage + prepared.coverage
    if inp.kind == "paste" and inp.label == "Pasted diff" and prepared.files:
        # Name a pasted change by what it touches, so reviews can be told apart and found.
        first, more = prepared.files[0]["path"], prepared.total_files - 1
        inp.label = f"Pasted diff: {first}" + (f" and {more} more" if more else "")
    if not prepared.files:
        reasons: dict[str, int] = {}
        for c in prepared.coverage:
            if not c.get("reviewed"):
                reasons[c["reason"]] = reasons.get(c["reason"], 0) + 1
        why = ", ".join(f"{n} {REASON_TEXT.get(r, r)}" for r, n in reasons.items())
        raise InputError(f"Nothing to review: none of the {prepared.total_files} file(s) in this "
                         f"diff has reviewable changes ({why or 'no changes'}).")
    return prepared


# --- the daily limits ---------------------------------------------------------------------------
def _today_start() -> dt.datetime:
    now = timezone.localtime()
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def daily_usage() -> dict:
    """Reviews started today and their spend, all users together (the caps guard the
    installation's money). ``limit`` and ``cost_cap`` are None when that cap is off."""
    today = Review.objects.filter(created_at__gte=_today_start())
    agg = Run.objects.filter(review__in=today).aggregate(spend=Sum("cost_usd"), n=Count("id"))
    limit = settings.QUORUM_REVIEW_DAILY_LIMIT if settings.QUORUM_REVIEW_DAILY_LIMIT > 0 else None
    cap = settings.QUORUM_REVIEW_DAILY_MAX_COST_USD
    cost_cap = Decimal(str(cap)) if cap > 0 else None
    count, spend = agg["n"] or 0, agg["spend"] or Decimal(0)
    return {"count": count, "limit": limit, "spend": spend, "cost_cap": cost_cap,
            "remaining": None if limit is None else max(0, limit - count),
            "reached": limit is not None and count >= limit,
            "cost_reached": cost_cap is not None and spend >= cost_cap}


def is_priced(models: dict[str, str]) -> bool:
    """Whether a review with these models can cost money (only the offline model is free)."""
    return not all(is_offline(m) for m in models.values())


def check_daily_limits(models: dict[str, str]) -> None:
    """Raise DailyLimitReached when today's caps refuse a review with these models."""
    usage = daily_usage()
    if usage["reached"]:
        raise DailyLimitReached(
            f"The daily limit of {usage['limit']} reviews is reached. New reviews can start "
            "tomorrow, or raise QUORUM_REVIEW_DAILY_LIMIT (0 turns this count limit off).")
    if usage["cost_reached"] and is_priced(models):
        raise DailyLimitReached(
            f"Reviews have spent ${usage['spend']:.2f} today, which reaches the daily cap of "
            f"${usage['cost_cap']:.2f}. Reviews with the offline model can still start; priced "
            "ones can start tomorrow, or raise QUORUM_REVIEW_DAILY_MAX_COST_USD.")


def default_models() -> dict[str, str]:
    return {role: settings.QUORUM_ROLE_MODELS[role] for role in ROLES}


def start_review(user, inp: ReviewInput, prepared: diffs.Prepared, *,
                 models: dict[str, str] | None = None, min_confidence: float | None = None,
                 max_cost_usd: Decimal | None = None, options: dict | None = None,
                 enqueue: bool = True, connection=None, title: str = "",
                 remembered: bool = True, team=None) -> Run:
    """Create the run and its review together, or nothing (a daily cap reached, or an error).
    ``options`` may set other pattern options (``pipeline.pattern.DEFAULTS``). The owner's
    active memories that apply to the files (for ``connection``'s repository and for every
    review) go in ``options["memories"]`` (none with ``remembered=False``), the active review
    rules in ``options["review_rules"]`` (unless ``options`` sets ``review_rules`` already,
    e.g. ``[]`` for none). ``title`` names the run and the review in the history when it
    should differ from the input's label, which is what the models read (a calibration case
    is named there, never to its reviewers)."""
    models = {**default_models(), **(models or {})}
    files_for_page = [{k: v for k, v in f.items() if k != "content"} for f in prepared.files]
    options = {
        "input": {"label": inp.label, "files": prepared.files, "coverage": prepared.coverage,
                  "total_files": prepared.total_files},
        "min_confidence": settings.QUORUM_REVIEW_MIN_CONFIDENCE if min_confidence is None
        else float(min_confidence),
        "reviewer_timeout": settings.QUORUM_REVIEW_TIMEOUT,
        # the offline model reads no code, so its answers examine no file (see coverage.py)
        "offline_roles": sorted(r for r, m in models.items() if r in ROLES and is_offline(m)),
        "fixes": fix_config.options_for(inp.kind, inp.meta),  # issue 16: proving fixes
        **(options or {}),
    }
    if remembered and (applied := memories.for_review(user, connection,
                                                       [f["path"] for f in prepared.files])):
        options["memories"] = applied
    if "review_rules" not in options:
        paths = [f["path"] for f in prepared.files]
        if checked := review_rules.for_review(user, connection, paths):
            options["review_rules"] = checked
    with transaction.atomic():
        check_daily_limits(models)
        run = engine.create_run(
            user, PATTERN, title or inp.label, options=options, models=models,
            max_cost_usd=max_cost_usd or Decimal(str(settings.QUORUM_REVIEW_MAX_COST_USD)),
            max_tokens=settings.QUORUM_REVIEW_MAX_TOKENS, enqueue=enqueue,
            # A team's connection makes a team's review (issue 35).
            team=team if team is not None else getattr(connection, "team", None))
        Review.objects.create(
            run=run, owner=user, source_kind=inp.kind, source_label=(title or inp.label)[:300],
            source_meta=inp.meta, diff_text=inp.diff_text, files=files_for_page,
            coverage=prepared.coverage, total_files=prepared.total_files)
    return run


def fork_review(parent: Run, fork: Run, checkpoint) -> None:
    """The review of a fork of a code review (issue 33; the pattern's ``on_fork``, called in
    the fork's creation transaction): the input as ``start_review`` stored it (source, diff,
    files, the pull request and round it belongs to), what the stages before the fork point
    found (the reviewers' outcome; the findings and the proposed verdict once the synthesis
    made them, every finding pending again: a fork is a new triage), and nothing a person or
    the pull request flow did after that: no verdict, triage history, publication or commit
    status. Findings a fork's own synthesis makes are written by it, as for any review."""
    source = Review.objects.get(run_id=parent.pk)
    state = fork.state or {}
    synthesized = bool(state.get("result"))
    review = Review.objects.create(
        run=fork, owner=fork.owner, source_kind=source.source_kind,
        source_label=source.source_label, source_meta=source.source_meta,
        diff_text=source.diff_text, files=source.files,
        coverage=state.get("coverage", source.coverage), total_files=source.total_files,
        reviewers=state.get("reviewers") or {},
        proposed_verdict=source.proposed_verdict if synthesized else "",
        rule_verdict=source.rule_verdict if synthesized else "",
        summary=source.summary if synthesized else "",
        notes=source.notes if synthesized else [],
        counts=source.counts if synthesized else {},
        pull_request_id=source.pull_request_id, pr_round=source.pr_round,
        previous_id=source.previous_id, base_sha=source.base_sha, from_sha=source.from_sha,
        head_sha=source.head_sha, repo_config=source.repo_config,
        config_notes=source.config_notes)
    if not synthesized:
        return
    rows = list(source.findings.all())
    for row in rows:
        row.pk = None
        row.review = review
        row.decision = Finding.Decision.PENDING
        row.comment, row.reject_reason = "", ""
        row.decided_by, row.decided_at = None, None
    Finding.objects.bulk_create(rows)


# --- costs and exports ---------------------------------------------------------------------------
def cost_breakdown(run: Run) -> dict:
    """Tokens and cost by reviewer role and by stage, from the recorded model calls."""
    rows = (ModelCall.objects.filter(run=run).values("stage", "role")
            .annotate(calls=Count("id"), prompt=Sum("prompt_tokens"),
                      completion=Sum("completion_tokens"), cost=Sum("cost_usd")))
    by_role: dict[str, dict] = {}
    by_stage: dict[str, dict] = {}
    for r in rows:
        for bucket, name in ((by_role, r["role"]), (by_stage, r["stage"])):
            b = bucket.setdefault(name, {"calls": 0, "tokens": 0, "cost_usd": Decimal(0)})
            b["calls"] += r["calls"]
            b["tokens"] += (r["prompt"] or 0) + (r["completion"] or 0)
            b["cost_usd"] += r["cost"] or Decimal(0)
    order = {"review": 0, "reflect": 1, "synthesize": 2}
    return {"by_role": {k: by_role[k] for k in sorted(by_role, key=lambda k: (
                        ROLES.index(k) if k in ROLES else 99, k))},
            "by_stage": {k: by_stage[k] for k in sorted(by_stage, key=lambda k: (
                         order.get(k, 9), k))}}


def _reported_rules(run: Run) -> dict:
    """(file, rule) and rule -> the analyzer result of the run's analysis that reported it."""
    reported: dict = {}
    for e in ((run.state or {}).get("analysis") or {}).get("evidence") or ():
        if isinstance(e, dict) and e.get("rule"):
            reported.setdefault((e.get("file"), e["rule"]), e)
            reported.setdefault(e["rule"], e)
    return reported


def _evidence(f: Finding, reported: dict) -> list[dict]:
    """The rules a finding rests on, with the analyzer that reported each and its help page.
    A rule no analyzer reported in this run was named by a model: tool "model". Analyzer
    messages are left out (they can quote the code, secrets included)."""
    out = []
    for rule in f.rules:
        e = reported.get((f.file, rule)) or reported.get(rule)
        out.append({"tool": e.get("tool") or "analyzer", "rule": rule, "url": e.get("url") or ""}
                   if e else {"tool": "model", "rule": rule, "url": ""})
    return out


def _finding_dict(f: Finding, reported: dict) -> dict:
    return {"key": f.key, "category": f.category, "severity": f.severity, "file": f.file,
            "line": f.line, "end_line": f.end_line, "title": f.title,
            "description": f.description, "suggestion": f.suggestion,
            "confidence": f.confidence, "reviewers": f.reviewers or [f.reviewer],
            "evidence": _evidence(f, reported),
            "decision": f.decision,
            "decided_by": f.decided_by.get_username() if f.decided_by else None,
            "decided_at": f.decided_at.isoformat() if f.decided_at else None,
            "comment": f.comment, "history": list(f.history or []),
            "drop_reason": f.drop_reason, "duplicate_of": f.duplicate_of,
            "locations": list(f.locations or [])}


def export_dict(review: Review) -> dict:
    """The review in the shape ``pipeline.export`` documents."""
    run = review.run
    findings = list(review.findings.select_related("decided_by"))
    costs = cost_breakdown(run)["by_role"]
    reported = _reported_rules(run)
    reviewers = {}
    for name, r in (review.reviewers or {}).items():
        c = costs.get(name, {})
        reviewers[name] = {"status": r.get("status"), "error": r.get("error", ""),
                           "model": run.models_used.get(name), "findings": r.get("findings", 0),
                           "tokens": c.get("tokens", 0), "cost_usd": float(c.get("cost_usd", 0))}
    return {
        "id": run.pk, "title": review.source_label,
        "tool_version": reviews_app.__version__,
        "source": {"kind": review.source_kind, "label": review.source_label},
        "created_at": review.created_at.isoformat(), "status": run.status,
        "offline": run.offline,
        "verdict": {"proposed": review.proposed_verdict or None,
                    "final": review.final_verdict or None,
                    "decided_by": (review.verdict_decided_by.get_username()
                                   if review.verdict_decided_by else None),
                    "decided_at": (review.verdict_decided_at.isoformat()
                                   if review.verdict_decided_at else None),
                    "version": review.triage_version if review.final_verdict else None,
                    "override_reason": review.verdict_reason or "",
                    "by_rules": review.rule_verdict or None},
        "summary": review.summary, "notes": list(review.notes or []),
        # What the analysis record says ran (the exports name these, not a fixed list).
        "analyzers": analyze.ran((run.state or {}).get("analysis") or {}),
        "findings": [_finding_dict(f, reported) for f in findings if f.kept],
        "dropped": [_finding_dict(f, reported) for f in findings if not f.kept],
        "coverage": review.coverage,
        "reviewers": reviewers,
        "totals": {"tokens": run.total_tokens, "cost_usd": float(run.cost_usd)},
    }
