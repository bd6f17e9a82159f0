"""Tools, ReAct and ReWOO with scripted fakes: limits, loop detection, gates, concurrency."""

from __future__ import annotations

import threading
import time

import pytest

from agents_app.patterns.base import Decision, InvalidDecision
from agents_app.patterns.react import APPROVAL_GATE, ASK_GATE, ReAct, detect_loop
from agents_app.patterns.rewoo import ReWOO
from agents_app.patterns.testing import FunctionModel, QueueModel
from agents_app.patterns.tools import toolbox


def drive(pattern, state, model, max_stages=40):
    stage, records, events, stages = pattern.first_stage(state), [], [], []
    for _ in range(max_stages):
        stages.append(stage)
        result = pattern.run_stage(stage, state, model)
        state, records, events = result.state, records + result.records, events + result.events
        if result.outcome or result.gate:
            return result, records, events, stages
        stage = result.next_stage
    raise AssertionError("too many stages")


# --- tools -------------------------------------------------------------------------------------
@pytest.mark.parametrize("expr, value", [("(3 + 4) * 2 ** 10", 7168), ("sqrt(16) + pi - pi", 4.0),
                                         ("-7 // 2", -4), ("round(2.567, 2)", 2.57)])
def test_calculator(expr, value):
    assert toolbox.calculate(expr) == value


@pytest.mark.parametrize("expr", ["__import__('os').system('id')", "().__class__", "x", "9**9**9",
                                  "1/0", "open('/etc/passwd')", "[1,2]", "'a' * 3", "lambda: 1"])
def test_calculator_refuses_everything_else(expr):
    with pytest.raises(toolbox.CalcError):
        toolbox.calculate(expr)


def test_file_tools_stay_inside_their_roots(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    (root / "link").symlink_to(tmp_path / "secret.txt")
    tools = toolbox.registry([str(root)])
    ok, out, _ = toolbox.run_tool(tools, "read_file", {"path": "proj/a.txt"})
    assert ok and "hello" in out
    for path in ("proj/../secret.txt", "/etc/passwd", "proj/link", "other/a.txt", "proj/.git/x"):
        ok, out, _ = toolbox.run_tool(tools, "read_file", {"path": path})
        assert not ok and "top secret" not in out, path
    ok, out, _ = toolbox.run_tool(tools, "search_files", {"text": "hello", "path": "proj"})
    assert ok and "a.txt" in out


def test_tool_errors_are_observations():
    tools = toolbox.registry([])
    assert toolbox.run_tool(tools, "nope", {})[0] is False
    ok, out, _ = toolbox.run_tool(tools, "calculator", {"expr": "1"})
    assert not ok and "Invalid arguments" in out
    ok, out, _ = toolbox.run_tool(tools, "calculator", "not json")
    assert not ok
    ok, out, _ = toolbox.run_tool(tools, "list_files", {"path": "x"})
    assert not ok and "QUORUM_REPO_ROOTS" in out
    ok, out, _ = toolbox.run_tool(tools, "ask_person", {"question": "?"})
    assert not ok  # answered at a gate, never run as a function


def test_tool_timeout_is_an_observation(monkeypatch):
    release, finished = threading.Event(), threading.Event()

    def late(args):
        release.wait(10)
        finished.set()
        return "late"

    slow = toolbox.AgentTool("slow", "waits", toolbox.CalcArgs, late, timeout=0.2)
    ok, out, _ = toolbox.run_tool({"slow": slow}, "slow", {"expression": "1"})
    assert not finished.is_set(), "run_tool waited for the tool past its timeout"
    release.set()
    assert not ok and "did not finish within 0.2 s" in out


# --- ReAct -------------------------------------------------------------------------------------
def call(tool, thought="t", **args):
    return {"thought": thought, "action": {"type": "tool_call", "tool": tool, "input": args}}


def final(answer):
    return {"thought": "done", "action": {"type": "final_answer", "answer": answer}}


def react(**options):
    r = ReAct()
    return r, r.initial_state("What is 6*7 and what time is it?",
                              {"tools": ["calculator", "current_time", "ask_person"], **options})


def test_react_think_act_observe_then_answer():
    r, state = react()
    model = QueueModel(call("calculator", expression="6*7"), call("current_time"), final("42"))
    result, records, _, stages = drive(r, state, model)
    assert result.outcome == "completed" and result.answer == "42"
    assert stages == ["step:1", "step:2", "step:3"]
    assert records[0].data["observation"] == "6*7 = 42" and records[0].data["ok"]
    third = model.history[2].messages
    assert any("6*7 = 42" in m["content"] for m in third if m["role"] == "user")


@pytest.mark.parametrize("history, tool, args, reason", [
    ([("calculator", {"expression": "1"}), ("calculator", {"expression": "2"})],
     "calculator", {"expression": "3"}, "three times in a row"),
    ([("calculator", {"expression": "1"}), ("current_time", {})],
     "calculator", {"expression": "1"}, "A-B-A"),
    ([("calculator", {"expression": "1"}), ("current_time", {}), ("read_file", {"path": "x"})],
     "calculator", {"expression": "1"}, "same input twice"),
])
def test_loop_detection_rules(history, tool, args, reason):
    hist = [{"tool": t, "input": a} for t, a in history]
    assert reason in detect_loop(hist, tool, args)


def test_no_loop_for_varied_calls():
    hist = [{"tool": "calculator", "input": {"expression": "1"}},
            {"tool": "current_time", "input": {}}]
    assert detect_loop(hist, "calculator", {"expression": "2"}) == ""


def test_react_loop_forces_a_final_answer_without_running_the_call():
    r, state = react()
    model = QueueModel(call("calculator", expression="1+1"), call("current_time"),
                       call("calculator", expression="1+1"), {"answer": "2, probably"})
    result, records, events, stages = drive(r, state, model)
    assert stages == ["step:1", "step:2", "step:3", "final"]
    assert result.answer == "2, probably"
    assert "A-B-A" in result.state["stop_reason"]
    assert records[2].data["skipped"].startswith("not run")
    assert result.state["tool_calls"] == 2


@pytest.mark.parametrize("options, reason", [
    ({"max_iterations": 2}, "iteration limit (2)"),
    ({"max_tool_calls": 1}, "tool-call limit (1)"),
    ({"max_seconds": 0}, "time limit"),
])
def test_react_limits_force_a_final_answer(options, reason):
    r, state = react(**options)
    calls = iter([call("calculator", expression="1"), call("current_time"),
                  call("calculator", expression="5")])
    model = FunctionModel(lambda m, info: {"answer": "partial"}
                          if info.schema.__name__ == "FinalAnswer" else next(calls))
    result, _, events, stages = drive(r, state, model)
    assert stages[-1] == "final" and result.answer == "partial"
    assert reason in result.state["stop_reason"]
    assert any(e.kind == "loop_stopped" for e in events)


def test_react_tool_approval_approve_edit_reject():
    r, state = react(approval=["calculator"])
    model = QueueModel(call("calculator", expression="6*7"))
    result, _, _, _ = drive(r, state, model)
    assert result.gate.kind == APPROVAL_GATE and result.gate.payload["tool"] == "calculator"
    gated = result.state
    # Edit the arguments: the edited call is what runs.
    decided = r.decide(APPROVAL_GATE, gated, Decision("approve", edits={"expression": "6*8"},
                                                      author="alice"))
    acted = r.run_stage(decided.next_stage, decided.state, model)
    assert acted.records[0].data["observation"] == "6*8 = 48"
    assert acted.records[0].data["approved_by"] == "alice"
    # Bad edits are refused with a message.
    with pytest.raises(InvalidDecision):
        r.decide(APPROVAL_GATE, gated, Decision("approve", edits={"nope": 1}, author="alice"))
    # Reject: the agent reads the reason as the observation.
    with pytest.raises(InvalidDecision):
        r.decide(APPROVAL_GATE, gated, Decision("reject", author="alice"))
    rejected = r.decide(APPROVAL_GATE, gated, Decision("reject", feedback="too costly",
                                                       author="alice"))
    assert rejected.next_stage == "step:2"
    assert "alice rejected this call: too costly" in rejected.state["history"][-1]["observation"]
    model.enqueue(final("fine"))
    nxt = r.run_stage("step:2", rejected.state, model)
    assert any("too costly" in m["content"] for m in model.history[-1].messages)
    assert nxt.outcome == "completed"


def test_react_ask_person_waits_for_the_answer():
    r, state = react()
    model = QueueModel(call("ask_person", question="Which time zone?"))
    result, _, _, _ = drive(r, state, model)
    assert result.gate.kind == ASK_GATE
    with pytest.raises(InvalidDecision):
        r.decide(ASK_GATE, result.state, Decision("approve", feedback=" ", author="bob"))
    answered = r.decide(ASK_GATE, result.state, Decision("approve", feedback="Europe/Paris",
                                                         author="bob"))
    assert answered.state["history"][-1]["observation"] == "bob answered: Europe/Paris"
    assert answered.records[0].data["answered_by"] == "bob"


# --- ReWOO -------------------------------------------------------------------------------------
def sketch(*calls, needs=True):
    return {"needs_tools": needs, "sketches": [
        {"query": q, "tool": t, "arguments": a} for q, t, a in calls]}


def test_rewoo_work_runs_concurrently_and_records_failures(monkeypatch):
    together = threading.Barrier(3, timeout=10)  # breaks unless the three calls overlap

    def meet(args):
        together.wait()
        time.sleep(0.05)  # a latency to record
        return f"slept for {args.expression}"

    slow = toolbox.AgentTool("slow", "meets the others", toolbox.CalcArgs, meet)
    real = toolbox.registry

    def with_slow(roots):
        return {**real(roots), "slow": slow}

    monkeypatch.setattr("agents_app.patterns.rewoo.pattern.registry", with_slow)
    w = ReWOO()
    state = w.initial_state("Q", {"max_verify_passes": 0})
    model = QueueModel(sketch(("a", "slow", {"expression": "1"}), ("b", "slow", {"expression": "2"}),
                              ("c", "slow", {"expression": "3"}), ("d", "calculator", {"expression": "1/0"})),
                       {"answer": "From [E1] and [E3] [E9].", "confidence": 0.7})
    result, records, _, stages = drive(w, state, model)
    assert stages == ["sketch", "work", "organize:1"]
    evidence = [r.data for r in records if r.kind == "evidence"]
    assert [e["id"] for e in evidence] == ["E1", "E2", "E3", "E4"]
    assert evidence[3]["ok"] is False and "division by zero" in evidence[3]["error"]
    assert all(e["ok"] for e in evidence[:3]), evidence  # all three met at the barrier
    assert all(e["latency_ms"] >= 50 for e in evidence[:3])
    answer = [r.data for r in records if r.kind == "answer"][0]
    assert answer["citations"] == ["E1", "E3"] and answer["unknown_citations"] == ["E9"]
    organize = model.history[-1].messages[1]["content"]
    assert "[E4] calculator" in organize and "ERROR" in organize


def test_rewoo_without_tools_answers_directly():
    w = ReWOO()
    model = QueueModel(sketch(needs=False), {"answer": "Hello!", "confidence": 0.9})
    result, _, _, stages = drive(w, w.initial_state("Hi", {}), model)
    assert stages == ["sketch", "organize:1"] and result.answer == "Hello!"


def test_rewoo_trims_to_top_k_and_never_offers_person_tools():
    w = ReWOO()
    calls = [(f"q{i}", "calculator", {"expression": str(i)}) for i in range(6)]
    model = QueueModel(sketch(*calls), {"answer": "a [E1]", "confidence": 0.5},
                       {"supported": True})
    result, records, events, _ = drive(w, w.initial_state("Q", {"top_k_sketches": 2}), model)
    assert len([r for r in records if r.kind == "evidence"]) == 2
    assert any(e.kind == "sketches_trimmed" for e in events)
    assert "ask_person" not in model.history[0].messages[0]["content"]


def test_rewoo_failed_verification_reorganizes_once():
    w = ReWOO()
    model = QueueModel(sketch(("q", "calculator", {"expression": "2+2"})),
                       {"answer": "It is 5 [E1].", "confidence": 0.9},
                       {"supported": False, "problems": ["E1 says 4"]},
                       {"answer": "It is 4 [E1].", "confidence": 0.95})
    result, records, _, stages = drive(w, w.initial_state("Q", {"max_verify_passes": 1}), model)
    assert stages == ["sketch", "work", "organize:1", "verify:1", "organize:2"]
    assert result.answer == "It is 4 [E1]."
    assert "E1 says 4" in model.history[-1].messages[1]["content"]


def test_rewoo_uses_function_fake_for_a_whole_run():
    def reply(messages, info):
        if info.schema.__name__ == "Sketch":
            return sketch(("time", "current_time", {}))
        if info.schema.__name__ == "Organized":
            return {"answer": "Now [E1].", "confidence": 0.8}
        return {"supported": True}

    w = ReWOO()
    result, _, _, _ = drive(w, w.initial_state("What time is it?", {}), FunctionModel(reply))
    assert result.outcome == "completed" and result.answer == "Now [E1]."


def test_analyzer_tool_reports_ruff_and_bandit_findings():
    tools = toolbox.registry([])
    ok, out, _ = toolbox.run_tool(tools, "analyze_python",
                                  {"code": "import os\n\ndef f(x):\n    return eval(x)\n"})
    assert ok and "eval" in out.lower() and "line 4" in out
    assert "F401" in out  # ruff: os imported but unused


def test_a_tool_flagged_for_approval_always_waits(monkeypatch):
    real = toolbox.registry

    def flagged(roots):
        tools = real(roots)
        calc = tools["calculator"]
        tools["calculator"] = toolbox.AgentTool(calc.name, calc.description, calc.schema,
                                                calc.fn, needs_approval=True)
        return tools

    monkeypatch.setattr("agents_app.patterns.react.pattern.registry", flagged)
    r, state = react()  # no per-run approval list
    result, _, _, _ = drive(r, state, QueueModel(call("calculator", expression="1+1")))
    assert result.gate.kind == APPROVAL_GATE
