"""Celery tasks of the review app: acting on a webhook delivery, and publishing a review to
its pull request. Each task loads its row, claims it with a conditional update, and is safe
to run twice (a redelivered task finds its work claimed or done)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="reviews_app.tasks.publish")
def publish(publication_id: int) -> str:
    """Publish one review to its pull request (see reviews_app/publishing/worker.py)."""
    from .publishing import worker

    return worker.run(publication_id)


@shared_task(name="reviews_app.tasks.publish_sweep")
def publish_sweep() -> int:
    """Send again publications whose task message was lost (broker away, worker killed)."""
    from .publishing import dispatch

    return len(dispatch.resend_due())
