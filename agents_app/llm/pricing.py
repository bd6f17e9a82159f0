"""A model call's cost, with each model's price looked up once.

``litellm.completion_cost`` costs about a millisecond of CPU per call (more for a model it
does not know, which it reports by raising). The first call of a model computes its cost
with it, as before; when the model's price is a plain price per input and per output token
(no tiers by prompt size, no separate price for reasoning tokens, audio, images or seconds)
and that first figure is exactly what the two prices give, the prices are kept and later
calls are priced from them, unless their usage has cached or audio tokens, which go to
LiteLLM again. A model LiteLLM cannot price counts as 0 (a warning once per model), and is
registered with LiteLLM at that price (``_register_unpriced``)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from . import runtime

log = logging.getLogger("quorum.llm")

_UNPRICED = object()
_prices: dict[str, Any] = {}  # model → (input, output) per token, _UNPRICED, or None (LiteLLM)
_lock = threading.Lock()

# Price-map keys that do not change the cost of a plain chat completion as we make them
# (no batches, service tiers, web search or images requested).
_NEUTRAL = ("_batches", "_priority", "_flex", "search_context_cost_per_query",
            "cache_read_input_token_cost", "cache_creation_input_token_cost")


def cost(response: Any, model: str) -> float:
    if model.startswith(runtime.OFFLINE_PROVIDER + "/"):
        return 0.0
    hidden = getattr(response, "_hidden_params", None) or {}
    if hidden.get("response_cost"):
        return float(hidden["response_cost"])
    price = _prices.get(model)
    if price is _UNPRICED:
        return 0.0
    usage = getattr(response, "usage", None)
    if price is not None and _plain(usage):
        return usage.prompt_tokens * price[0] + usage.completion_tokens * price[1]
    try:
        exact = float(runtime.litellm().completion_cost(completion_response=response,
                                                        model=model) or 0.0)
    except Exception:
        with _lock:
            if model not in _prices:
                _prices[model] = _UNPRICED
                log.warning("no price known for %s; its cost is counted as 0", model)
                _register_unpriced(model)
        return 0.0
    if model not in _prices:
        with _lock:
            _prices[model] = _linear(model, usage, exact)
    return exact


def _register_unpriced(model: str) -> None:
    """Register a model missing from LiteLLM's price map with LiteLLM, at the price of 0 we
    count it at (``litellm.register_model``, LiteLLM's documented way to price a model).
    Unregistered, every one of its calls costs LiteLLM ~3 M more instructions (19.5 M against
    16.4 M, about 10 % of its CPU time, 0.6–1 ms a call here: bench_litellm_call.py) in
    model-info lookups that fail, each raising, while it prices the response and picks the API
    to call; registered, about what a priced model costs (15.8 M). The request LiteLLM sends
    is the same (LiteLLM seeds the entry with the capability defaults an unmapped model
    resolves to; tests/test_litellm_diet.py). A model LiteLLM knows (its cost failed for
    another reason) is left alone."""
    litellm = runtime.litellm()
    try:
        litellm.get_model_info(model)
        return
    except Exception:  # noqa: BLE001, S110 - unknown to LiteLLM: the case this is for
        pass
    try:
        provider = litellm.get_llm_provider(model)[1]
        litellm.register_model({model: {
            "litellm_provider": provider, "mode": "chat",
            "input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
            "cache_creation_input_token_cost": 0.0, "cache_read_input_token_cost": 0.0}})
    except Exception:  # noqa: BLE001 - only a saving: the call works unregistered
        log.debug("could not register %s with LiteLLM", model, exc_info=True)


def _plain(usage: Any) -> bool:
    """Usage counted in plain input and output tokens only."""
    if usage is None:
        return False
    details = getattr(usage, "prompt_tokens_details", None)
    if details is not None and (getattr(details, "cached_tokens", 0)
                                or getattr(details, "audio_tokens", 0)
                                or getattr(details, "image_tokens", 0)):
        return False
    if getattr(usage, "cache_creation_input_tokens", 0) or getattr(
            usage, "cache_read_input_tokens", 0):
        return False
    out = getattr(usage, "completion_tokens_details", None)
    return not (out is not None and (getattr(out, "audio_tokens", 0)
                                     or getattr(out, "image_tokens", 0)))


def _linear(model: str, usage: Any, exact: float) -> tuple[float, float] | None:
    """The model's (input, output) price per token when that is all its price is, and it
    gives the first call's exact cost; else None (every call asks LiteLLM)."""
    if not _plain(usage):
        return None
    try:
        info = runtime.litellm().get_model_info(model)
    except Exception:
        return None
    pin, pout = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if pin is None or pout is None:
        return None
    for key, value in info.items():
        if "cost" in key and value and key not in ("input_cost_per_token",
                                                   "output_cost_per_token") \
                and not any(part in key for part in _NEUTRAL):
            return None
    if usage.prompt_tokens * pin + usage.completion_tokens * pout != exact:
        return None
    return (pin, pout)
