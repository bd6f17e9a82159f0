"""Creating a publication and sending its task.

One ``Publication`` per review, triage version and trigger (a unique constraint): a double
submit, a finalisation recorded twice or a redelivered task finds the existing row instead
of making a second one. The task is sent once the transaction commits; a publication whose
message was lost (broker away) is sent again by ``resend_due`` (a periodic task).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from agents_app.events import append_events
from agents_app.patterns.base import Event
from config import send_task

from ...models import Publication, Review
from . import policy

log = logging.getLogger("quorum.publishing")
PUBLISH = "reviews_app.tasks.publish"
Status = Publication.Status
ACTIVE = (Status.PENDING, Status.PUBLISHING, Status.RETRYING)


class Refused(Exception):
    """Nothing was published; ``str()`` says why in plain words."""

    def __init__(self, message: str, status: int = 409):
        super().__init__(message)
        self.status = status


def send(pk: int, countdown: float | None = None) -> None:
    """Put the publish task on the broker (tests replace this function)."""
    try:
        send_task(PUBLISH, (pk,), countdown=countdown, ignore_result=True)
    except Exception as exc:  # broker away: resend_due sends it again
        log.warning("could not enqueue publication %s (sent again later): %s", pk,
                    type(exc).__name__)


def send_on_commit(pk: int, countdown: float | None = None) -> None:
    transaction.on_commit(lambda: send(pk, countdown))


def announce(pub: Publication, message: str) -> None:
    """An event on the review's run, so the live page refreshes the publication panel."""
    run_id = Review.objects.values_list("run_id", flat=True).get(pk=pub.review_id)
    append_events(run_id, [Event("publication", message[:500], {"publication": pub.pk,
                                                  "status": pub.status})])


def _create(review: Review, trigger: str, version: int, user,
            to_closed: bool = False) -> tuple[Publication, bool]:
    try:
        with transaction.atomic():
            pub = Publication.objects.create(review=review, trigger=trigger,
                                             triage_version=version, created_by=user,
                                             to_closed=to_closed)
    except IntegrityError:
        return Publication.objects.get(review=review, trigger=trigger,
                                       triage_version=version), False
    send_on_commit(pub.pk)
    announce(pub, f"Publishing to the pull request ({trigger}, triage version {version}) "
                  "is queued.")
    return pub, True


def after_final(review: Review, version: int, user) -> Publication | None:
    """The verdict became final as ``version``: publish the accepted findings when the policy
    is "after triage" (called from ``triage.record_final``). A fork's review never publishes
    unless a person presses Publish (``publish_now``)."""
    if review.pull_request_id is None or policy.is_fork(review):
        return None
    review = Review.objects.select_related("pull_request__connection").get(pk=review.pk)
    if policy.policy_of(review)[0] != policy.Policy.AFTER_TRIAGE:
        return None
    if review.pull_request.state != "open":
        # Closed or merged: publishing to it is a choice the person makes on the page.
        return None
    return _create(review, "triage", version, user)[0]


def after_synthesis(review: Review) -> Publication | None:
    """The synthesis was persisted: publish at once when the policy is automatic (called from
    ``records._synthesized``); never for a fork's review."""
    if review.pull_request_id is None or policy.is_fork(review):
        return None
    review = Review.objects.select_related("pull_request__connection").get(pk=review.pk)
    if policy.policy_of(review)[0] != policy.Policy.AUTOMATIC:
        return None
    if review.pull_request.state != "open":
        return None
    return _create(review, "automatic", review.triage_version, None)[0]


def publish_now(review: Review, user, *, to_closed: bool = False) -> tuple[Publication, str]:
    """The "Publish now" / "Publish again" button: a manual publication of the final triage
    version. A closed or merged pull request is published to only with ``to_closed`` (the
    person confirmed it). Returns it with a notice; raises ``Refused`` when it cannot
    publish."""
    with transaction.atomic():
        review = (Review.objects.select_for_update(of=("self",))
                  .select_related("pull_request__connection").get(pk=review.pk))
        if why := policy.can_publish_now(review, to_closed=to_closed):
            raise Refused(why)
        pub, created = _create(review, "manual", review.triage_version, user, to_closed)
        if created:
            return pub, "Publishing is queued."
        if pub.status in ACTIVE:
            return pub, "Publishing is under way already; nothing changed."
        # Done or failed: publish this version again (what is on the pull request already is
        # not posted twice, and the summary is updated in place).
        Publication.objects.filter(pk=pub.pk).update(
            status=Status.PENDING, attempts=0, last_error="", next_attempt_at=None,
            created_by=user, updated_at=timezone.now(), to_closed=to_closed)
        pub.refresh_from_db()
        send_on_commit(pub.pk)
        announce(pub, "Publishing to the pull request again is queued.")
        return pub, "Publishing again is queued."


def resend_due() -> list[int]:
    """Send again the publications whose message may have been lost: pending ones older than
    a minute, retries past their time, and claims older than the lease (a worker died)."""
    now = timezone.now()
    slack = timedelta(seconds=60)
    lease = timedelta(seconds=settings.QUORUM_PUBLISH_LEASE_SECONDS)
    due = list(Publication.objects.filter(
        Q(status=Status.PENDING, updated_at__lt=now - slack)
        | Q(status=Status.RETRYING, next_attempt_at__lt=now - slack)
        | Q(status=Status.PUBLISHING, updated_at__lt=now - lease))
        .order_by("pk").values_list("pk", flat=True))
    for pk in due:
        send(pk)
    return due
