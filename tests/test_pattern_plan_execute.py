"""Plan-and-Execute pattern logic with scripted fakes: no Django, no network."""

import pytest

from agents_app.patterns.base import Decision, InvalidDecision, ModelError
from agents_app.patterns.plan_execute import PLAN_GATE, PlanExecute
from agents_app.patterns.plan_execute.complexity import complexity_score, needs_planning
from agents_app.patterns.testing import FunctionModel, QueueModel

P = PlanExecute()


def drive(state, model, stage="start", decide=None):
    """Run stages until the pattern ends; ``decide(state) -> Decision`` answers gates."""
    while True:
        result = P.run_stage(stage, state, model)
        state = result.state
        if result.outcome:
            return result
        if result.gate:
            assert decide is not None, "unexpected gate"
            result = P.decide(result.gate.kind, state, decide(state))
            state = result.state
        stage = result.next_stage


def plan(*steps, goal="g"):
    return {"goal": goal, "reasoning": "r", "steps": list(steps)}


def ok(text):
    return {"output": text, "succeeded": True}


def test_happy_path_steps_see_task_plan_and_prior_outputs():
    model = QueueModel(plan("collect facts", "write summary"), ok("FACTS-1"), ok("SUMMARY-2"),
                       "final answer")
    state = P.initial_state("Summarise the facts", {"auto_approve": True})
    result = drive(state, model)
    assert result.outcome == "completed"
    assert result.answer == "final answer"
    assert model.roles() == ["planner", "executor", "executor", "synthesizer"]
    second_step = model.history[2].prompt
    assert "Summarise the facts" in second_step
    assert "1. collect facts\n2. write summary" in second_step
    assert "FACTS-1" in second_step and "2. write summary" in second_step.split("Current step")[1]
    synth = model.history[3].prompt
    assert "FACTS-1" in synth and "SUMMARY-2" in synth


def test_plan_gate_waits_and_approval_continues_at_first_step():
    model = QueueModel(plan("a", "b"))
    state = P.initial_state("t", {})
    start = P.run_stage("start", state, model)
    result = P.run_stage(start.next_stage, start.state, model)
    assert result.gate is not None and result.gate.kind == PLAN_GATE
    assert result.next_stage == "step:1:0"
    decided = P.decide(PLAN_GATE, result.state, Decision("approve", author="alice"))
    assert decided.next_stage == "step:1:0"
    assert [type(r).__name__ for r in decided.records] == ["GateDecided"]


def test_edit_creates_user_authored_version_and_executes_edited_steps():
    model = QueueModel(plan("one", "two", "three"))
    state = P.initial_state("t", {})
    gated = P.run_stage("plan:1", state, model)
    edits = ["three", "one (reworded)", "new step"]  # reorder, reword, delete "two", add
    decided = P.decide(PLAN_GATE, gated.state, Decision("approve", edits=edits, author="alice"))
    proposed = decided.records[0]
    assert proposed.version == 2 and proposed.author == "alice" and proposed.steps == edits
    assert decided.records[1].edited is True
    assert decided.next_stage == "step:2:0"
    model.enqueue(ok("x"), ok("y"), ok("z"), "done")
    result = drive(decided.state, model, stage=decided.next_stage)
    executed = [h.prompt.split("## Current step\n")[1].split("\n")[0] for h in model.history[1:4]]
    assert executed == ["1. three", "2. one (reworded)", "3. new step"]
    assert result.outcome == "completed"


def test_unchanged_edit_is_a_plain_approval():
    gated = P.run_stage("plan:1", P.initial_state("t", {}), QueueModel(plan("a", "b")))
    decided = P.decide(PLAN_GATE, gated.state, Decision("approve", edits=["a", "b"], author="al"))
    assert [type(r).__name__ for r in decided.records] == ["GateDecided"]
    assert decided.records[0].edited is False


@pytest.mark.parametrize("edits, message", [
    ([], "no steps left"),
    (["   "], "no steps left"),
    (["fine", "   "], "empty"),
    (["fine", "a\x00b"], "Step 2 contains invisible control characters"),
    (["\u202eevil"], "RIGHT-TO-LEFT OVERRIDE"),
    ("a step", "list of steps"),
    (["x"] * 11, "At most 10"),
    (["y" * 2001], "Step 1 is 2,001 characters; the limit is 2,000"),
])
def test_bad_edits_are_refused_with_a_reason(edits, message):
    gated = P.run_stage("plan:1", P.initial_state("t", {}), QueueModel(plan("a")))
    with pytest.raises(InvalidDecision, match=message):
        P.decide(PLAN_GATE, gated.state, Decision("approve", edits=edits))


def test_reject_sends_feedback_to_planner_for_a_new_version():
    model = FunctionModel(lambda messages, info: plan("only step"))
    gated = P.run_stage("plan:1", P.initial_state("Plan a trip", {}), model)
    decided = P.decide(PLAN_GATE, gated.state,
                       Decision("reject", feedback="Add a budget step", author="alice"))
    assert decided.next_stage == "plan:2"
    assert decided.records[0].action == "reject" and decided.records[0].feedback == "Add a budget step"
    again = P.run_stage("plan:2", decided.state, model)
    prompt = model.history[-1].prompt
    assert "Add a budget step" in prompt and "## Previous plan\n1. only step" in prompt
    assert again.records[0].version == 2 and again.records[0].reason == "Revised after feedback"


def test_reject_without_feedback_is_refused():
    gated = P.run_stage("plan:1", P.initial_state("t", {}), QueueModel(plan("a")))
    with pytest.raises(InvalidDecision):
        P.decide(PLAN_GATE, gated.state, Decision("reject", feedback="  "))


def test_failed_step_replans_remaining_steps_and_keeps_completed_ones():
    def fn(messages, info):
        prompt = info.prompt
        if info.role == "planner":
            if "## Failed step" in prompt:
                assert "Problem: source offline" in prompt
                assert "1. gather" in prompt  # completed steps are shown
                return plan("fetch from mirror", "analyse")
            return plan("gather", "fetch", "analyse")
        if info.role == "executor":
            if "fetch\n" in prompt.split("## Current step\n")[1] + "\n" and "mirror" not in prompt.split("## Current step\n")[1]:
                return {"output": "", "succeeded": False, "problem": "source offline"}
            return ok("did it")
        return "answer"

    model = FunctionModel(fn)
    result = drive(P.initial_state("t", {"auto_approve": True}), model)
    assert result.outcome == "completed"
    assert result.state["replans"] == 1
    assert result.state["plan"]["steps"] == ["gather", "fetch from mirror", "analyse"]
    assert result.state["plan"]["frozen"] == 1
    assert [r["description"] for r in result.state["results"]] == ["gather", "fetch from mirror", "analyse"]


def test_run_fails_naming_the_step_after_max_replans():
    def fn(messages, info):
        if info.role == "planner":
            return plan("doomed")
        raise ModelError("provider exploded")

    model = FunctionModel(fn)
    result = drive(P.initial_state("t", {"auto_approve": True, "max_replans": 1}), model)
    assert result.outcome == "failed"
    assert "Step 1 (doomed) failed" in result.error and "provider exploded" in result.error
    assert "max 1" in result.error
    assert model.roles() == ["planner", "executor", "planner", "executor"]


def test_overlong_plan_is_trimmed_to_max_steps_with_an_event():
    gated = P.run_stage("plan:1", P.initial_state("t", {"max_steps": 3}),
                        QueueModel(plan(*"abcdef")))
    assert gated.state["plan"]["steps"] == ["a", "b", "c"]
    assert gated.events[0].kind == "plan_trimmed"


def test_auto_approve_records_the_approval_and_skips_the_gate():
    result = P.run_stage("plan:1", P.initial_state("t", {"auto_approve": True}),
                         QueueModel(plan("a")))
    assert result.gate is None and result.next_stage == "step:1:0"
    assert result.records[1].action == "auto_approve"


def test_complexity_gate_answers_simple_task_directly():
    model = QueueModel("4")
    result = drive(P.initial_state("What is 2 + 2?", {"complexity_gate": True}), model)
    assert result.answer == "4"
    assert model.roles() == ["executor"]


def test_complexity_gate_plans_a_structured_task():
    task = "First collect the logs. Then find the error. Finally write a report."
    start = P.run_stage("start", P.initial_state(task, {"complexity_gate": True}), QueueModel())
    assert start.next_stage == "plan:1"


@pytest.mark.parametrize("task, score", [
    ("What is 2 + 2?", 0),
    ("Refactor x = 1; y = 2; z = 3 in my code", 0),
    ("Read the file, then fix the bug.", 1),
    ("Do this:\n- one\n- two\nThen report.", 2),
    ("A. B. C. Then D.", 2),
])
def test_complexity_score_signals(task, score):
    assert complexity_score(task) == score
    assert needs_planning(task) is (score >= 2)


def test_queue_fake_reports_running_out():
    with pytest.raises(AssertionError, match="ran out"):
        QueueModel().complete("planner", [])
