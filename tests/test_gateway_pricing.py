"""A model call's cost, priced once per model (``agents_app.llm.pricing``), is the figure
LiteLLM's ``completion_cost`` gives for the same response; a model LiteLLM cannot price
costs 0. And LiteLLM itself loads at the first model call, not with Django."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import litellm
import pytest
from litellm import ModelResponse
from litellm.types.utils import PromptTokensDetailsWrapper, Usage

from agents_app.llm import pricing

ROOT = Path(__file__).resolve().parents[1]


def response(model: str, prompt: int, completion: int, cached: int = 0) -> ModelResponse:
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion,
                  total_tokens=prompt + completion)
    if cached:
        usage.prompt_tokens_details = PromptTokensDetailsWrapper(cached_tokens=cached)
    return ModelResponse(model=model, usage=usage, choices=[{
        "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}])


@pytest.fixture(autouse=True)
def fresh_prices(monkeypatch):
    monkeypatch.setattr(pricing, "_prices", {})


@pytest.mark.parametrize("model, kept", [
    ("gpt-4o-mini", True), ("openai/gpt-4o-mini", True), ("gpt-4o", True),
    ("claude-haiku-4-5", True),
    ("gemini-2.5-flash", False),  # audio tokens priced apart: LiteLLM prices every call
])
def test_the_cost_is_litellms_for_every_call_after_the_first(model, kept):
    sizes = [(1000, 200), (7, 3), (123_456, 7_890), (0, 0), (1, 1)]
    got = [pricing.cost(response(model, p, c), model) for p, c in sizes]
    want = [litellm.completion_cost(completion_response=response(model, p, c), model=model)
            for p, c in sizes]
    assert got == want
    assert got[0] > 0
    # later calls used the kept prices, or LiteLLM each time for a price that is not plain
    assert isinstance(pricing._prices[model], tuple) is kept


def test_cached_tokens_are_priced_by_litellm_not_by_the_kept_prices():
    model = "gpt-4o-mini"
    pricing.cost(response(model, 1000, 100), model)
    assert isinstance(pricing._prices[model], tuple)
    cached = response(model, 1000, 100, cached=800)
    want = litellm.completion_cost(completion_response=response(model, 1000, 100, cached=800),
                                   model=model)
    assert pricing.cost(cached, model) == want
    assert want < pricing.cost(response(model, 1000, 100), model)  # the cache discount


def test_a_tiered_price_is_never_kept(monkeypatch):
    """A model whose price changes with the prompt's size asks LiteLLM every time."""
    tiered = {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1e-6,
              "output_cost_per_token": 2e-6, "input_cost_per_token_above_200k_tokens": 2e-6,
              "output_cost_per_token_above_200k_tokens": 4e-6}
    monkeypatch.setitem(litellm.model_cost, "tiered-test-model", tiered)
    model = "openai/tiered-test-model"
    pricing.cost(response(model, 1000, 100), model)
    assert pricing._prices[model] is None
    big = pricing.cost(response(model, 300_000, 100), model)
    assert big == litellm.completion_cost(completion_response=response(model, 300_000, 100),
                                          model=model)


def test_an_unknown_model_costs_nothing_and_is_looked_up_once(monkeypatch, caplog):
    model = "openai/no-such-model-anywhere"
    assert pricing.cost(response(model, 1000, 100), model) == 0.0
    assert pricing._prices[model] is pricing._UNPRICED
    monkeypatch.setattr(litellm, "completion_cost",
                        lambda **kw: pytest.fail("asked LiteLLM again"))
    assert pricing.cost(response(model, 5000, 100), model) == 0.0
    assert caplog.text.count("no price known for openai/no-such-model-anywhere") == 1


def test_the_offline_model_and_a_cost_litellm_already_computed():
    assert pricing.cost(response("offline/default", 1000, 100), "offline/default") == 0.0
    r = response("gpt-4o-mini", 1000, 100)
    r._hidden_params["response_cost"] = 0.125
    assert pricing.cost(r, "gpt-4o-mini") == 0.125


def test_django_and_the_app_start_without_litellm():
    code = ("import sys, django; django.setup(); "
            "import agents_app.engine, agents_app.views, agents_app.tasks, agents_app.forms; "
            "print('litellm' in sys.modules)")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
