"""The notification tasks (imported by ``agents_app.tasks`` so that workers register them)."""

from __future__ import annotations

from celery import shared_task

import config.celery  # noqa: F401  (Quorum's app is the current one for these tasks)

from . import deliver as delivery


@shared_task(name="agents_app.notify.tasks.deliver", ignore_result=True)
def deliver(ids: list[int]) -> None:
    """Send these outbox rows (each claimed first: a redelivered task sends nothing twice)."""
    delivery.deliver_many(ids)


@shared_task(name="agents_app.notify.tasks.deliver_due", ignore_result=True)
def deliver_due() -> None:
    """The beat's sweep (every 15 s): retries whose time came, rows whose task was lost."""
    delivery.deliver_due()
