"""Celery tasks of the review app: acting on a webhook delivery, and publishing a review to
its pull request. Each task loads its row, claims it with a conditional update, and is safe
to run twice (a redelivered task finds its work claimed or done)."""

from __future__ import annotations

from celery import shared_task  # noqa: F401 - the tasks below are added by issue 15's parts
