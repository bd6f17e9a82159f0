"""The built-in offline model is called without LiteLLM (seconds of import, ~170 MB): a
review or a run with only the offline model configured never loads it, and its replies,
usage and cost are the ones its LiteLLM provider gives."""

from __future__ import annotations

from pathlib import Path

import litellm
import pytest

from agents_app.llm import offline, runtime
from agents_app.llm.gateway import Gateway, GatewayConfig
from agents_app.patterns.base import ModelError
from agents_app.patterns.plan_execute import PlanDraft

ROOT = Path(__file__).resolve().parents[1]
TASK = "## Task\nCollect the logs, then find the error, and finally write a report.\n"


def test_the_direct_call_gives_what_the_litellm_provider_gives(monkeypatch):
    g = Gateway(GatewayConfig(routes={"planner": "offline/default"}, allow_network=False))
    monkeypatch.setattr(litellm, "completion", lambda **kw: (_ for _ in ()).throw(
        AssertionError("LiteLLM called for the offline model")))
    messages = [{"role": "user", "content": TASK}]
    reply = g.complete("planner", messages, schema=PlanDraft)
    assert reply.data.steps == ["Collect the logs", "Find the error", "Write a report"]
    monkeypatch.undo()
    via = runtime.litellm().completion(model="offline/default", messages=messages,
                                       metadata={"quorum_role": "planner",
                                                 "quorum_schema": "PlanDraft"})
    assert via.choices[0].message.content == reply.text
    text, prompt, completion = offline.complete("planner", "PlanDraft", messages)
    assert (via.usage.prompt_tokens, via.usage.completion_tokens) == (prompt, completion)


def test_a_broken_offline_handler_is_the_calls_error(monkeypatch):
    monkeypatch.setitem(offline.HANDLERS, "PlanDraft", lambda m: 1 / 0)
    g = Gateway(GatewayConfig(routes={"planner": "offline/default"}, allow_network=False))
    with pytest.raises(ModelError, match="ZeroDivisionError") as err:
        g.complete("planner", [{"role": "user", "content": TASK}], schema=PlanDraft)
    assert err.value.retryable is False


# An offline `manage.py review` loading neither LiteLLM nor Redis: tests/test_announce_deferred.py
