"""A model call that receives nothing for far longer than its model takes is retried
(issue 37): the stall timeout is learned from the journal (``engine/latency.py``), doubled for
each retry, the last attempt given the whole ``QUORUM_LLM_TIMEOUT``; against the fake
provider over HTTP, a run whose one call hangs completes with its retry in seconds, not after
the 120 s timeout."""

from __future__ import annotations

import time

import pytest

from agents_app import engine
from agents_app.engine import latency
from agents_app.llm.gateway import Gateway, GatewayConfig
from agents_app.models import ModelCall
from tests.fakeprovider import FakeProvider, fake_models

ROLES = ("planner", "executor", "synthesizer")


@pytest.fixture
def fake(monkeypatch, settings):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-provider-key")
    latency.forget()
    with FakeProvider(hang=60.0) as provider:
        settings.QUORUM_API_BASE = provider.url
        yield provider
    latency.forget()


def seed_journal(user, model: str, latencies_ms: list[int], **fields) -> None:
    run = engine.create_run(user, "plan_execute", "Seed the journal.", enqueue=False,
                            options={"auto_approve": True}, models=fake_models(*ROLES))
    ModelCall.objects.bulk_create([
        ModelCall(run=run, stage="plan", key=f"k{i}", role="planner", model=model,
                  latency_ms=ms, **fields) for i, ms in enumerate(latencies_ms)])


def test_attempt_timeouts_double_and_the_last_gets_the_whole_timeout():
    cfg = GatewayConfig(routes={}, timeout=120.0, max_retries=2)
    assert [cfg.attempt_timeout(15.0, a) for a in (1, 2, 3)] == [15.0, 30.0, 120.0]
    cfg = GatewayConfig(routes={}, timeout=20.0, max_retries=3)
    assert [cfg.attempt_timeout(15.0, a) for a in (1, 2, 3, 4)] == [15.0, 20.0, 20.0, 20.0]


@pytest.mark.django_db
def test_stall_timeout_from_the_journal(django_user_model, settings):
    latency.forget()
    settings.QUORUM_LLM_TIMEOUT, settings.QUORUM_LLM_STALL_FLOOR = 120.0, 15.0
    settings.QUORUM_LLM_STALL_FACTOR = 3.0
    user = django_user_model.objects.create_user("alice")
    assert latency.stall_timeout("openai/m") == 120.0  # nothing known: the whole timeout
    seed_journal(user, "openai/m", [1000] * 95 + [9000] * 5)
    assert latency.stall_timeout("openai/m") == 120.0  # remembered for TTL seconds
    latency.forget()
    assert latency.stall_timeout("openai/m") == 27.0  # 3 × p99 (9 s)
    # Failed calls, retried calls and calls served from a journal are not latencies.
    seed_journal(user, "openai/fast", [100] * 19)
    seed_journal(user, "openai/fast", [100000] * 30, error="boom")
    seed_journal(user, "openai/fast", [100000] * 30, attempts=2)
    latency.forget()
    assert latency.stall_timeout("openai/fast") == 120.0  # 19 < MIN_SAMPLES
    seed_journal(user, "openai/fast", [100])
    latency.forget()
    assert latency.stall_timeout("openai/fast") == 15.0  # the floor
    settings.QUORUM_LLM_TIMEOUT = 10.0
    assert latency.stall_timeout("openai/fast") == 10.0  # never above the timeout
    settings.QUORUM_LLM_STALL_FACTOR = 0.0
    settings.QUORUM_LLM_TIMEOUT = 120.0
    assert latency.stall_timeout("openai/fast") == 120.0  # off


def test_a_hung_call_is_retried_after_the_stall_timeout(fake):
    fake.upcoming = ["timeout"]  # the first request gets no answer (held 60 s)
    gw = Gateway(GatewayConfig(routes=fake_models("planner"), api_base=fake.url,
                               allow_network=False, timeout=60.0, max_retries=2,
                               retry_base_delay=30.0, stall_timeout=lambda model: 1.0))
    started = time.monotonic()
    reply = gw.complete("planner", [{"role": "user", "content": "hi"}])
    took = time.monotonic() - started
    assert reply.text
    assert [s.fault for s in fake.seen] == ["timeout", ""]
    # A 1 s stall and the retry's answer: not the 60 s hang, nor a 30 s backoff pause (the
    # margin is for a loaded machine).
    assert took < 20.0, took


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_call_hangs_completes_with_the_retry(fake, django_user_model, settings):
    settings.QUORUM_LLM_TIMEOUT, settings.QUORUM_LLM_STALL_FLOOR = 120.0, 1.0
    settings.QUORUM_LLM_STALL_FACTOR = 3.0
    user = django_user_model.objects.create_user("alice")
    models = fake_models(*ROLES)
    for model in set(models.values()):  # the journal knows these models answer in ~0.1 s
        seed_journal(user, model, [100] * 30)
    fake.upcoming = ["", "timeout"]  # the plan answers; the first step's call hangs
    run = engine.create_run(user, "plan_execute", "Collect the logs, then write a report.",
                            options={"auto_approve": True}, models=models, enqueue=False)
    started = time.monotonic()
    run = engine.run_inline(run.pk)
    took = time.monotonic() - started
    assert run.status == "completed", run.error
    assert took < 30.0, took  # not the 120 s timeout (~3 s on a quiet machine)
    hung = ModelCall.objects.get(run=run, attempts=2)
    assert hung.error == "" and hung.role == "executor"
    assert [s.fault for s in fake.seen].count("timeout") == 1
