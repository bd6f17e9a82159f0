"""LiteLLM's success logging is left out for Quorum's own calls while no LiteLLM callback is
configured (``agents_app.llm.runtime.SuccessLoggingGate``): through the gateway, against a
fake provider over real HTTP, LiteLLM's success handler does not run and the gateway still
records every call; a LiteLLM call of other code, a configured callback, or a callback given
with the call still get the handler; anything else sent to LiteLLM's pool still runs."""

from __future__ import annotations

import logging
import sys
import threading
import time
import types

import litellm
import pytest
from litellm.litellm_core_utils.litellm_logging import Logging

from agents_app.llm import runtime
from agents_app.llm.gateway import Gateway, GatewayConfig
from tests.fakeprovider import FakeProvider
from tests.test_litellm_diet import KEY, ListJournal

MODEL = "openai/fake-planner"


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    runtime.litellm()  # loaded as the app loads it: the gate is in place
    with FakeProvider() as provider:
        provider.script = lambda role, schema, messages: f"{role} ok"
        yield provider


@pytest.fixture
def handled(monkeypatch) -> list[str]:
    """The models LiteLLM's success handler ran for."""
    seen: list[str] = []
    body = Logging._success_handler_body

    def spy(self, *args, **kwargs):
        seen.append(self.model_call_details.get("model", ""))
        return body(self, *args, **kwargs)

    monkeypatch.setattr(Logging, "_success_handler_body", spy)
    return seen


def gate() -> runtime.SuccessLoggingGate:
    pool = sys.modules["litellm.utils"].executor
    assert isinstance(pool, runtime.SuccessLoggingGate)
    return pool


def call_through_gateway(fake: FakeProvider, journal: ListJournal, n: int = 3) -> None:
    gw = Gateway(GatewayConfig(routes={"planner": MODEL}, api_base=fake.url, timeout=10.0,
                               max_retries=0, retry_base_delay=0.0, allow_network=False), journal)
    for _ in range(n):
        assert gw.complete("planner", [{"role": "user", "content": "plan"}]).text == "planner ok"


def settle(condition=lambda: True, timeout: float = 5.0) -> None:
    """Give LiteLLM's pool time to run what it was given."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)


def test_the_gateways_calls_skip_litellms_success_logging(fake, handled):
    journal, before = ListJournal(), gate().left_out
    call_through_gateway(fake, journal)
    settle()
    assert handled == []
    assert gate().left_out - before == 3
    assert [o.error for _, o in journal.records] == ["", "", ""]  # every call recorded
    assert all(o.prompt_tokens > 0 for _, o in journal.records)


def test_other_codes_litellm_calls_keep_it(fake, handled):
    for _ in range(2):
        litellm.completion(model=MODEL, api_base=fake.url, api_key=KEY, num_retries=0,
                           messages=[{"role": "user", "content": "hi"}])
    settle(lambda: len(handled) >= 2)
    assert len(handled) == 2


def test_a_configured_callback_still_gets_every_call(fake, handled, monkeypatch):
    got: list[str] = []
    done = threading.Event()

    def callback(kwargs, response, start, end):
        got.append(response.choices[0].message.content)
        if len(got) == 3:
            done.set()

    monkeypatch.setattr(litellm, "success_callback", [callback])
    before = gate().left_out
    call_through_gateway(fake, ListJournal())
    assert done.wait(10), got
    assert got == ["planner ok"] * 3 and len(handled) == 3
    assert gate().left_out == before


def test_a_callback_given_with_the_call_still_gets_it(fake, handled):
    got = threading.Event()
    with runtime.ours():
        litellm.completion(model=MODEL, api_base=fake.url, api_key=KEY, num_retries=0,
                           messages=[{"role": "user", "content": "hi"}],
                           success_callback=[lambda *a: got.set()])
    assert got.wait(10)


def test_other_work_sent_to_the_pool_runs():
    runtime.litellm()
    with runtime.ours():
        assert gate().submit(lambda x: x * 2, 21).result(timeout=5) == 42
    assert gate().submit(lambda: "ok").result(timeout=5) == "ok"
    assert gate().shutdown == gate().pool.shutdown  # the pool's own methods, passed through


def test_installing_is_idempotent_and_a_missing_pool_is_said(monkeypatch, caplog):
    runtime.litellm()
    first = gate()
    runtime.install_success_logging_gate(litellm)
    assert gate() is first and first.pool is not first
    monkeypatch.setitem(sys.modules, "litellm.utils", types.SimpleNamespace())
    with caplog.at_level(logging.WARNING, logger="quorum.llm"):
        runtime.install_success_logging_gate(litellm)
    assert "logging pool (litellm.utils.executor) was not found" in caplog.text
