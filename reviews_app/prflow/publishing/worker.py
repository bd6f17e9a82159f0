"""The publish task's work: claim the publication, post one review with the inline comments
not posted before, update the summary comment in place, record what was posted.

Safe to run twice: the claim is a conditional update (pending/retrying → publishing), and
a finding's fingerprint already in ``PublishedComment`` or in a marker on the provider is
never posted again, so a retry after a failure half-way (review posted, summary not) posts
no comment twice. Provider errors that may pass (5xx, rate limits, network) are retried
with exponential backoff (at least the provider's Retry-After), up to a maximum of
attempts; the others (401, 403, 404, 422) fail at once with the provider's plain message.
The token never reaches a log, an error or the database.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from common.secret_keys import mask

from ...hosting import render
from ...hosting.base import REVIEW_MARKER, HostError, ReviewPost, retry_wait
from ...hosting.summary import compose, upsert_summary
from ...models import PublishedComment, PullRequest, Review
from .. import account
from . import content, policy
from .dispatch import Publication, Status, announce, send_on_commit

log = logging.getLogger("quorum.publishing")
BUSY_DELAY = 15.0  # another publication of the pull request is under way: try again then


class Stop(Exception):
    """Publishing cannot go on, for a reason of ours (said in plain words); not retried."""


def _client(conn):
    """The provider's client for ``conn`` and its token (to keep it out of messages)."""
    from reviews_app import hosting
    from reviews_app.connections import secrets

    unavailable = getattr(secrets, "SecretUnavailable", None)
    try:
        ref = secrets.repo_ref(conn)
    except Exception as exc:  # no token: said plainly, not retried (someone must set it)
        if unavailable is not None and isinstance(exc, unavailable):
            raise Stop(str(exc)) from None
        raise
    return hosting.client_for(ref), ref.token or ""


def _plain(text: str, token: str) -> str:
    """A provider's message as shown and stored: never the token, nor anything that looks
    like a secret."""
    text = str(text or "")
    if token and len(token) >= 4:
        text = text.replace(token, "…")
    return mask(text)[:1000]


def claim(pk: int) -> str:
    """Take publication ``pk`` for this worker: "claimed", "busy" (another publication of the
    same pull request is being published: one at a time, so that two cannot both post a
    comment neither has seen yet) or "" (not due: done, failed, claimed, or early)."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.QUORUM_PUBLISH_LEASE_SECONDS)
    due = Q(status=Status.PENDING) | Q(status=Status.RETRYING) & (
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now + timedelta(seconds=5)))
    due |= Q(status=Status.PUBLISHING, updated_at__lt=stale)
    pr_id = (Publication.objects.filter(pk=pk)
             .values_list("review__pull_request_id", flat=True).first())
    with transaction.atomic():
        if pr_id is not None:  # the pull request's row serialises the claims on it
            PullRequest.objects.select_for_update().filter(pk=pr_id).values_list("pk").first()
            if (Publication.objects.filter(review__pull_request_id=pr_id,
                                           status=Status.PUBLISHING, updated_at__gte=stale)
                    .exclude(pk=pk).exists()):
                return "busy" if Publication.objects.filter(pk=pk).filter(due).exists() else ""
        taken = Publication.objects.filter(pk=pk).filter(due).update(
            status=Status.PUBLISHING, attempts=F("attempts") + 1, next_attempt_at=None,
            updated_at=now)
    return "claimed" if taken else ""


def run(pk: int) -> str:
    """Publish publication ``pk``; returns its status afterwards (or "skipped")."""
    taken = claim(pk)
    if taken == "busy":
        send_on_commit(pk, countdown=BUSY_DELAY)
        return "waiting"
    if not taken:
        return "skipped"
    pub = Publication.objects.select_related(
        "review__run", "review__pull_request__connection",
        "review__verdict_decided_by").get(pk=pk)
    announce(pub, f"Publishing to the pull request (attempt {pub.attempts}).")
    token = ""
    try:
        if pub.review.pull_request is None:
            raise Stop("The review is no longer linked to a pull request.")
        client, token = _client(pub.review.pull_request.connection)
        try:
            result = publish(pub, client)
        finally:
            client.close()
    except HostError as exc:
        return _failed(pub, _plain(str(exc), token), retryable=exc.retryable,
                       retry_after=exc.retry_after)
    except Stop as exc:
        return _failed(pub, str(exc), retryable=False)
    except Exception as exc:  # a bug or an unwrapped network error: retried, never shown raw
        log.warning("publication %s failed unexpectedly: %s", pk, type(exc).__name__)
        return _failed(pub, f"Unexpected error while publishing ({type(exc).__name__}).",
                       retryable=True)
    _set(pub, Status.PUBLISHED, result=result, last_error="")
    announce(pub, f"Published to the pull request: {result['comments']} new comment(s), "
                  f"{result['skipped']} already there.")
    return Status.PUBLISHED


def _set(pub: Publication, status: str, **fields) -> None:
    Publication.objects.filter(pk=pub.pk).update(status=status, updated_at=timezone.now(),
                                                 **fields)
    pub.status = status
    for k, v in fields.items():
        setattr(pub, k, v)


def _failed(pub: Publication, message: str, *, retryable: bool,
            retry_after: float | None = None) -> str:
    limit = settings.QUORUM_PUBLISH_MAX_ATTEMPTS
    if not retryable or pub.attempts >= limit:
        if retryable:
            message = f"{message} (gave up after {pub.attempts} attempts)"
        _set(pub, Status.FAILED, last_error=message, next_attempt_at=None)
        announce(pub, f"Publishing failed: {message}")
        return Status.FAILED
    # The provider's Retry-After (or rate-limit reset) wins, within a floor and a cap: a
    # limit that lifts in 5 s is tried again in 5 s, not after our own backoff.
    delay = retry_wait(pub.attempts - 1, retry_after, settings.QUORUM_PUBLISH_RETRY_BASE_SECONDS)
    with transaction.atomic():
        _set(pub, Status.RETRYING, last_error=message,
             next_attempt_at=timezone.now() + timedelta(seconds=delay))
        send_on_commit(pub.pk, countdown=delay)
        announce(pub, f"Publishing failed, trying again in {delay:.0f} s: {message}")
    return Status.RETRYING


def _ours(client, pr: PullRequest, bot: str) -> set[str]:
    """The accounts whose markers count as ours: the connection's own account when it is
    known, else the author of our summary comment (else anyone's: nothing to tell by)."""
    if bot:
        return {bot.lower()}
    if pr.summary_comment_id:
        return {c.author.lower() for c in client.comments(pr.number)
                if c.id == pr.summary_comment_id}
    return set()


def _known_fingerprints(client, pr: PullRequest, ours: set[str]) -> set[str]:
    """Fingerprints posted on this pull request: ours in the database, and the markers in the
    provider's inline comments by our account (someone else's comment cannot silence a
    finding)."""
    known = set(PublishedComment.objects.filter(pull_request=pr)
                .values_list("fingerprint", flat=True))
    for c in client.review_comments(pr.number):
        if not ours or c.author.lower() in ours:
            known |= render.fingerprints_in(c.body)
    return known


def _posted_review(client, pr: PullRequest, tag: str, ours: set[str]) -> str:
    """The id of the review this publication posted already, if the provider has it (a post
    saved but answered with an error): then it is not posted again."""
    marker = REVIEW_MARKER.format(tag)
    for r in client.reviews(pr.number):
        if marker in r.body and (not ours or r.author.lower() in ours):
            return r.id
    return ""


def _still_open(client, pub: Publication, pr: PullRequest) -> None:
    """Publishing goes to an open pull request, unless a person chose to publish to the
    closed one. The provider is asked: our row may be behind a lost "closed" delivery."""
    info = client.pull(pr.number)
    if info.state != pr.state:
        PullRequest.objects.filter(pk=pr.pk).update(state=info.state)
        pr.state = info.state
    if info.state != "open" and not pub.to_closed:
        raise Stop(f"The pull request is {info.state}: nothing was published. Publishing to "
                   "it is a choice a person makes on the review's page.")


def publish(pub: Publication, client) -> dict:
    review: Review = pub.review
    pr: PullRequest = review.pull_request
    triaged = pub.trigger in policy.TRIAGED
    if triaged and (not review.final_verdict or review.triage_version != pub.triage_version):
        raise Stop(f"Triage version {pub.triage_version} is no longer the final one (the "
                   "review was reopened): publish again once the verdict is final.")
    head = review.head_sha or pr.head_sha
    if not head:
        raise Stop("The pull request's head commit is not known.")
    _still_open(client, pub, pr)
    chosen = [content.as_dict(f) for f in policy.selected(review, pub.trigger)]
    ours = _ours(client, pr, account.learn(pr.connection, client))
    known = _known_fingerprints(client, pr, ours)
    result = dict(pub.result or {})
    tag = f"{pub.pk}"
    mine = set(PublishedComment.objects.filter(pull_request=pr, provider_id=result["review"])
               .values_list("fingerprint", flat=True)) if result.get("review") else set()
    lines = render.diff_lines(review.files, added_only=bool(review.from_sha))
    new, not_inline, skipped = [], [], 0
    for d in chosen:
        if d["fingerprint"] in known:
            skipped += d["fingerprint"] not in mine  # posted by an earlier attempt: not skipped
            continue
        known.add(d["fingerprint"])
        c = render.inline_comment(d, lines)
        if c is None:
            not_inline.append(d["fingerprint"])
        else:
            new.append((d, c))
    verdict = review.final_verdict if triaged else review.proposed_verdict
    reasons = render.partial_reasons(review.coverage, review.reviewers)
    event, note = render.review_event(verdict, reasons)
    if not result.get("review") and (new or not _stated(pub, pr, head, event)):
        body = (f"Quorum: {render.VERDICT_WORDS.get(verdict, 'Comment')}. "
                f"{len(new)} new inline comment{'s' if len(new) != 1 else ''}; the summary "
                "comment has the details." + (f" {note}" if note else "")
                + "\n\n" + REVIEW_MARKER.format(tag))
        review_id = _posted_review(client, pr, tag, ours) or client.post_review(
            pr.number, ReviewPost(commit_sha=head, body=body, event=event,
                                  comments=[c.comment for _, c in new]))
        _remember(pr, new, review_id)
        result.update({"review": str(review_id), "event": event, "commit": head,
                       "comments": len(new),
                       "suggestions": sum(1 for _, c in new if c.suggestion)})
        Publication.objects.filter(pk=pub.pk).update(result=result)  # a retry sees it
    result.setdefault("comments", 0)
    result.setdefault("suggestions", 0)
    result["skipped"] = skipped
    result["not_inline"] = len(not_inline)
    body = render.summary_body(content.summary(
        review, triaged=triaged, published=chosen, not_inline=not_inline, reasons=reasons,
        event_note=note, head=head))
    summary_id = upsert_summary(client, pr.number, pr.summary_comment_id, compose("", body),
                                bot=next(iter(ours), "") if len(ours) == 1 else "")
    PullRequest.objects.filter(pk=pr.pk).update(summary_comment_id=summary_id,
                                                summary_body=body)
    result.update({"summary_comment": summary_id, "findings": len(chosen), "event": event,
                   "pull_request": pr.url})
    return result


def _stated(pub: Publication, pr: PullRequest, head: str, event: str) -> bool:
    """Whether an earlier publication already set this review state at this commit (then a
    review without new comments would only repeat it)."""
    return Publication.objects.filter(review__pull_request=pr, status=Status.PUBLISHED,
                                       result__event=event, result__commit=head).exclude(
        pk=pub.pk).exists()


def _remember(pr: PullRequest, new: list, review_id: str) -> None:
    for d, c in new:
        try:
            with transaction.atomic():
                PublishedComment.objects.create(
                    pull_request=pr, fingerprint=c.fingerprint, provider_id=str(review_id),
                    finding_id=d.get("pk"), path=c.comment.path[:2000], line=c.comment.line,
                    suggestion=c.suggestion)
        except IntegrityError:  # posted by a concurrent run: the row exists
            pass
