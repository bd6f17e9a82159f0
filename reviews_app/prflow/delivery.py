"""Acting on one webhook delivery: from "a pull request changed" to a review round started (or
ended, or skipped), saying on the delivery what happened.

The delivery is claimed first (under its row lock: still queued and not being worked on), so
a redelivered task finds it claimed or done and starts nothing. The pull request's row is
locked while a round is decided and started, so two deliveries for one pull request take
turns: the second finds the head reviewed already. A retryable provider error leaves the
delivery queued for the task's next attempt (nothing saved); any other error fails it with
the plain message.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agents_app import engine
from agents_app.models import TERMINAL, Run
from agents_app.models import Status as RunStatus

from .. import services
from ..hosting.base import HostClient, HostError, PullInfo
from ..models import Connection, PullRequest, Review, WebhookDelivery
from . import inputs

log = logging.getLogger("quorum.prflow")

Status = WebhookDelivery.Status
WORKING = "working since "
STALE_CLAIM = dt.timedelta(minutes=30)  # a worker that died mid-delivery: claimable again
START_EVENTS = ("opened", "synchronize", "reopened", "command")
MAX_ATTEMPTS = 5
MAX_WAIT = 3600.0


@dataclass
class Outcome:
    status: str            # done | failed | retry | skipped
    detail: str
    retry_in: float | None = None
    run_id: int | None = None


def backoff(attempt: int, retry_after: float | None) -> float:
    """Seconds before the next attempt: what the provider asked for, else doubling."""
    if retry_after is not None and retry_after >= 0:
        return min(float(retry_after), MAX_WAIT)
    return min(settings.QUORUM_PR_RETRY_SECONDS * 2 ** attempt, MAX_WAIT)


# --- the delivery's row -------------------------------------------------------------------------
def _claim(pk: int) -> WebhookDelivery | None:
    with transaction.atomic():
        d = (WebhookDelivery.objects.select_for_update().select_related("connection")
             .filter(pk=pk).first())
        if d is None or d.status != Status.QUEUED:
            return None
        if d.detail.startswith(WORKING):
            try:
                since = dt.datetime.fromisoformat(d.detail.removeprefix(WORKING))
            except ValueError:
                since = None
            if since is not None and timezone.now() - since < STALE_CLAIM:
                return None
        d.detail = WORKING + timezone.now().isoformat()
        d.save(update_fields=["detail"])
        return d


def _finish(pk: int, status: str, detail: str, pr: PullRequest | None = None) -> None:
    fields = {"status": status, "detail": detail[:4000]}
    if pr is not None:
        fields["pull_request"] = pr
    WebhookDelivery.objects.filter(pk=pk).update(**fields)


def handle_delivery(delivery_pk: int, *, attempt: int = 0, max_attempts: int = MAX_ATTEMPTS,
                    enqueue: bool = True) -> Outcome:
    """Act on the delivery once; safe to call again (it then does nothing)."""
    d = _claim(delivery_pk)
    if d is None:
        return Outcome("skipped", "The delivery was handled already, or is being handled.")
    try:
        outcome, pr = _handle(d, enqueue)
    except HostError as exc:
        if exc.retryable and attempt < max_attempts:
            wait = backoff(attempt, exc.retry_after)
            detail = (f"The provider did not answer as hoped ({exc}); trying again in "
                      f"{wait:.0f} s (attempt {attempt + 2} of {max_attempts + 1}).")
            _finish(d.pk, Status.QUEUED, detail)
            return Outcome("retry", detail, retry_in=wait)
        outcome, pr = Outcome("failed", f"The provider refused: {exc}"), None
    except services.DailyLimitReached as exc:
        outcome, pr = Outcome("failed", str(exc)), None
    except Exception:
        log.exception("webhook delivery %s failed", d.pk)
        outcome, pr = Outcome("failed", "An internal error stopped this delivery; the server "
                                        "log has the details."), None
    _finish(d.pk, Status.FAILED if outcome.status == "failed" else Status.DONE,
            outcome.detail, pr)
    return outcome


# --- acting on it --------------------------------------------------------------------------------
def _client(conn: Connection) -> HostClient:
    from reviews_app import hosting
    from reviews_app.connections.secrets import repo_ref

    return hosting.client_for(repo_ref(conn))


def _handle(d: WebhookDelivery, enqueue: bool) -> tuple[Outcome, PullRequest | None]:
    conn = d.connection
    if not conn.active:
        return Outcome("done", "The connection is turned off: nothing was done."), None
    if not d.number:
        return Outcome("failed", "The delivery names no pull request."), None
    if d.event not in (*START_EVENTS, "closed"):
        return Outcome("done", f"The event {d.event[:50]!r} is not acted on."), None
    try:
        client = _client(conn)
    except ValueError as exc:  # e.g. the token's environment variable is not set
        return Outcome("failed", f"The connection cannot be used: {exc}"), None
    try:
        pull = client.pull(d.number)
        if pull.state != "open":
            with transaction.atomic():
                pr = _upsert(conn, pull)
                n = _cancel_running(pr, conn, "the pull request was " + pull.state)
            note = _closed_status(client, pr) if conn.status_comment else ""
            return Outcome("done", f"Pull request #{pull.number} is {pull.state}: "
                                   f"{n} running review(s) cancelled.{note}"), pr
        if d.event == "closed":  # reopened since: the reopened delivery starts the round
            return Outcome("done", f"Pull request #{pull.number} is open again: nothing to "
                                   "end."), None
        return _start_round(d, conn, client, pull, enqueue)
    finally:
        client.close()


def _upsert(conn: Connection, pull: PullInfo) -> PullRequest:
    """The pull request's row, created or brought up to date, locked until commit."""
    fields = {"title": pull.title[:300], "url": pull.url[:500] if _http(pull.url) else "",
              "author": pull.author[:150], "state": pull.state, "base_ref": pull.base_ref[:250],
              "base_sha": pull.base_sha[:64], "head_ref": pull.head_ref[:250],
              "head_sha": pull.head_sha[:64]}
    PullRequest.objects.get_or_create(connection=conn, number=pull.number, defaults=fields)
    pr = PullRequest.objects.select_for_update().get(connection=conn, number=pull.number)
    for k, v in fields.items():
        setattr(pr, k, v)
    pr.save()
    return pr


def _http(url: str) -> bool:
    return isinstance(url, str) and url.lower().startswith(("https://", "http://"))


def _cancel_running(pr: PullRequest, conn: Connection, why: str,
                    keep: int | None = None) -> int:
    """Cancel the pull request's reviews still running (before their synthesis): those
    waiting at triage are left to the person."""
    runs = (Run.objects.filter(review__pull_request=pr, review__proposed_verdict="")
            .exclude(status__in=TERMINAL))
    if keep is not None:
        runs = runs.exclude(pk=keep)
    n = 0
    for run in runs:
        engine.cancel(run, conn.owner)
        n += 1
        log.info("review %s of %s cancelled: %s", run.pk, pr, why)
    return n


def _reviewed(pr: PullRequest, head: str) -> Review | None:
    """A review of this head that did not fail or get cancelled."""
    return (Review.objects.filter(pull_request=pr, head_sha=head)
            .exclude(run__status__in=[RunStatus.FAILED, RunStatus.CANCELLED])
            .order_by("-id").first())


def _start_round(d: WebhookDelivery, conn: Connection, client: HostClient, pull: PullInfo,
                 enqueue: bool) -> tuple[Outcome, PullRequest | None]:
    from reviews_app.hosting.fetch import pull_input

    head = pull.head_sha
    cfg, notes = inputs.read_config(client, pull.base_sha)
    with transaction.atomic():
        pr = _upsert(conn, pull)
        done = _reviewed(pr, head)
        if done is not None and d.event != "command":
            return Outcome("done", f"{head[:12]} was reviewed already (review {done.run_id})."), pr
        previous = (Review.objects.filter(pull_request=pr).exclude(proposed_verdict="")
                    .select_related("run").order_by("-id").first())
        from_sha = previous.head_sha if previous and previous.head_sha not in ("", head) else ""
        round_no = (pr.reviews.aggregate(n=Max("pr_round"))["n"] or 0) + 1
        services.check_daily_limits({**services.default_models(), **cfg.models})
        got = pull_input(client, pull.number, head_sha=head, from_sha=from_sha or None,
                         max_bytes=settings.QUORUM_REVIEW_MAX_UPLOAD_BYTES,
                         max_files=settings.QUORUM_REVIEW_MAX_FILES,
                         max_file_bytes=settings.QUORUM_PR_MAX_FILE_BYTES)
        diff_text, contents, coverage = inputs.apply_paths(cfg, got.diff_text, got.contents,
                                                           list(got.coverage))
        if from_sha:
            coverage.append(inputs.earlier_round(previous, from_sha, head, round_no))
        title = " ".join(pull.title.split())
        inp = services.ReviewInput(
            kind=Review.Source.PULL_REQUEST, label=f"{conn.repository}#{pull.number}: {title}"
            [:300], diff_text=diff_text, contents=contents, coverage=coverage,
            meta={"provider": conn.provider, "repository": conn.repository,
                  "number": pull.number, "url": pr.url, "head_sha": head, "from_sha": from_sha})
        try:
            if not diff_text.strip():
                raise services.InputError(inputs.nothing_left(got.diff_text, coverage))
            prepared = services.prepare(inp)
        except services.InputError as exc:
            pr.last_reviewed_sha = head
            pr.save(update_fields=["last_reviewed_sha", "updated_at"])
            return Outcome("done", f"Nothing reviewed at {head[:12]}: {exc}"), pr
        inputs.apply_modes(cfg, prepared.files)
        options = {"suppressed": inputs.suppressed(conn),
                   "carried": inputs.carried(previous),
                   "rules": cfg.rules_option(),
                   "pull_request": {"number": pull.number, "round": round_no,
                                    "head_sha": head, "from_sha": from_sha,
                                    "previous_round": previous.pr_round if previous else None}}
        run = services.start_review(conn.owner, inp, prepared, models=cfg.models or None,
                                    options=options, connection=conn, enqueue=enqueue)
        Review.objects.filter(run=run).update(
            pull_request=pr, pr_round=round_no, previous=previous, base_sha=pull.base_sha[:64],
            from_sha=from_sha, head_sha=head[:64], repo_config=cfg.stored(),
            config_notes=notes)
        _cancel_running(pr, conn, f"superseded by round {round_no}", keep=run.pk)
        pr.last_reviewed_sha = head
        pr.save(update_fields=["last_reviewed_sha", "updated_at"])
    kind = f"incremental from {from_sha[:12]}" if from_sha else "full"
    detail = f"Round {round_no} ({kind}) of #{pull.number} at {head[:12]}: review {run.pk}."
    policy = cfg.publish.policy or conn.publish_policy
    if conn.status_comment and policy != Connection.Policy.NEVER:
        # Under "never" nothing is written on the pull request, a status comment included
        # (it would also overwrite the last published summary with a promise of another).
        detail += _status_comment(client, pr, round_no, from_sha, head, policy)
    return Outcome("done", detail, run_id=run.pk), pr


# Marks the summary comment while it only says a review is running, so that closing the pull
# request before the review is published can say so instead of leaving "is reviewing" behind.
STATUS_MARKER = "<!-- quorum:status -->"


def _closed_status(client: HostClient, pr: PullRequest) -> str:
    """The pull request closed while the summary comment still announced a review: say the
    review stopped. A published summary is left as it is."""
    from ..hosting.summary import upsert_summary

    if not pr.summary_comment_id:
        return ""
    try:
        mine = [c for c in client.comments(pr.number) if c.id == pr.summary_comment_id]
        if not mine or STATUS_MARKER not in mine[0].body:
            return ""
        upsert_summary(client, pr.number, pr.summary_comment_id,
                       f"{STATUS_MARKER}\n**Quorum** stopped: the pull request was {pr.state} "
                       "before its review was published. Nothing more is posted here unless "
                       "it is reopened.")
    except HostError as exc:
        return f" The status comment could not be updated ({exc})."
    return " The status comment says the review stopped."


def _status_comment(client: HostClient, pr: PullRequest, round_no: int, from_sha: str,
                    head: str, policy: str) -> str:
    """Post (or update) the one summary comment saying a review runs; the summary replaces
    it. A failure here does not stop the review."""
    from ..hosting.summary import upsert_summary

    what = (f"the commits from `{from_sha[:7]}` to `{head[:7]}`" if from_sha
            else f"the pull request at `{head[:7]}`")
    then = ("A person triages the findings before any is published here"
            if policy == Connection.Policy.AFTER_TRIAGE else
            "The findings above the repository's severity and confidence thresholds are "
            "published here when it is done")
    body = (f"{STATUS_MARKER}\n**Quorum** is reviewing {what} (round {round_no}). {then}; "
            "this comment becomes the review's summary.")
    try:
        cid = upsert_summary(client, pr.number, pr.summary_comment_id, body)
    except HostError as exc:
        return f" The status comment could not be posted ({exc})."
    PullRequest.objects.filter(pk=pr.pk).update(summary_comment_id=str(cid)[:64])
    return ""
