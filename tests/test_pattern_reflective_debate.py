"""Reflective and Debate with scripted fakes: happy paths, limits, and failures."""

from __future__ import annotations

import threading
import time

import pytest

from agents_app.patterns.base import InvalidDecision, Item, ModelError
from agents_app.patterns.debate import Debate, parse_positions
from agents_app.patterns.reflective import Reflective
from agents_app.patterns.testing import FunctionModel, QueueModel


def drive(pattern, state, model, max_stages=30):
    stage, records, events, stages = pattern.first_stage(state), [], [], []
    for _ in range(max_stages):
        stages.append(stage)
        result = pattern.run_stage(stage, state, model)
        state, records, events = result.state, records + result.records, events + result.events
        if result.outcome:
            return result, records, events, stages
        stage = result.next_stage
    raise AssertionError("too many stages")


def critique(approved, issues=(), summary="s", score=5):
    return {"approved": approved, "issues": list(issues), "summary": summary, "score": score}


# --- reflective ----------------------------------------------------------------------------------
def test_reflective_revises_until_the_critic_approves():
    model = QueueModel("draft one", critique(False, ["too vague", "no example"]),
                       "draft two", critique(True, score=9))
    r = Reflective()
    result, records, events, stages = drive(r, r.initial_state("Explain X", {}), model)
    assert result.outcome == "completed" and result.answer == "draft two"
    assert stages == ["draft:1", "critique:1", "draft:2", "critique:2"]
    revise = model.history[2].messages[1]["content"]
    assert "draft one" in revise and "- too vague" in revise and "- no example" in revise
    assert [(i.kind, i.key) for i in records] == [("draft", "1"), ("critique", "1"),
                                                  ("draft", "2"), ("critique", "2")]
    assert records[3].data["approved"] is True


def test_reflective_stops_at_max_reflections_unapproved():
    model = QueueModel("d1", critique(False, ["a"]), "d2", critique(False, ["b"]))
    r = Reflective()
    result, _, events, stages = drive(r, r.initial_state("T", {"max_reflections": 2}), model)
    assert result.outcome == "completed" and result.answer == "d2"
    assert stages[-1] == "critique:2" and "limit of 2 rounds" in events[-1].message


def test_reflective_approval_is_the_field_not_a_word():
    """A critique that says "approved" in its text but not in its field does not stop it."""
    model = QueueModel("d1", critique(False, ["x"], summary="Not approved yet."),
                       "d2", critique(True))
    r = Reflective()
    _, _, _, stages = drive(r, r.initial_state("T", {}), model)
    assert stages == ["draft:1", "critique:1", "draft:2", "critique:2"]


def test_reflective_rejects_a_critique_that_does_not_fit_the_schema():
    model = QueueModel("d1", "approved")  # free text, no structure
    r = Reflective()
    with pytest.raises(ModelError):
        drive(r, r.initial_state("T", {}), model)


# --- debate --------------------------------------------------------------------------------------
POSITIONS = [{"name": "Optimist", "stance": "for"}, {"name": "Skeptic", "stance": "against"}]


def debate_model(fail=None, meet=None):
    seen = []
    lock = threading.Lock()

    def reply(messages, info):
        if info.role == "judge":
            return {"conclusion": "Both had a point.", "favoured": "Skeptic",
                    "key_points": ["cost"]}
        name = messages[0]["content"].split('"')[1]
        rnd = messages[1]["content"].rsplit("Round ", 1)[1].split(" ")[0]
        with lock:
            seen.append((name, rnd, time.monotonic()))
        if meet:
            meet.wait()
        if fail and fail(name, rnd):
            return ModelError("provider down")
        return f"{name} argues in round {rnd}."
    return FunctionModel(reply), seen


def test_debate_rounds_then_judge_with_transcript():
    model, _ = debate_model()
    d = Debate()
    state = d.initial_state("Microservices?", {"positions": POSITIONS, "max_rounds": 2})
    result, records, events, stages = drive(d, state, model)
    assert stages == ["round:1", "round:2", "judge"]
    assert result.outcome == "completed" and result.answer == "Both had a point."
    args = [r for r in records if r.kind == "argument"]
    assert [(a.data["round"], a.data["position"]) for a in args] == [
        (1, "Optimist"), (1, "Skeptic"), (2, "Optimist"), (2, "Skeptic")]
    # Round 2 sees round 1's transcript; round 1 sees none.
    round1 = [c for c in model.history if c.role == "debater"][:2]
    round2 = [c for c in model.history if c.role == "debater"][2:]
    assert all("Transcript so far" not in c.messages[1]["content"] for c in round1)
    assert all("Skeptic argues in round 1." in c.messages[1]["content"] for c in round2)
    judge = [c for c in model.history if c.role == "judge"][0].messages[1]["content"]
    assert "### Round 2 — Skeptic" in judge
    (conclusion,) = [r for r in records if r.kind == "conclusion"]
    assert conclusion.data["favoured"] == "Skeptic"


def test_debate_positions_argue_side_by_side():
    together = threading.Barrier(3, timeout=10)  # breaks unless the three calls overlap
    model, seen = debate_model(meet=together)
    d = Debate()
    state = d.initial_state("Q", {"positions": POSITIONS + [{"name": "Neutral", "stance": "x"}],
                                  "max_rounds": 1})
    result, records, _, _ = drive(d, state, model)
    assert len(seen) == 3 and not together.broken
    assert len([r for r in records if r.kind == "argument"]) == 3


def test_debate_a_silent_position_is_recorded_and_the_debate_goes_on():
    model, _ = debate_model(fail=lambda name, rnd: name == "Skeptic" and rnd == "1")
    d = Debate()
    result, records, events, _ = drive(d, d.initial_state("Q", {"positions": POSITIONS,
                                                                "max_rounds": 2}), model)
    assert result.outcome == "completed"
    silent = [r for r in records if r.kind == "argument" and r.data["error"]]
    assert [(s.data["round"], s.data["position"]) for s in silent] == [(1, "Skeptic")]
    assert any(e.kind == "argument_failed" for e in events)


def test_debate_fails_when_nobody_answers():
    model, _ = debate_model(fail=lambda name, rnd: True)
    d = Debate()
    result, _, _, stages = drive(d, d.initial_state("Q", {"positions": POSITIONS}), model)
    assert result.outcome == "failed" and "no position answered" in result.error
    assert stages == ["round:1"]


def test_debate_judge_cannot_favour_an_invented_position():
    model = FunctionModel(lambda m, info: {"conclusion": "c", "favoured": "Nobody"}
                          if info.role == "judge" else "arg")
    d = Debate()
    result, records, _, _ = drive(d, d.initial_state("Q", {"positions": POSITIONS,
                                                           "max_rounds": 1}), model)
    assert [r for r in records if isinstance(r, Item) and r.kind == "conclusion"][0] \
        .data["favoured"] == ""


@pytest.mark.parametrize("text, message", [
    ("Only: one", "2 to 5"),
    ("A: x\nB: y\nC: z\nD: w\nE: v\nF: u", "2 to 5"),
    ("A x\nB: y", "name: stance"),
    ("A: x\na: y", "named twice"),
    ("<b>: x\nB: y", "letters, digits"),
    ("A:\nB: y", "name: stance"),
])
def test_parse_positions_refuses_bad_input(text, message):
    with pytest.raises(InvalidDecision, match=message):
        parse_positions(text)


def test_parse_positions():
    assert parse_positions("For: yes\n\n Against : no ") == [
        {"name": "For", "stance": "yes"}, {"name": "Against", "stance": "no"}]
