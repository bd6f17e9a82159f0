"""LiteLLM, loaded when first needed: importing it takes seconds of start-up (Django's
``setup``, a management command, a worker's boot) that nothing needs before the first model
call, model-name check or price lookup. ``litellm()`` imports it once, thread-safely, and
sets it up: no debug banner, no telemetry, the built-in offline provider registered."""

from __future__ import annotations

import os
import threading
from types import ModuleType

# Read by LiteLLM when it is imported: its bundled price map, never one from the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

OFFLINE_PROVIDER = "offline"
OFFLINE_MODELS = ("offline/default",)

_lock = threading.Lock()
_module: ModuleType | None = None
offline_latency = 0.0  # a fixed delay per offline call, for benchmarks and worker tests


def set_offline_latency(seconds: float) -> None:
    global offline_latency
    offline_latency = seconds


def litellm() -> ModuleType:
    """The ``litellm`` module, imported and set up on first use."""
    if _module is None:
        _load()
    assert _module is not None
    return _module


def loaded() -> bool:
    return _module is not None


def _load() -> None:
    global _module
    with _lock:
        if _module is not None:
            return
        import litellm as module

        module.suppress_debug_info = True
        module.telemetry = False
        from .provider import install_offline_provider

        install_offline_provider(module, OFFLINE_PROVIDER, OFFLINE_MODELS)
        _module = module
