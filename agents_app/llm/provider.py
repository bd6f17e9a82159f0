"""The built-in offline model as a LiteLLM custom provider (imported with LiteLLM, by
``runtime``): deterministic replies by schema name from ``offline``, no network."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from litellm import CustomLLM, ModelResponse
from litellm.types.utils import Usage

from . import offline, runtime


class OfflineProvider(CustomLLM):
    def completion(self, model: str, messages: list[dict[str, Any]], *args: Any,
                   **kwargs: Any) -> ModelResponse:
        params = kwargs.get("litellm_params") or {}
        meta = params.get("metadata") or {}
        text, prompt_tokens, completion_tokens = offline.complete(
            meta.get("quorum_role", ""), meta.get("quorum_schema"), messages,
            kwargs.get("timeout"), model=model)
        return ModelResponse(
            model=f"{runtime.OFFLINE_PROVIDER}/{model}",
            choices=[{"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": text}}],
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                        total_tokens=prompt_tokens + completion_tokens),
        )


def install_offline_provider(litellm: ModuleType, provider: str, models: tuple[str, ...]) -> None:
    litellm.custom_provider_map = [
        *[p for p in litellm.custom_provider_map if p.get("provider") != provider],
        {"provider": provider, "custom_handler": OfflineProvider()},
    ]
    litellm.register_model({
        name: {"litellm_provider": provider, "mode": "chat", "max_tokens": 32768,
               "input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
               "cache_creation_input_token_cost": 0.0, "cache_read_input_token_cost": 0.0,
               "supports_response_schema": True}
        for name in models
    })
