"""Quorum's status on a pull request's head commit, for branch protection to require.

Each round makes (or takes over) the ``CommitStatus`` row of its head. What the status says
is worked out from the review when the sync task runs (``report``), so a late task never
posts an old state: queued when the round starts, in progress while the reviewers work and
while the findings wait for triage, and final once a person finalises the verdict. Only a
finalised approval of a complete review is a success; an incomplete review, a verdict that
is not an approval, a failed review and a cancelled (superseded) one never are.

A change of the review (``touch``) bumps the row's version and sends the task once the
transaction commits. The task claims the row with a conditional update, posts outside any
transaction, records the version it posted, and goes again when the version moved on
meanwhile. Provider errors that may pass are retried with backoff (the provider's
Retry-After wins, within a floor and a cap); others are shown on the review's page.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from agents_app.models import Status as RunStatus
from config import send_task

from ..hosting import render
from ..hosting.base import HostError, StatusReport, retry_wait
from ..models import CommitStatus, Connection, PullRequest, Review

log = logging.getLogger("quorum.prflow")
TASK = "reviews_app.tasks.sync_status"
State = CommitStatus.State
STALE_CLAIM = timedelta(minutes=5)
NAME = "Quorum"
# Our state → what the provider clients take (base.StatusReport.state).
REPORTED = {State.QUEUED: "queued", State.REVIEWING: "in_progress", State.TRIAGE: "in_progress",
            State.SUCCESS: "success", State.FAILURE: "failure", State.CANCELLED: "cancelled",
            State.ERROR: "error"}


def enabled(conn: Connection, review: Review | None = None) -> bool:
    """Whether statuses are written for this connection (and the policy of ``review``): not
    under "never", which writes nothing on the pull request."""
    from .publishing import policy

    if not conn.commit_status:
        return False
    chosen = policy.policy_of(review)[0] if review is not None else conn.publish_policy
    return chosen != Connection.Policy.NEVER


# --- changes (inside the caller's transaction) --------------------------------------------------
def send(pk: int, countdown: float | None = None) -> None:
    try:
        send_task(TASK, (pk,), countdown=countdown, ignore_result=True)
    except Exception as exc:  # broker away: the sweep sends it again
        log.warning("could not enqueue status %s (sent again later): %s", pk, type(exc).__name__)


def start(pr: PullRequest, head: str, review: Review) -> None:
    """A round started on ``head``: its status is the new review's, queued."""
    cs, created = CommitStatus.objects.get_or_create(pull_request=pr, head_sha=head[:64],
                                                     defaults={"review": review})
    if not created:
        CommitStatus.objects.filter(pk=cs.pk).update(
            review=review, version=F("version") + 1, attempts=0, next_attempt_at=None,
            last_error="")
    transaction.on_commit(lambda: send(cs.pk))


def touch(review: Review | int) -> None:
    """The review's state changed (reviewers done, synthesis, a verdict, a reopen, its end):
    its status is worked out and posted again. A fork's review (issue 33) has no status of
    its own and never moves the pull request's."""
    pk = review.pk if isinstance(review, Review) else review
    rows = list(CommitStatus.objects.filter(review_id=pk, review__run__forked_from__isnull=True)
                .values_list("pk", flat=True))
    if not rows:
        return
    CommitStatus.objects.filter(pk__in=rows).update(
        version=F("version") + 1, attempts=0, next_attempt_at=None, last_error="")
    for row in rows:
        transaction.on_commit(lambda row=row: send(row))


def after_end(run_id: int) -> None:
    """The code review's terminal hook: a cancelled or failed review says so."""
    review = Review.objects.filter(run_id=run_id).values_list("pk", flat=True).first()
    if review is not None:
        with transaction.atomic():
            touch(review)


# --- what the status says ----------------------------------------------------------------------
def report(cs: CommitStatus) -> tuple[str, StatusReport] | None:
    """(our state, what to post) for the status's review now; None when nothing is to be
    posted (no review, or statuses are off for it)."""
    from .publishing import content

    review = cs.review
    if review is None or review.pull_request is None or review.run.forked_from_id is not None:
        return None  # no review, or a fork's (which never sets the pull request's status)
    if not enabled(review.pull_request.connection, review):
        return None
    run = review.run
    url = content.quorum_url(review)
    rnd = f"round {review.pr_round}" if review.pr_round else "the review"
    final = review.final_verdict
    words = render.VERDICT_WORDS.get(final or review.proposed_verdict, "")
    if final:
        who = review.verdict_decided_by.get_username() if review.verdict_decided_by else "a person"
        reasons = render.partial_reasons(review.coverage, review.reviewers)
        if final == "approve" and not reasons:
            state, title, text = State.SUCCESS, "Approved", f"Approved by {who} ({rnd})."
        elif final == "approve":
            state, title = State.FAILURE, "Incomplete review"
            text = (f"Approved by {who}, but the review is incomplete ({'; '.join(reasons)}): "
                    "an incomplete review never passes.")
        else:
            state, title, text = State.FAILURE, words, f"{words}, decided by {who} ({rnd})."
    elif run.status == RunStatus.CANCELLED:
        state, title, text = State.CANCELLED, "Cancelled", f"{rnd.capitalize()} was cancelled " \
                                                          "(superseded or stopped)."
    elif run.status in (RunStatus.FAILED, RunStatus.BUDGET_EXCEEDED):
        state, title = State.ERROR, "Review failed"
        text = f"{rnd.capitalize()} did not finish ({run.get_status_display().lower()})."
    elif review.proposed_verdict:
        state, title = State.TRIAGE, "Waiting for triage"
        text = (f"Proposed: {words}. A person triages the findings in Quorum; the status "
                "turns green only when they approve.")
    elif run.status == RunStatus.QUEUED:
        state, title, text = State.QUEUED, "Queued", f"{rnd.capitalize()} is queued."
    else:
        state, title, text = State.REVIEWING, "Reviewing", f"{rnd.capitalize()} is running."
    summary = text
    if final:
        summary = f"{text}\n\n{_summary(review, cs.head_sha)}"
    elif url:
        summary = f"{text}\n\n[Open the review in Quorum]({url})"
    return state, StatusReport(state=REPORTED[state], title=title, description=text[:140],
                               summary=summary, target_url=url, name=NAME,
                               check_run_id=cs.check_run_id)


def _summary(review: Review, head: str) -> str:
    """The finalised review's summary, as published (the accepted findings)."""
    from .publishing import content, policy

    accepted = [content.as_dict(f) for f in policy.selected(review, "triage")]
    reasons = render.partial_reasons(review.coverage, review.reviewers)
    _, note = render.review_event(review.final_verdict, reasons)
    return render.summary_body(content.summary(review, triaged=True, published=accepted,
                                               not_inline=[], reasons=reasons, event_note=note,
                                               head=head))


# --- the sync task ---------------------------------------------------------------------------
def _claim(pk: int) -> bool:
    now = timezone.now()
    return CommitStatus.objects.filter(pk=pk, synced_version__lt=F("version")).filter(
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - STALE_CLAIM)).filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now + timedelta(seconds=2))
    ).update(claimed_at=now, attempts=F("attempts") + 1) == 1


def sync(pk: int) -> str:
    """Post the status of row ``pk`` if it changed since it was last posted."""
    if not _claim(pk):
        return "skipped"
    cs = (CommitStatus.objects.select_related(
        "review__run", "review__verdict_decided_by", "review__pull_request__connection",
        "pull_request__connection__installation__app").get(pk=pk))
    version = cs.version
    done = {"claimed_at": None, "synced_version": version}
    wanted = report(cs)
    if wanted is None:
        CommitStatus.objects.filter(pk=pk).update(**done)
        return "off"
    state, rep = wanted
    if (cs.synced_state, cs.description, cs.summary) == (state, rep.description[:300],
                                                         rep.summary[:20000]):
        CommitStatus.objects.filter(pk=pk).update(**done)
        return "unchanged"  # what the provider shows already
    from .delivery import client_of

    try:
        client = client_of(cs.pull_request.connection)
        try:
            run_id = client.report_status(cs.head_sha, rep)
        finally:
            client.close()
    except (HostError, ValueError) as exc:
        return _failed(cs, exc)
    CommitStatus.objects.filter(pk=pk).update(
        **done, state=state, synced_state=state, description=rep.description[:300],
        summary=rep.summary[:20000], check_run_id=run_id or cs.check_run_id, attempts=0,
        last_error="", next_attempt_at=None)
    if CommitStatus.objects.filter(pk=pk, version__gt=version).exists():
        send(pk)  # the review moved on while this was posted
    return state


def _failed(cs: CommitStatus, exc: Exception) -> str:
    retryable = isinstance(exc, HostError) and exc.retryable
    message = str(exc)[:1000]
    if not retryable or cs.attempts >= settings.QUORUM_PUBLISH_MAX_ATTEMPTS:
        CommitStatus.objects.filter(pk=cs.pk).update(claimed_at=None, last_error=message,
                                                     next_attempt_at=None)
        log.warning("status %s not posted: %s", cs.pk, message)
        return "failed"
    wait = retry_wait(cs.attempts - 1, getattr(exc, "retry_after", None),
                      settings.QUORUM_PUBLISH_RETRY_BASE_SECONDS)
    CommitStatus.objects.filter(pk=cs.pk).update(
        claimed_at=None, last_error=message,
        next_attempt_at=timezone.now() + timedelta(seconds=wait))
    send(cs.pk, countdown=wait)
    return "retrying"


def resend_due() -> list[int]:
    """Statuses whose task may have been lost: behind their version, not claimed (or claimed
    long ago), due, and not given up on."""
    now = timezone.now()
    due = list(CommitStatus.objects.filter(synced_version__lt=F("version"),
                                           attempts__lt=settings.QUORUM_PUBLISH_MAX_ATTEMPTS)
               .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - STALE_CLAIM))
               .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
               .filter(updated_at__lt=now - timedelta(seconds=30))
               .values_list("pk", flat=True)[:500])
    for pk in due:
        send(pk)
    return due
