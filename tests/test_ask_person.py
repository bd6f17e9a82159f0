""""Ask a person" with the offline model, end to end through the web: a ReAct run started from
the dashboard whose task says "ask me …" or asks for the local time without a time zone stops
at the ask-a-person gate, the person answers on the run page, and the final answer uses it."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from agents_app import engine
from agents_app.models import Run, RunItem
from agents_app.patterns.react.offline import ZONE_QUESTION, person_question

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_schedule(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)


def start(client, **data) -> Run:
    response = client.post(reverse("start_run"), {"pattern": "react", **data})
    assert response.status_code == 302, response.content.decode()[:2000]
    return engine.run_inline(Run.objects.latest("pk").pk)


def answer(client, run, text: str):
    return client.post(reverse("tool_decision", args=[run.pk]),
                       {"action": "approve", "seq": run.stage_seq, "feedback": text},
                       HTTP_HX_REQUEST="true")


@pytest.mark.parametrize("task, question", [
    ("Plan a weekend; ask me which city I am in.", "Please tell me which city you are in."),
    ("Ask me which city I live in, then tell me its name",
     "Please tell me which city you live in."),
    ("Ask me about my budget and then plan", "Please tell me your budget."),
    ("Ask me.", "What should I know for this task?"),
    ("What is the local time for me?", ZONE_QUESTION),
    ("What time is it where I am?", ZONE_QUESTION),
    ("What time is it?", ""),  # the clock in UTC answers that
    ("What is 6*7?", ""),
    ("Where am I?", ""),
])
def test_what_the_offline_agent_asks(task, question):
    assert person_question(task) == question


def test_the_dashboard_offers_ask_person_among_react_tools(alice_client):
    html = alice_client.get(reverse("dashboard")).content.decode()
    assert 'name="tools" value="ask_person"' in html


def test_the_agent_asks_for_the_time_zone_and_uses_the_answer(alice_client, no_schedule):
    run = start(alice_client, task="What time is it where I am?")
    assert run.status == "awaiting_ask_person" and run.gate == "ask_person"
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "The agent asks you" in page and ZONE_QUESTION in page
    response = answer(alice_client, run, "Europe/Paris")
    assert response.status_code == 200
    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    steps = {i.key: i.data for i in RunItem.objects.filter(run=run, kind="step")}
    assert steps["1"]["answered_by"] == "alice" and steps["1"]["tool"] == "ask_person"
    assert steps["2"]["tool"] == "current_time"
    assert steps["2"]["input"] == {"timezone": "Europe/Paris"}  # the answer, used
    assert "You told me: Europe/Paris" in run.answer and "(Europe/Paris," in run.answer
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "answered by alice" in page and "You told me: Europe/Paris" in page


def test_ask_me_in_the_task_stops_at_the_gate(alice_client, no_schedule):
    run = start(alice_client, task="Suggest a weekend plan; ask me which city I am in.")
    assert run.gate == "ask_person"
    assert run.state["pending"]["input"] == {"question": "Please tell me which city you are in."}
    gate_event = run.events.filter(kind="tool_gate").get()
    assert gate_event.message == ("Iteration 1: the agent asks you: Please tell me which city "
                                  "you are in.")  # one full stop, not ".."
    assert answer(alice_client, run, "Lyon").status_code == 200
    run = engine.run_inline(run.pk)
    assert run.status == "completed" and "You told me: Lyon" in run.answer


def test_without_ask_person_among_the_tools_the_agent_does_not_ask(alice_client, no_schedule):
    run = start(alice_client, task="What time is it where I am?",
                tools=["calculator", "current_time"])
    assert run.status == "completed", run.error
    assert [i.data.get("tool") for i in RunItem.objects.filter(run=run, kind="step")
            .order_by("id")] == ["current_time", None]



def test_on_the_command_line_no_one_can_answer_so_the_agent_does_not_ask(alice):
    out = StringIO()
    call_command("run_pattern", "react", "--task", "What time is it where I am?", stdout=out)
    run = Run.objects.get()
    assert run.status == "completed", out.getvalue()
    assert "(UTC," in run.answer and "You told me" not in run.answer
