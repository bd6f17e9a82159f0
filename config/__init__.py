"""Quorum's Django project. The Celery application (``config.celery``) is loaded on first use,
not with the settings: a management command that runs everything in its own process
(``manage.py review``) never needs it, and Celery with kombu costs a tenth of a second to
import. Whatever sends a task imports ``config.celery`` first (``send_task`` below, and the
tasks modules), and ``celery -A config`` finds it as ``config.celery``."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from .celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def send_task(name: str, *args: Any, **kwargs: Any) -> Any:
    """``send_task`` on Quorum's Celery application (not on Celery's default one, which a
    process that never imported ``config.celery`` would otherwise get as ``current_app``)."""
    from .celery import app

    return app.send_task(name, *args, **kwargs)


__all__ = ("celery_app", "send_task")
