"""Team Lead with scripted fakes: the three strategies, reassignment and its limit, failures."""

from __future__ import annotations

import threading

import pytest

from agents_app.patterns.base import InvalidDecision, ModelError
from agents_app.patterns.team_lead import TeamLead, parse_team
from agents_app.patterns.testing import FunctionModel

TEAM = [{"name": "researcher", "description": "finds facts"},
        {"name": "writer", "description": "writes"}]


def drive(state, model, max_stages=20):
    p = TeamLead()
    stage, stages, events = p.first_stage(state), [], []
    for _ in range(max_stages):
        stages.append(stage)
        result = p.run_stage(stage, state, model)
        state, events = result.state, events + result.events
        if result.outcome:
            return result, stages, events
        stage = result.next_stage
    raise AssertionError("too many stages")


def lead_model(reviews=(), meet=None, fail=lambda s: False, plan=None):
    reviews = list(reviews)

    def reply(messages, info):
        name = getattr(info.schema, "__name__", None)
        if name == "Delegation":
            return plan or {"subtasks": [{"assignee": "researcher", "task": "find facts"},
                                         {"assignee": "writer", "task": "write it up"}]}
        if name == "LeadReview":
            return reviews.pop(0) if reviews else {"complete": True}
        if info.role == "lead":
            return "FINAL: " + messages[1]["content"].count("### T").__str__() + " results"
        task = messages[1]["content"].split("## Your subtask\n", 1)[1].split("\n", 1)[0]
        if meet:
            meet.wait()
        if fail(task):
            return ModelError("member down")
        return f"result of {task}"
    return FunctionModel(reply)


def state_for(strategy, **extra):
    return TeamLead().initial_state("Write a report", {"strategy": strategy, "team": TEAM,
                                                       **extra})


def test_sequential_each_member_sees_prior_results():
    model = lead_model()
    result, stages, _ = drive(state_for("sequential"), model)
    assert stages == ["delegate", "work:1", "synthesize"]
    writer = [c for c in model.history if c.role == "member"][1].messages[1]["content"]
    assert "result of find facts" in writer
    assert [s["status"] for s in result.state["subtasks"]] == ["done", "done"]
    assert result.answer == "FINAL: 2 results"


def test_parallel_subtasks_overlap():
    plan = {"subtasks": [{"assignee": "researcher", "task": f"part {i}"} for i in range(3)]}
    together = threading.Barrier(3, timeout=10)  # breaks unless the three subtasks overlap
    model = lead_model(meet=together, plan=plan)
    result, stages, _ = drive(state_for("parallel"), model)
    assert not together.broken
    assert [s["status"] for s in result.state["subtasks"]] == ["done", "done", "done"]
    members = [c for c in model.history if c.role == "member"]
    assert all("Results so far" not in c.messages[1]["content"] for c in members)


def test_dynamic_reassigns_then_completes():
    model = lead_model(reviews=[{"complete": False, "reason": "thin",
                                 "reassignments": [{"assignee": "researcher",
                                                    "task": "find facts"}]}])
    result, stages, events = drive(state_for("dynamic"), model)
    assert stages == ["delegate", "work:1", "review:1", "work:2", "review:2", "synthesize"]
    subtasks = result.state["subtasks"]
    assert [(s["id"], s["status"], s["attempt"]) for s in subtasks] == [
        ("T1", "reassigned", 1), ("T2", "done", 1), ("T3", "done", 2)]


def test_dynamic_stops_reassigning_at_the_limit():
    more = {"complete": False, "reassignments": [{"assignee": "writer", "task": "again"}]}
    model = lead_model(reviews=[more, more, more, more])
    result, stages, events = drive(state_for("dynamic", max_reassignments=1), model)
    assert stages.count("work:2") == 1 and "work:3" not in stages
    assert any("limit of 1" in e.message for e in events)


def test_unknown_assignee_and_member_failure():
    plan = {"subtasks": [{"assignee": "nobody", "task": "find facts"},
                         {"assignee": "writer", "task": "write it up"}]}
    model = lead_model(plan=plan, fail=lambda task: task == "write it up")
    result, _, events = drive(state_for("sequential"), model)
    assert result.state["subtasks"][0]["assignee"] == "researcher"
    assert any(e.kind == "assignee_unknown" for e in events)
    assert result.state["subtasks"][1]["status"] == "failed"
    assert result.outcome == "completed"


def test_all_subtasks_failing_fails_the_run():
    result, _, _ = drive(state_for("parallel"), lead_model(fail=lambda t: True))
    assert result.outcome == "failed" and "No subtask" in result.error


@pytest.mark.parametrize("text, message", [
    ("", "1 to 6"), ("a b: x", "one word"), ("a: x\nA: y", "named twice"), ("a x", "name: what"),
])
def test_parse_team_refuses_bad_input(text, message):
    with pytest.raises(InvalidDecision, match=message):
        parse_team(text)
