"""A scripted model registered as a LiteLLM custom provider, so tests exercise the real
gateway → LiteLLM path while a Python function decides each reply."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import litellm
from litellm import CustomLLM, ModelResponse
from litellm.types.utils import Usage

from agents_app.llm import offline
from agents_app.patterns.testing import CallInfo


class ScriptedProvider(CustomLLM):
    def __init__(self) -> None:
        super().__init__()
        self.fn: Callable[[list[dict], CallInfo], Any] = self.offline_like
        self.calls: list[CallInfo] = []
        self.lock = threading.Lock()
        self.usage = (100, 50)

    @staticmethod
    def offline_like(messages, info: CallInfo):
        schema = info.schema if isinstance(info.schema, str) else None
        return offline.reply(info.role, schema, messages)

    @classmethod
    def install(cls) -> ScriptedProvider:
        provider = cls()
        litellm.custom_provider_map = [
            *[p for p in litellm.custom_provider_map if p.get("provider") != "scripted"],
            {"provider": "scripted", "custom_handler": provider},
        ]
        return provider

    def uninstall(self) -> None:
        litellm.custom_provider_map = [p for p in litellm.custom_provider_map
                                       if p.get("provider") != "scripted"]

    def roles(self) -> list[str]:
        return [c.role for c in self.calls]

    def completion(self, model, messages, *args, **kwargs) -> ModelResponse:
        meta = (kwargs.get("litellm_params") or {}).get("metadata") or {}
        info = CallInfo(role=meta.get("quorum_role", ""), key=None,
                        schema=meta.get("quorum_schema"), messages=list(messages))
        with self.lock:
            self.calls.append(info)
        reply = self.fn(messages, info)
        if isinstance(reply, BaseException):
            raise reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        prompt, completion = self.usage
        return ModelResponse(
            model=model,
            choices=[{"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": text}}],
            usage=Usage(prompt_tokens=prompt, completion_tokens=completion,
                        total_tokens=prompt + completion))
