"""LiteLLM's work per call (issue 17): a model missing from LiteLLM's price map is registered
with LiteLLM at the price of 0 Quorum counts it at, after its first call, so its later calls
skip LiteLLM's failing model-info lookups (``pricing._register_unpriced``). The request sent
is the same, a priced model's cost and price entry are untouched, and the call log still
records every call."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import litellm
import pytest
from litellm import ModelResponse
from litellm.types.utils import Usage

from agents_app.llm import pricing
from agents_app.llm.gateway import CallOutcome, Gateway, GatewayConfig
from tests.fakeprovider import FakeProvider

KEY = "sk-diet-test-key-0000"


class ListJournal:
    def __init__(self) -> None:
        self.records: list[tuple[str, CallOutcome]] = []

    def replay(self, key: str, role: str = "", model: str = "",
               messages: list | None = None) -> CallOutcome | None:
        return None

    def before_call(self, key: str, role: str, model: str) -> None:
        return None

    def record(self, key: str, outcome: CallOutcome) -> None:
        self.records.append((key, outcome))


@pytest.fixture
def fake(monkeypatch) -> Iterator[FakeProvider]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setattr(pricing, "_prices", {})
    with FakeProvider(usage=(120, 40)) as provider:
        provider.script = lambda role, schema, messages: f"{role} ok"
        yield provider


def gateway(fake: FakeProvider, model: str, journal: ListJournal) -> Gateway:
    return Gateway(GatewayConfig(routes={"planner": model}, api_base=fake.url, timeout=10.0,
                                 max_retries=0, retry_base_delay=0.0, allow_network=False),
                   journal)


def direct(url: str, model: str, **kwargs) -> ModelResponse:
    return litellm.completion(model=model, api_base=url, api_key=KEY, timeout=10,
                              num_retries=0, messages=[{"role": "user", "content": "hi"}],
                              **kwargs)


def test_an_unpriced_model_is_registered_at_0_after_its_first_call(fake):
    model = "openai/fake-diet-unpriced"  # a name no other test uses: registering is global
    assert direct(fake.url, model)._hidden_params.get("response_cost") is None  # LiteLLM failed
    journal = ListJournal()
    gw = gateway(fake, model, journal)
    for _ in range(3):
        assert gw.complete("planner", [{"role": "user", "content": "plan"}]).text == \
            "diet-unpriced ok"
    # every call logged with its tokens and a cost of 0
    assert [(o.prompt_tokens, o.completion_tokens, o.cost_usd, o.error) for _, o in
            journal.records] == [(120, 40, 0.0, "")] * 3
    assert pricing._prices[model] is pricing._UNPRICED
    entry = litellm.model_cost[model]
    assert (entry["input_cost_per_token"], entry["output_cost_per_token"]) == (0.0, 0.0)
    assert entry["litellm_provider"] == "openai" and entry["mode"] == "chat"
    # what the saving rests on: LiteLLM now prices the model itself, without failing
    assert litellm.get_model_info(model)["input_cost_per_token"] == 0.0
    assert direct(fake.url, model)._hidden_params["response_cost"] == 0.0


def test_a_priced_model_keeps_its_price_and_its_exact_cost(fake):
    model = "openai/gpt-4o-mini"
    before = dict(litellm.model_cost["gpt-4o-mini"])
    journal = ListJournal()
    gw = gateway(fake, model, journal)
    for _ in range(2):
        gw.complete("planner", [{"role": "user", "content": "plan"}])
    want = litellm.completion_cost(completion_response=ModelResponse(
        model="gpt-4o-mini", usage=Usage(prompt_tokens=120, completion_tokens=40,
                                         total_tokens=160),
        choices=[{"index": 0, "finish_reason": "stop",
                  "message": {"role": "assistant", "content": "ok"}}]), model=model)
    assert want > 0
    assert [o.cost_usd for _, o in journal.records] == [want, want]
    assert litellm.model_cost["gpt-4o-mini"] == before
    assert model not in litellm.model_cost  # nothing registered under the routed name


def test_a_known_model_whose_cost_fails_is_not_registered(monkeypatch):
    monkeypatch.setattr(pricing, "_prices", {})
    before = dict(litellm.model_cost["gpt-4o-mini"])

    def fail(**kwargs):
        raise ValueError("a pricing bug")

    monkeypatch.setattr(litellm, "completion_cost", fail)
    response = ModelResponse(model="gpt-4o-mini", usage=Usage(
        prompt_tokens=10, completion_tokens=5, total_tokens=15), choices=[{
            "index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "ok"}}])
    assert pricing.cost(response, "gpt-4o-mini") == 0.0
    assert litellm.model_cost["gpt-4o-mini"] == before
    assert litellm.get_model_info("gpt-4o-mini")["input_cost_per_token"] > 0


class _Capture(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that keeps every request's body and headers."""
    protocol_version = "HTTP/1.1"
    seen: list[tuple[dict, dict]] = []

    def log_message(self, *args) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        # per request by design: the SDK's idempotency key and retry count, the length
        headers = {k.lower(): v for k, v in self.headers.items()
                   if k.lower() not in ("idempotency-key", "x-stainless-retry-count",
                                        "content-length")}
        type(self).seen.append((body, headers))
        out = json.dumps({"id": "c", "object": "chat.completion", "created": 1,
                          "model": body["model"], "choices": [{
                              "index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": '{"a": 1}'}}],
                          "usage": {"prompt_tokens": 9, "completion_tokens": 3,
                                    "total_tokens": 12}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.mark.parametrize("provider", ["openai", "hosted_vllm"])
def test_registering_changes_nothing_litellm_sends(provider, monkeypatch):
    monkeypatch.setattr(pricing, "_prices", {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    model = f"{provider}/diet-capture-model"
    fmt = {"type": "json_schema", "json_schema": {"name": "A", "strict": False, "schema": {
        "type": "object", "properties": {"a": {"type": "integer"}}}}}
    calls = ({}, {"response_format": fmt}, {"max_tokens": 50, "temperature": 0.2})
    try:
        _Capture.seen = []
        for kwargs in calls:
            direct(url, model, **kwargs)
        unregistered = list(_Capture.seen)
        pricing._register_unpriced(model)
        assert litellm.model_cost[model]["input_cost_per_token"] == 0.0
        _Capture.seen = []
        for kwargs in calls:
            direct(url, model, **kwargs)
        assert _Capture.seen == unregistered
        assert unregistered[1][0]["response_format"] == fmt
    finally:
        server.shutdown()
        server.server_close()
