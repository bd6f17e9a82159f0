"""A worker loads LiteLLM once it is ready and freezes what start-up loaded out of the garbage
collector's sight (agents_app/tasks.py ``_settle``)."""

from __future__ import annotations

import gc

from agents_app import tasks
from agents_app.llm import runtime


def test_a_ready_worker_has_litellm_loaded_and_its_start_up_objects_frozen(settings):
    settings.QUORUM_ROLE_MODELS = {**settings.QUORUM_ROLE_MODELS, "planner": "openai/gpt-4o-mini"}
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


def test_an_offline_only_worker_freezes_without_loading_litellm():
    """Checked in a fresh interpreter: this one may have loaded LiteLLM already."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import django; django.setup(); import gc, sys; from agents_app import tasks; "
            "tasks._settle(sender=None); "
            "print('litellm' in sys.modules, gc.get_freeze_count() > 100_000)")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("QUORUM_MODEL_") and k != "QUORUM_DEFAULT_MODEL"
           and not k.endswith("_API_KEY")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", DEBUG="true")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[-2:] == ["False", "True"], out.stderr[-2000:]
