"""The gateway over LiteLLM's real HTTP path, against the fake OpenAI-compatible provider:
every fault kind becomes a readable, retryable model error; retries honour Retry-After and
recover; streaming works and a cut stream is an error, not a short answer; whole runs finish
through HTTP, with or without faults."""

import time

import litellm
import pytest
from pydantic import BaseModel

from agents_app import engine
from agents_app.llm.gateway import Gateway, GatewayConfig, ModelError
from agents_app.models import ModelCall
from tests.fakeprovider import FAULTS, FakeProvider, fake_models


@pytest.fixture
def fake(monkeypatch, settings):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-provider-key")
    with FakeProvider() as provider:
        settings.QUORUM_API_BASE = provider.url
        yield provider


def gateway(fake, **config) -> Gateway:
    config = {"timeout": 5.0, "max_retries": 0, "retry_base_delay": 0.0, **config}
    return Gateway(GatewayConfig(routes=fake_models("planner", "critic"), api_base=fake.url,
                                 allow_network=False, **config))


def test_replies_come_per_role_through_http(fake):
    fake.script = lambda role, schema, messages: f"{role} says: {messages[-1]['content']}"
    gw = gateway(fake)
    assert gw.complete("planner", [{"role": "user", "content": "hi"}]).text == "planner says: hi"
    assert gw.complete("critic", [{"role": "user", "content": "yo"}]).text == "critic says: yo"
    assert [(s.role, s.fault) for s in fake.seen] == [("planner", ""), ("critic", "")]


def test_structured_replies_name_their_schema(fake):
    class Verdict(BaseModel):
        approved: bool
        reason: str

    seen_schemas = []

    def script(role, schema, messages):
        seen_schemas.append(schema)
        return '{"approved": true, "reason": "fine"}'

    fake.script = script
    reply = gateway(fake).complete("critic", [{"role": "user", "content": "judge"}], schema=Verdict)
    assert reply.data == Verdict(approved=True, reason="fine")
    assert seen_schemas == ["Verdict"]


@pytest.mark.parametrize("fault", FAULTS)
def test_every_fault_is_a_readable_retryable_error(fake, fault):
    fake.upcoming = [fault]  # a "timeout" is held 30 s: only the client's 1 s says "timed out"
    with pytest.raises(ModelError) as caught:
        gateway(fake, timeout=1.0).complete("planner", [{"role": "user", "content": "hi"}])
    assert caught.value.retryable, fault
    message = str(caught.value)
    assert message and "Traceback" not in message
    assert "<APIResponse" not in message and "Error_str" not in message, message
    kind = message.split(":")[0]
    assert message.count(f"{kind}:") == 1, message  # the class name once, not once per layer
    expected = {"429": "Rate limit", "500": "server had an error", "timeout": "timed out"}
    if fault in expected:
        assert expected[fault] in message
    assert [s.fault for s in fake.seen] == [fault]


def test_retries_recover_and_honour_retry_after(fake):
    fake.retry_after = 0.4
    fake.upcoming = ["429", "500", "reset", "malformed"]
    gw = gateway(fake, max_retries=4)
    started = time.monotonic()
    reply = gw.complete("planner", [{"role": "user", "content": "hi"}])
    assert reply.text
    assert time.monotonic() - started >= 0.4  # waited as the 429 asked
    assert [s.fault for s in fake.seen] == ["429", "500", "reset", "malformed", ""]


def test_retries_run_out_with_the_last_error(fake):
    fake.upcoming = ["500", "500", "500"]
    with pytest.raises(ModelError, match="server had an error"):
        gateway(fake, max_retries=2).complete("planner", [{"role": "user", "content": "hi"}])
    assert len(fake.seen) == 3


def test_streaming_and_a_cut_stream(fake):
    fake.script = lambda role, schema, messages: "word " * 60
    kwargs = {"model": "openai/fake-planner", "api_base": fake.url, "stream": True,
              "messages": [{"role": "user", "content": "talk"}], "timeout": 5}
    text = "".join(c.choices[0].delta.content or "" for c in litellm.completion(**kwargs))
    assert text == "word " * 60
    fake.upcoming = ["truncated"]
    with pytest.raises(Exception) as caught:  # noqa: PT011 - LiteLLM's class varies by version
        "".join(c.choices[0].delta.content or "" for c in litellm.completion(**kwargs))
    assert "reset" in str(caught.value).lower() or "connection" in str(caught.value).lower()


def test_the_control_endpoint_changes_faults(fake):
    import httpx

    base = fake.url.removesuffix("/v1")
    assert httpx.post(f"{base}/_fake/config", json={"faults": {"nope": 1}}).status_code == 400
    assert httpx.post(f"{base}/_fake/config", json={"latency": 0.01,
                                                    "faults": {"500": 1.0}}).status_code == 200
    with pytest.raises(ModelError):
        gateway(fake).complete("planner", [{"role": "user", "content": "hi"}])
    assert httpx.get(f"{base}/_fake/log").json()["seen"][0]["fault"] == "500"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("faults", [{}, {name: 0.3 / len(FAULTS) for name in FAULTS}],
                         ids=["clean", "faults-30pct"])
def test_a_whole_run_over_http(fake, alice, settings, faults):
    settings.QUORUM_LLM_TIMEOUT = 1.0
    settings.QUORUM_LLM_MAX_RETRIES = 4
    settings.QUORUM_LLM_RETRY_BASE_DELAY = 0.0
    fake.configure(faults=faults, seed=7)
    run = engine.create_run(alice, "plan_execute", "Collect the logs, then find the error.",
                            options={"auto_approve": True},
                            models=fake_models("planner", "executor", "synthesizer"),
                            enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    calls = ModelCall.objects.filter(run=run)
    assert calls.count() >= 3
    assert all(c.prompt_tokens == 120 and c.completion_tokens == 40 for c in calls)
    assert sum(c.attempts for c in calls) == len(fake.seen)
    if faults:
        assert any(s.fault for s in fake.seen)
