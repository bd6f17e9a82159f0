"""The LiteLLM gateway: structured output, repair and retry, provider errors, blocking,
the journal, and the offline model. Calls go through litellm.completion for real, to the
scripted custom provider."""

import litellm
import pytest

from agents_app.llm import gateway as gw
from agents_app.llm.gateway import CallOutcome, Gateway, GatewayConfig, check_model_name, redact
from agents_app.patterns.base import ModelError, StructuredOutputError
from agents_app.patterns.plan_execute import PlanDraft, StepReport


def make(models="scripted/x", **cfg):
    routes = {"planner": models, "executor": models, "synthesizer": models}
    return Gateway(GatewayConfig(routes=routes, retry_base_delay=0, allow_network=False, **cfg))


def rate_limited():
    return litellm.RateLimitError("slow down", llm_provider="scripted", model="x")


def test_plain_text_reply_with_usage(scripted):
    scripted.fn = lambda m, i: "hello"
    reply = make().complete("synthesizer", [{"role": "user", "content": "hi"}])
    assert reply.text == "hello" and reply.data is None
    assert scripted.calls[0].role == "synthesizer"


def test_structured_reply_parses_into_the_schema(scripted):
    scripted.fn = lambda m, i: {"steps": ["a", "b"], "goal": "g"}
    reply = make().complete("planner", [{"role": "user", "content": "plan"}], schema=PlanDraft)
    assert isinstance(reply.data, PlanDraft) and reply.data.steps == ["a", "b"]


def test_near_json_is_repaired_without_a_retry(scripted):
    scripted.fn = lambda m, i: '```json\n{"steps": ["a", "b",], "goal": \'g\'}\n```'
    reply = make().complete("planner", [{"role": "user", "content": "p"}], schema=PlanDraft)
    assert reply.data.steps == ["a", "b"]
    assert len(scripted.calls) == 1


def test_bare_list_is_accepted_for_a_single_list_schema(scripted):
    scripted.fn = lambda m, i: '["one", "two"]'
    reply = make().complete("planner", [{"role": "user", "content": "p"}], schema=PlanDraft)
    assert reply.data.steps == ["one", "two"]


def test_invalid_reply_is_retried_once_showing_the_error(scripted):
    replies = iter(['{"output": 5, "succeeded": "maybe"}', '{"output": "fixed"}'])
    scripted.fn = lambda m, i: next(replies)
    journal = RecordingJournal()
    g = make()
    g.journal = journal
    reply = g.complete("executor", [{"role": "user", "content": "do"}], schema=StepReport)
    assert reply.data.output == "fixed"
    retry_prompt = scripted.calls[1].messages[-1]["content"]
    assert "could not be used" in retry_prompt and "output" in retry_prompt
    assert list(journal.rows) == ["executor", "executor/retry"]


def test_still_invalid_after_retry_fails_with_a_readable_reason(scripted):
    scripted.fn = lambda m, i: "I cannot produce JSON, sorry"
    with pytest.raises(StructuredOutputError, match="did not return a valid PlanDraft after one retry"):
        make().complete("planner", [{"role": "user", "content": "p"}], schema=PlanDraft)
    assert len(scripted.calls) == 2


def test_rate_limit_is_retried_with_backoff_then_succeeds(scripted):
    replies = iter([rate_limited(), rate_limited(), "ok"])
    scripted.fn = lambda m, i: next(replies)
    journal = RecordingJournal()
    g = make(max_retries=2)
    g.journal = journal
    assert g.complete("synthesizer", [{"role": "user", "content": "x"}]).text == "ok"
    assert journal.rows["synthesizer"].attempts == 3 and not journal.rows["synthesizer"].error


def test_retries_exhausted_raise_a_retryable_model_error_and_record_it(scripted):
    scripted.fn = lambda m, i: rate_limited()
    journal = RecordingJournal()
    g = make(max_retries=1)
    g.journal = journal
    with pytest.raises(ModelError) as err:
        g.complete("synthesizer", [{"role": "user", "content": "x"}])
    assert err.value.retryable is True
    row = journal.rows["synthesizer"]
    assert row.attempts == 2 and "RateLimitError" in row.error


def test_terminal_error_is_not_retried(scripted):
    scripted.fn = lambda m, i: litellm.AuthenticationError(
        "bad key sk-abcdefghijklmnop1234", llm_provider="scripted", model="x")
    journal = RecordingJournal()
    g = make(max_retries=3)
    g.journal = journal
    with pytest.raises(ModelError) as err:
        g.complete("planner", [{"role": "user", "content": "x"}])
    assert err.value.retryable is False
    assert len(scripted.calls) == 1
    assert "sk-abcdefghijklmnop1234" not in journal.rows["planner"].error


def test_real_provider_requests_are_blocked_in_tests(monkeypatch):
    called = []
    monkeypatch.setattr(litellm, "completion", lambda **kw: called.append(kw))
    with pytest.raises(ModelError, match="blocked"):
        make(models="gpt-4o-mini").complete("planner", [{"role": "user", "content": "x"}])
    assert called == []


def test_loopback_base_url_is_allowed_when_blocked(monkeypatch):
    seen = []

    def fake_completion(**kw):
        seen.append(kw)
        return litellm.ModelResponse(choices=[{"index": 0, "message": {"role": "assistant", "content": "hi"}}])

    monkeypatch.setattr(litellm, "completion", fake_completion)
    g = make(models="openai/local", api_base="http://127.0.0.1:9/v1")
    assert g.complete("planner", [{"role": "user", "content": "x"}]).text == "hi"
    assert seen[0]["api_base"] == "http://127.0.0.1:9/v1"


class RecordingJournal:
    def __init__(self, replays=None):
        self.rows: dict[str, CallOutcome] = {}
        self.replays = replays or {}
        self.before = []

    def replay(self, key, role="", model="", messages=None):
        return self.replays.get(key)

    def before_call(self, key, role, model):
        self.before.append(key)

    def record(self, key, outcome):
        self.rows[key] = outcome


def test_journal_replays_recorded_calls_instead_of_calling(scripted):
    scripted.fn = lambda m, i: pytest.fail("the provider must not be called on replay")
    recorded = CallOutcome(role="synthesizer", model="scripted/x", messages=[], response="from log")
    journal = RecordingJournal(replays={"synthesizer": recorded})
    g = make()
    g.journal = journal
    assert g.complete("synthesizer", [{"role": "user", "content": "x"}]).text == "from log"
    assert journal.before == [] and journal.rows == {}


def test_repeated_calls_of_a_role_get_distinct_keys(scripted):
    scripted.fn = lambda m, i: "x"
    journal = RecordingJournal()
    g = make()
    g.journal = journal
    for _ in range(3):
        g.complete("executor", [{"role": "user", "content": "x"}])
    assert list(journal.rows) == ["executor", "executor#1", "executor#2"]


def test_usage_and_cost_are_recorded(scripted):
    scripted.fn = lambda m, i: "x"
    scripted.usage = (1000, 500)
    journal = RecordingJournal()
    g = make()
    g.journal = journal
    g.complete("planner", [{"role": "user", "content": "x"}])
    row = journal.rows["planner"]
    assert (row.prompt_tokens, row.completion_tokens) == (1000, 500)
    assert row.latency_ms >= 0 and row.cost_usd == 0.0  # no price for scripted/x


def test_cost_comes_from_litellm_price_map():
    response = litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                                  mock_response="hello there")
    assert gw._cost(response, "gpt-4o-mini") > 0


def test_offline_model_gives_schema_valid_output_for_every_role():
    g = make(models="offline/default")
    task = "## Task\nCollect the logs, then find the error, and finally write a report.\n"
    plan = g.complete("planner", [{"role": "user", "content": task}], schema=PlanDraft).data
    assert plan.steps == ["Collect the logs", "Find the error", "Write a report"]
    step = g.complete("executor", [{"role": "user", "content": task + "## Current step\n1. Collect the logs\n"}],
                      schema=StepReport).data
    assert step.succeeded and "Collect the logs" in step.output
    answer = g.complete("synthesizer", [{"role": "user", "content": task + "## Step outputs\n### Collect the logs\nx\n"}]).text
    assert "Offline model" in answer and "Collect the logs" in answer


def test_offline_planner_takes_feedback_into_account():
    g = make(models="offline/default")
    prompt = ("## Task\nWrite a blog post about tea\n## Previous plan\n1. Outline\n2. Draft\n3. Check\n"
              "## Feedback on the previous plan\nInclude a section on green tea\n")
    plan = g.complete("planner", [{"role": "user", "content": prompt}], schema=PlanDraft).data
    assert plan.steps[:2] == ["Outline", "Draft"]
    assert any("green tea" in s for s in plan.steps)
    assert "green tea" in plan.reasoning


@pytest.mark.parametrize("name, ok", [
    ("gpt-4o-mini", True), ("offline/default", True), ("ollama/llama3", True),
    ("openai/my-local-model", True), ("anthropic/claude-3-5-haiku-latest", True),
    ("offline/other", False), ("no-such-model-xyz", False), ("", False), ("nonsense/abc", False),
])
def test_check_model_name(name, ok, monkeypatch):
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(key, "test-key-not-used")
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:11434")
    assert (check_model_name(name) is None) is ok


@pytest.mark.parametrize("name, needs", [
    ("gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic/claude-3-5-haiku-latest", "ANTHROPIC_API_KEY"),
    ("gemini/gemini-2.0-flash", "GEMINI_API_KEY"), ("ollama/llama3", "OLLAMA_API_BASE"),
])
def test_a_model_without_credentials_is_refused_by_name(name, needs, monkeypatch):
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                "OLLAMA_API_BASE", "QUORUM_API_BASE"):
        monkeypatch.delenv(key, raising=False)
    problem = check_model_name(name)
    assert problem and needs in problem and name in problem
    monkeypatch.setenv("QUORUM_API_BASE", "http://127.0.0.1:9999/v1")  # one base URL for all
    assert check_model_name(name) is None


def test_redact_hides_key_shapes():
    text = "key sk-proj-ABCDEF1234567890 and AIzaSyA1234567890abcdefghijkl and Bearer abcdef123456789"
    out = redact(text)
    assert "sk-proj" not in out and "AIza" not in out and "abcdef123456789" not in out
