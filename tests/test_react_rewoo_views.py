"""ReAct and ReWOO through the dashboard form, the engine with the offline model, the tool
gates on the run page, and the command line."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from agents_app import engine
from agents_app.models import Run, RunItem

# ReWOO's tool calls run on helper threads; tests commit like the worker does.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_schedule(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)


def start(client, **data):
    r = client.post(reverse("start_run"), data)
    assert r.status_code == 302, r.content.decode()[:2000]
    return Run.objects.latest("pk")


def test_rewoo_evidence_and_citations_on_the_page(alice_client, no_schedule):
    run = start(alice_client, pattern="rewoo", task="What is (3 + 4) * 6 and what time is it?")
    assert run.options["top_k_sketches"] == 4 and run.options["max_verify_passes"] == 1
    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    evidence = list(RunItem.objects.filter(run=run, kind="evidence").order_by("key"))
    assert [e.data["tool"] for e in evidence] == ["calculator", "current_time"]
    assert evidence[0].data["output"] == "(3 + 4) * 6 = 42"
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'id="evidence-E1"' in page and 'href="#evidence-E1"' in page
    assert "Verification 1: supported" in page


def test_rewoo_needing_no_tool(alice_client, no_schedule):
    run = engine.run_inline(start(alice_client, pattern="rewoo", task="Hello there").pk)
    assert run.status == "completed"
    assert not RunItem.objects.filter(run=run, kind="evidence").exists()
    assert "No tool was needed" in alice_client.get(run.get_absolute_url()).content.decode()


def test_react_runs_tools_and_answers(alice_client, no_schedule):
    run = engine.run_inline(start(alice_client, pattern="react", task="What is 6*7?").pk)
    assert run.status == "completed", run.error
    steps = RunItem.objects.filter(run=run, kind="step").order_by("id")
    assert steps[0].data["observation"] == "6*7 = 42" and steps[1].data["final"]
    assert "6*7 = 42" in run.answer
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "calculator" in page and "final answer" in page


def test_react_approval_gate_edit_then_reject_flow(alice_client, no_schedule):
    run = start(alice_client, pattern="react", task="What is 6*7 and then 2*3?",
                approval=["calculator"])
    run = engine.run_inline(run.pk)
    assert run.status == "awaiting_tool_approval"
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "Approve this tool call?" in page
    url = reverse("tool_decision", args=[run.pk])
    bad = alice_client.post(url, {"action": "approve", "seq": run.stage_seq, "args": "{oops"},
                            HTTP_HX_REQUEST="true")
    assert bad.status_code == 400 and "not valid JSON" in bad.content.decode()
    bad = alice_client.post(url, {"action": "approve", "seq": run.stage_seq,
                                  "args": json.dumps({"nope": 1})}, HTTP_HX_REQUEST="true")
    assert bad.status_code == 400 and "Invalid arguments" in bad.content.decode()
    ok = alice_client.post(url, {"action": "approve", "seq": run.stage_seq,
                                 "args": json.dumps({"expression": "6*8"})},
                           HTTP_HX_REQUEST="true")
    assert ok.status_code == 200
    run = engine.run_inline(run.pk)
    first = RunItem.objects.get(run=run, kind="step", key="1").data
    assert first["observation"] == "6*8 = 48" and first["approved_by"] == "alice"
    assert run.status == "awaiting_tool_approval"  # the second calculator call
    stale = alice_client.post(url, {"action": "reject", "seq": run.stage_seq - 1,
                                    "feedback": "no"}, HTTP_HX_REQUEST="true")
    assert stale.status_code == 409
    empty = alice_client.post(url, {"action": "reject", "seq": run.stage_seq},
                              HTTP_HX_REQUEST="true")
    assert empty.status_code == 400 and "Say why" in empty.content.decode()
    alice_client.post(url, {"action": "reject", "seq": run.stage_seq, "feedback": "enough"},
                      HTTP_HX_REQUEST="true")
    run = engine.run_inline(run.pk)
    assert run.status == "completed"
    second = RunItem.objects.get(run=run, kind="step", key="2").data
    assert second["rejected_by"] == "alice" and "enough" in second["observation"]


def test_tool_gate_access(client, alice, bob, no_schedule):
    client.force_login(alice)
    run = engine.run_inline(start(client, pattern="react", task="6*7?",
                                  approval=["calculator"]).pk)
    url = reverse("tool_decision", args=[run.pk])
    client.force_login(bob)
    assert client.post(url, {"action": "approve", "seq": run.stage_seq}).status_code == 404
    client.logout()
    assert client.post(url, {"action": "approve", "seq": run.stage_seq}).status_code == 302
    assert Run.objects.get(pk=run.pk).status == "awaiting_tool_approval"


@pytest.mark.parametrize("data, message", [
    ({"pattern": "react", "max_iterations": "0"}, "greater than or equal to 1"),
    ({"pattern": "react", "approval": ["rm_rf"]}, "not one of the available choices"),
    ({"pattern": "rewoo", "tools": ["http_get"]}, "not one of the available choices"),
    ({"pattern": "rewoo", "max_verify_passes": "9"}, "less than or equal to 3"),
])
def test_bad_options(alice_client, no_schedule, data, message):
    r = alice_client.post(reverse("start_run"), {"task": "Q", **data}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and message in r.content.decode()
    assert not Run.objects.exists()


def test_command_line(alice):
    out = StringIO()
    call_command("run_pattern", "rewoo", "--task", "What is 2*21?", "--tools", "calculator",
                 "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["status"] == "completed"
    assert [i["tool"] for i in result["items"] if i["kind"] == "evidence"] == ["calculator"]
    with pytest.raises(CommandError, match="unknown http_get"):
        call_command("run_pattern", "react", "--task", "x", "--tools", "http_get",
                     stdout=StringIO())


def test_rewoo_cannot_be_given_ask_person(alice_client, no_schedule):
    r = alice_client.post(reverse("start_run"), {"pattern": "rewoo", "task": "Q",
                                                 "tools": ["ask_person"]},
                          HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and "cannot stop to ask a person" in r.content.decode()


def test_gate_status_has_a_label_and_cancel_clears_the_gate(alice_client, no_schedule):
    run = engine.run_inline(start(alice_client, pattern="react", task="6*7?",
                                  approval=["calculator"]).pk)
    assert run.get_status_display() == "Awaiting tool approval"
    history = alice_client.get(reverse("dashboard") + "?status=awaiting_tool_approval")
    assert history.status_code == 200 and f'href="/runs/{run.pk}/"' in history.content.decode()
    alice_client.post(reverse("cancel_run", args=[run.pk]))
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "Approve this tool call?" not in page and "Cancelled" in page


def test_edited_arguments_survive_an_error(alice_client, no_schedule):
    run = engine.run_inline(start(alice_client, pattern="react", task="6*7?",
                                  approval=["calculator"]).pk)
    r = alice_client.post(reverse("tool_decision", args=[run.pk]),
                          {"action": "approve", "seq": run.stage_seq,
                           "args": '{"expression": "6*9"'}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and "6*9" in r.content.decode()
