"""A worker loads LiteLLM once it is ready and freezes what start-up loaded out of the garbage
collector's sight (agents_app/tasks.py ``_settle``)."""

from __future__ import annotations

import gc

from agents_app import tasks
from agents_app.llm import runtime


def test_a_ready_worker_has_litellm_loaded_and_its_start_up_objects_frozen():
    assert gc.get_freeze_count() == 0
    try:
        tasks._settle(sender=None)
        assert runtime.loaded()
        frozen = gc.get_freeze_count()
        assert frozen > 100_000  # Django, Celery and LiteLLM: hundreds of thousands
        # What start-up loaded is no longer tracked by the collector's generations.
        assert len(gc.get_objects()) < frozen
    finally:
        gc.unfreeze()


def test_settle_is_connected_to_worker_ready():
    from celery.signals import worker_ready

    assert any(getattr(receiver(), "__name__", "") == "_settle" or receiver is tasks._settle
               for _, receiver in worker_ready.receivers)
