"""ReAct's gates do what the person decided: the call approved is the call on the screen (a
cleared arguments box is refused, never read as "unchanged"); arguments nested absurdly deep
or holding control characters, answers and reasons with control characters or too long, get
a plain message with the text kept, never a 500; an answer sent twice is recorded once."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.models import Run, RunItem
from agents_app.patterns.base import Decision, InvalidDecision

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_schedule(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)


def react(alice, task: str, **options) -> Run:
    run = engine.create_run(alice, "react", task, options=options,
                            models={"agent": "offline/default"}, enqueue=False)
    return engine.run_inline(run.pk)


@pytest.fixture
def approval_run(alice, no_schedule):
    run = react(alice, "What is 6*7?", approval=["calculator"])
    assert run.gate == "tool_approval"
    return run


@pytest.fixture
def ask_run(alice, no_schedule):
    run = react(alice, "What time is it where I am?")
    assert run.gate == "ask_person"
    return run


def post(client, run, **data):
    return client.post(reverse("tool_decision", args=[run.pk]), data, HTTP_HX_REQUEST="true")


def still_waiting(run, gate: str) -> None:
    before = run.state["pending"]
    run.refresh_from_db()
    assert run.gate == gate and run.state["pending"] == before
    assert "approved_by" not in run.state["pending"]
    assert not RunItem.objects.filter(run=run, kind="step").exists()


# --- the approval gate ------------------------------------------------------------------------
@pytest.mark.parametrize("data", [{"args": ""}, {"args": "   \n"}, {}])
def test_approving_with_the_arguments_cleared_is_refused(alice_client, approval_run, data):
    response = post(alice_client, approval_run, action="approve", seq=approval_run.stage_seq,
                    **data)
    assert response.status_code == 400
    assert "Write the arguments of the call as a JSON object ({} when the tool takes none)" \
        in response.content.decode()
    still_waiting(approval_run, "tool_approval")


def test_the_arguments_on_the_screen_are_the_call_that_runs(alice_client, approval_run):
    shown = json.dumps(approval_run.state["pending"]["input"])
    assert post(alice_client, approval_run, action="approve", seq=approval_run.stage_seq,
                args=shown).status_code == 200
    run = engine.run_inline(approval_run.pk)
    first = RunItem.objects.get(run=run, kind="step", key="1").data
    assert first["observation"] == "6*7 = 42" and first["approved_by"] == "alice"


@pytest.mark.parametrize("args, message", [
    ('{"expression": ' + "[" * 3000 + "]" * 3000 + "}", "nested too deeply"),
    (json.dumps({"expression": "1"} | {"x": json.loads("[" * 40 + "]" * 40)}),
     "nested more than 32 levels deep"),
    ('{"expression": "6*7\\u0000"}', "The arguments contain invisible control characters "
                                     "(U+0000 (NUL)); remove them."),
    ("6*7\x00", "The arguments box contains invisible control characters (U+0000 (NUL))"),
    ("[1, 2]", "must be a JSON object"),
])
def test_bad_arguments_get_a_message_not_a_500(alice_client, approval_run, args, message):
    response = post(alice_client, approval_run, action="approve", seq=approval_run.stage_seq,
                    args=args)
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    still_waiting(approval_run, "tool_approval")


def test_the_pattern_refuses_control_characters_and_deep_arguments_from_any_caller(
        alice, approval_run):
    for edits in ({"expression": "1\x00"},
                  {"expression": "1", "y": json.loads("[" * 40 + "]" * 40)}):
        with pytest.raises(InvalidDecision):
            engine.decide(approval_run, alice, approval_run.stage_seq,
                          Decision("approve", edits=edits, author="alice"), enqueue=False)
    with pytest.raises(InvalidDecision, match="Your reason contains invisible control"):
        engine.decide(approval_run, alice, approval_run.stage_seq,
                      Decision("reject", feedback="no\x1b[2J", author="alice"), enqueue=False)
    still_waiting(approval_run, "tool_approval")


def test_a_rejection_is_announced(alice_client, approval_run):
    html = post(alice_client, approval_run, action="reject", seq=approval_run.stage_seq,
                feedback="Not now").content.decode()
    assert re.search(r'autofocus data-focus-now><span class="decided">At \d\d:\d\d:\d\d, alice rejected the call: Not '
                     r'now\.</span> The agent goes on', html) and 'aria-live="polite"' in html


# --- the ask-a-person gate -------------------------------------------------------------------
@pytest.mark.parametrize("answer, message", [
    ("Europe/Paris\x00", "Your answer contains invisible control characters (U+0000 (NUL))"),
    ("x" * 4001, "at most 4000 characters"),
    ("   ", "Write your answer to the agent&#x27;s question."),
])
def test_a_bad_answer_gets_a_message_and_is_kept(alice_client, ask_run, answer, message):
    response = post(alice_client, ask_run, action="approve", seq=ask_run.stage_seq,
                    feedback=answer)
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    if answer.strip():
        assert f">{answer.replace(chr(0), '')}</textarea>" in html
    still_waiting(ask_run, "ask_person")


def test_an_answer_sent_twice_is_recorded_once(alice_client, ask_run):
    first = post(alice_client, ask_run, action="approve", seq=ask_run.stage_seq,
                 feedback="Europe/Paris")
    second = post(alice_client, ask_run, action="approve", seq=ask_run.stage_seq,
                  feedback="Europe/Paris")
    assert first.status_code == 200 and second.status_code == 409
    assert re.search(r'autofocus data-focus-now><span class="decided">At [\d:]+, alice answered the agent\.',
                     first.content.decode())
    # The answer sent again is refused saying who answered, and given back to copy.
    refused = second.content.decode()
    assert re.search(r"no longer waiting.*At [\d:]+, alice answered the agent\.", refused)
    assert "Europe/Paris</textarea>" in refused.split('id="unsent"', 1)[1]
    ask_run.refresh_from_db()
    assert [h["tool"] for h in ask_run.state["history"]] == ["ask_person"]
    assert RunItem.objects.filter(run=ask_run, kind="step").count() == 1
