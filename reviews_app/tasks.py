"""Celery tasks of the review app: acting on a webhook delivery, and publishing a review to
its pull request. Each task loads its row, claims it with a conditional update, and is safe
to run twice (a redelivered task finds its work claimed or done)."""

from __future__ import annotations

from celery import shared_task

import config.celery  # noqa: F401  (Quorum's app is the current one for these tasks)


@shared_task(name="reviews_app.tasks.publish")
def publish(publication_id: int) -> str:
    """Publish one review to its pull request (see reviews_app/prflow/publishing/worker.py)."""
    from .prflow.publishing import worker

    return worker.run(publication_id)


@shared_task(name="reviews_app.tasks.publish_sweep")
def publish_sweep() -> int:
    """Send again publications whose task message was lost (broker away, worker killed)."""
    from .prflow.publishing import dispatch

    return len(dispatch.resend_due())
@shared_task(name="reviews_app.tasks.sync_status", ignore_result=True)
def sync_status(status_id: int) -> str:
    """Post a pull request's "Quorum" commit status (see reviews_app/prflow/status.py)."""
    from .prflow import status

    return status.sync(status_id)


@shared_task(name="reviews_app.tasks.status_sweep", ignore_result=True)
def status_sweep() -> int:
    """Send again commit statuses whose task message was lost."""
    from .prflow import status

    return len(status.resend_due())


MAX_RETRIES = 5


@shared_task(bind=True, name="reviews_app.tasks.handle_delivery", max_retries=MAX_RETRIES,
             ignore_result=True)
def handle_delivery(self, delivery_pk: int) -> str:
    """A webhook delivery → a review round started, ended or skipped (``reviews_app.prflow``).
    A retryable provider error is tried again later, honouring the provider's Retry-After."""
    from .prflow import handle_delivery as handle

    outcome = handle(delivery_pk, attempt=self.request.retries, max_attempts=MAX_RETRIES)
    if outcome.status == "retry":
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


@shared_task(name="reviews_app.tasks.suggest_rules", ignore_result=True)
def suggest_rules(owner_id: int, connection_id: int | None, user_id: int | None) -> str:
    """Suggest review rules from triage comments with a priced model (reviews_app/rules/service.py)."""
    from .rules.service import run_task

    return run_task(owner_id, connection_id, user_id)
