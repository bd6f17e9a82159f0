"""LiteLLM, loaded when first needed: importing it takes seconds of start-up (Django's
``setup``, a management command, a worker's boot) that nothing needs before the first model
call, model-name check or price lookup. ``litellm()`` imports it once, thread-safely, and
sets it up: no debug banner, no telemetry, the built-in offline provider registered, and its
success logging left out for Quorum's own calls while no LiteLLM callback is configured
(``ours``, ``SuccessLoggingGate``)."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from types import ModuleType
from typing import Any

log = logging.getLogger("quorum.llm")

# Read by LiteLLM when it is imported: its bundled price map, never one from the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

OFFLINE_PROVIDER = "offline"
# "default" answers every role in full; "brief" gives the same structured answers and cuts its
# free text to the first paragraph: a second model to compare with, offline (issue 33).
OFFLINE_MODELS = ("offline/default", "offline/brief")

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
        install_success_logging_gate(module)
        _module = module


# --- LiteLLM's success logging, for Quorum's own calls -------------------------------------------
# After every synchronous completion LiteLLM hands ``Logging.success_handler`` to a thread pool
# (``litellm.utils.executor``, looked up at each call): it prices the response again, builds a
# "standard logging payload" of the whole request and answer, and gives it to the configured
# callbacks. Quorum configures none and records every call itself (the gateway's call log, the
# journal), yet the handler ran for each call: 0.5-0.8 ms of CPU, and the pool's thread took
# the GIL at the first statement after the call, 0.75 ms of wall time before the call's durable
# record (docs/BENCHMARKS.md, issue 17). The gate leaves it out for calls made inside ``ours()``
# while LiteLLM has no success callback, global or given with the call; anything else submitted
# to the pool, other code's LiteLLM calls included, goes to the pool as before.
_OURS: contextvars.ContextVar[bool] = contextvars.ContextVar("quorum_litellm_call", default=False)


@contextlib.contextmanager
def ours() -> Iterator[None]:
    """Mark the LiteLLM calls made inside as Quorum's (the gateway's)."""
    token = _OURS.set(True)
    try:
        yield
    finally:
        _OURS.reset(token)


class SuccessLoggingGate:
    """Stands in for LiteLLM's logging pool in ``litellm.utils``; see above."""

    def __init__(self, pool: Any, module: ModuleType) -> None:
        self.pool, self.module = pool, module
        self.left_out = 0  # success handlers not run (for tests and benchmarks)

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:
        handler = args[0] if args else None
        if (_OURS.get() and getattr(handler, "__name__", "") == "success_handler"
                and not self._callbacks(getattr(handler, "__self__", None))):
            self.left_out += 1
            done: Future = Future()
            done.set_result(None)
            return done
        return self.pool.submit(fn, *args, **kwargs)

    def _callbacks(self, logging_obj: Any) -> bool:
        m = self.module
        return bool(getattr(m, "success_callback", None) or getattr(m, "callbacks", None)
                    or getattr(m, "_async_success_callback", None)
                    or getattr(logging_obj, "dynamic_success_callbacks", None))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)


def install_success_logging_gate(module: ModuleType) -> None:
    utils = sys.modules.get("litellm.utils")
    pool = getattr(utils, "executor", None)
    if isinstance(pool, SuccessLoggingGate):
        return
    if utils is None or not callable(getattr(pool, "submit", None)):
        log.warning("LiteLLM's logging pool (litellm.utils.executor) was not found: its "
                    "success logging runs after every model call")
        return
    utils.executor = SuccessLoggingGate(pool, module)  # type: ignore[attr-defined]
