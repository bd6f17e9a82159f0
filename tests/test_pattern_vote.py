"""Quorum vote's logic with scripted models: voters in parallel, the aggregator's grouping
checked and repaired, the threshold, the gate's decisions, and the offline replies."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pydantic import ValidationError

from agents_app.llm import offline
from agents_app.patterns import PATTERNS
from agents_app.patterns.base import Decision, InvalidDecision, ModelError
from agents_app.patterns.testing import FunctionModel, QueueModel
from agents_app.patterns.vote import GATE, PATTERN, Grouping
from agents_app.patterns.vote.grouping import normalise, settle, settled
from agents_app.patterns.vote.prompts import EARLIER, FEEDBACK

TASK = "What is the capital of Australia?"


def start(**options) -> dict:
    return PATTERN.initial_state(TASK, options)


def run_until_stop(state, client, stage="vote:1"):
    """Run stages until a gate or the end; (last result, stages run)."""
    ran = []
    while True:
        ran.append(stage)
        result = PATTERN.run_stage(stage, state, client)
        state = result.state
        if result.gate or result.outcome or not result.next_stage:
            return result, ran
        stage = result.next_stage


def scripted(answers: dict[str, str], grouping: dict | None = None, fail_aggregator=False):
    """Voter i answers ``answers["voter_i"]``; the aggregator returns ``grouping``."""

    def fn(messages, info):
        if info.role == "aggregator":
            if fail_aggregator:
                return ModelError("aggregator down")
            return grouping
        return answers[info.role]

    return FunctionModel(fn)


def group(voters, rep=None, label="x"):
    return {"voters": voters, "representative": rep or voters[0], "label": label}


# --- options ----------------------------------------------------------------------------------
def test_options_defaults_and_limits():
    opts = PATTERN.check_options({})
    assert (opts["voters"], opts["threshold"], opts["max_rounds"]) == (3, 75, 2)
    for bad in ({"voters": 1}, {"voters": 8}, {"threshold": 49}, {"threshold": 101},
                {"max_rounds": 0}, {"max_rounds": 6}):
        with pytest.raises(ValidationError):
            PATTERN.check_options(bad)


def test_each_voter_slot_is_a_role_and_even_voters_default_to_another_family():
    assert PATTERN.roles == (*(f"voter_{i}" for i in range(1, 8)), "aggregator")
    assert PATTERN.role_defaults == {"voter_2": "other-family", "voter_4": "other-family",
                                     "voter_6": "other-family"}


# --- voting -----------------------------------------------------------------------------------
def test_voters_answer_in_parallel_each_under_its_own_role():
    barrier = threading.Barrier(3, timeout=5)

    def fn(messages, info):
        if info.role == "aggregator":
            return {"groups": [group([1, 2, 3], 2, "Canberra")], "summary": "All agree."}
        barrier.wait()  # all three voters are in their call at once, or this times out
        return "Canberra."

    client = FunctionModel(fn)
    result, ran = run_until_stop(start(), client)
    assert ran == ["vote:1", "aggregate:1"]
    assert result.outcome == "completed" and result.answer == "Canberra."
    assert sorted(client.roles()) == ["aggregator", "voter_1", "voter_2", "voter_3"]
    voter_calls = [c for c in client.history if c.role != "aggregator"]
    assert len({c.prompt for c in voter_calls}) == 1  # the same task, independently
    assert TASK in voter_calls[0].prompt


def test_each_answer_is_an_item_and_the_grouping_is_recorded():
    client = scripted({"voter_1": "Canberra", "voter_2": "Sydney", "voter_3": "Canberra"},
                      {"groups": [group([1, 3], 3, "Canberra"), group([2], label="Sydney")]})
    vote = PATTERN.run_stage("vote:1", start(), client)
    assert vote.next_stage == "aggregate:1"
    assert [(i.kind, i.key, i.data["text"]) for i in vote.records] == [
        ("answer", "1:1", "Canberra"), ("answer", "1:2", "Sydney"), ("answer", "1:3", "Canberra")]
    agg = PATTERN.run_stage("aggregate:1", vote.state, client)
    (record,) = agg.records
    assert (record.kind, record.key) == ("grouping", "1")
    assert record.data["agreement"] == 67 and record.data["threshold"] == 75
    assert [g["voters"] for g in record.data["groups"]] == [[1, 3], [2]]
    assert record.data["groups"][0]["answer"] == "Canberra"  # the representative's own text
    assert agg.gate.kind == GATE and agg.gate.payload["agreement"] == 67
    assert agg.outcome is None


def test_at_the_threshold_the_run_completes_with_the_majority_answer():
    answers = {"voter_1": "A", "voter_2": "B", "voter_3": "A"}
    grouping = {"groups": [group([2], label="B"), group([1, 3], 1, "A")]}
    result, _ = run_until_stop(start(threshold=66), scripted(answers, grouping))
    assert result.outcome == "completed" and result.answer == "A"
    assert result.state["chosen"]["group"] == 1
    result, _ = run_until_stop(start(threshold=67), scripted(answers, grouping))
    assert result.gate is not None  # 2 of 3 is 66.7%, below 67%


def test_a_tie_for_the_largest_group_never_settles_the_vote():
    answers = {f"voter_{i}": "A" if i <= 2 else "B" for i in range(1, 5)}
    grouping = {"groups": [group([1, 2], label="A"), group([3, 4], label="B")]}
    result, _ = run_until_stop(start(voters=4, threshold=50), scripted(answers, grouping))
    assert result.gate is not None and result.records[0].data["agreement"] == 50


def test_a_failed_voter_counts_against_agreement_and_is_said():
    client = scripted({"voter_1": "A", "voter_2": ModelError("rate limited"), "voter_3": "A"},
                      {"groups": [group([1, 3])]})
    vote = PATTERN.run_stage("vote:1", start(), client)
    assert vote.records[1].data["error"] == "rate limited"
    assert any(e.kind == "vote_failed" for e in vote.events)
    agg = PATTERN.run_stage("aggregate:1", vote.state, client)
    assert agg.records[0].data["agreement"] == 67 and agg.gate is not None


def test_no_voter_answering_fails_the_run():
    client = scripted({f"voter_{i}": ModelError("down") for i in (1, 2, 3)})
    result = PATTERN.run_stage("vote:1", start(), client)
    assert result.outcome == "failed" and "no voter answered" in result.error


def test_an_empty_answer_is_no_answer():
    client = scripted({"voter_1": "  ", "voter_2": "A", "voter_3": "A"}, {"groups": [group([2, 3])]})
    vote = PATTERN.run_stage("vote:1", start(), client)
    assert vote.records[0].data["error"] == "The model returned an empty answer."


def test_a_failed_aggregator_falls_back_to_text_grouping():
    client = scripted({"voter_1": "Canberra.", "voter_2": "canberra", "voter_3": "Sydney"},
                      fail_aggregator=True)
    result, _ = run_until_stop(start(threshold=60), client)
    assert result.outcome == "completed" and result.answer == "Canberra."
    assert "aggregator failed" in result.records[0].data["notes"][0]


# --- the aggregator's grouping is checked ----------------------------------------------------------
ANSWERS = {1: "A", 2: "B", 3: "A", 4: "C"}


def test_settle_repairs_a_bad_grouping_deterministically():
    bad = Grouping.model_validate({"groups": [
        {"voters": [1, 3, 3, 9], "representative": 7, "label": "A\x1b[31m"},
        {"voters": [3, 2], "representative": 2, "label": ""},
        {"voters": [], "representative": 0, "label": "nobody"}]})
    groups, notes = settle(bad, ANSWERS)
    assert [g["voters"] for g in groups] == [[1, 3], [2], [4]]  # every voter exactly once
    assert groups[0]["representative"] == 1 and groups[0]["label"] == "A[31m"
    assert groups[1]["label"] == "B"  # an empty label is made from the answer
    assert groups[2]["answer"] == "C"
    assert any("voter 9" in n for n in notes)
    assert any("Voter 3 was put in groups 1 and 2" in n for n in notes)
    assert any("representative, voter 7" in n for n in notes)
    assert any("Voter 4 was in no group" in n for n in notes)
    assert settle(bad, ANSWERS) == (groups, notes)


def test_settle_without_groups_groups_by_text():
    groups, notes = settle(Grouping(groups=[]), {1: "**Yes.**", 2: "yes", 3: "No"})
    assert [g["voters"] for g in groups] == [[1, 2], [3]] and notes


def test_groups_are_ordered_by_size_then_first_voter():
    groups, _ = settle(Grouping.model_validate({"groups": [group([4]), group([2]),
                                                           group([1, 3])]}), ANSWERS)
    assert [g["voters"] for g in groups] == [[1, 3], [2], [4]]


def test_settled_compares_exactly():
    two_of_three = [{"voters": [1, 2]}, {"voters": [3]}]
    assert settled(two_of_three, 3, 66) and not settled(two_of_three, 3, 67)
    assert settled([{"voters": [1, 2, 3]}], 3, 100)
    assert not settled([], 3, 50)


def test_normalise_ignores_case_punctuation_and_markdown():
    assert normalise("**Canberra**.") == normalise("canberra") != normalise("Sydney")


# --- the gate -----------------------------------------------------------------------------------
@pytest.fixture
def at_gate():
    client = scripted({"voter_1": "A", "voter_2": "B", "voter_3": "A"},
                      {"groups": [group([1, 3], label="A"), group([2], label="B")]})
    result, _ = run_until_stop(start(), client)
    assert result.gate is not None
    return result.state


def test_pick_finishes_with_the_groups_answer(at_gate):
    result = PATTERN.decide(GATE, at_gate, Decision("pick", edits={"group": 2}, author="alice"))
    assert result.next_stage == "final:1"
    (record,) = result.records
    assert (record.kind, record.key, record.data["group"], record.data["by"]) == (
        "decision", "1", 2, "alice")
    final = PATTERN.run_stage("final:1", result.state, QueueModel())
    assert final.outcome == "completed" and final.answer == "B"


def test_edit_finishes_with_the_edited_answer(at_gate):
    result = PATTERN.decide(GATE, at_gate, Decision("edit", edits={"group": 1,
                                                                   "answer": " A, refined "}))
    assert result.state["chosen"] == {"round": 1, "group": 1, "answer": "A, refined",
                                      "edited": True, "by": ""}
    assert PATTERN.run_stage("final:1", result.state, QueueModel()).answer == "A, refined"


@pytest.mark.parametrize("decision, message", [
    (Decision("edit", edits={"group": 1, "answer": "  "}), "empty"),
    (Decision("edit", edits={"group": 1, "answer": "A\x00"}), "control characters"),
    (Decision("edit", edits={"group": 1, "answer": "x" * 20_001}), "limit"),
    (Decision("pick", edits={"group": 3}), "no group 3"),
    (Decision("pick", edits={"group": 0}), "no group 0"),
    (Decision("pick", edits={"group": True}), "no group"),
    (Decision("pick", edits=None), "no group"),
    (Decision("approve", edits={"group": 1}), "Pick an answer"),
    (Decision("again", feedback="more\x1b"), "control characters"),
])
def test_bad_decisions_are_refused(at_gate, decision, message):
    with pytest.raises(InvalidDecision, match=message):
        PATTERN.decide(GATE, at_gate, decision)


def test_another_round_gives_the_voters_the_groups_and_the_feedback(at_gate):
    result = PATTERN.decide(GATE, at_gate, Decision("again", feedback="Cite a source."))
    assert result.next_stage == "vote:2" and result.records[0].data["action"] == "again"
    client = scripted({"voter_1": "A", "voter_2": "A", "voter_3": "A"},
                      {"groups": [group([1, 2, 3], label="A")]})
    final, ran = run_until_stop(result.state, client, "vote:2")
    assert ran == ["vote:2", "aggregate:2"] and final.outcome == "completed"
    prompt = client.history[0].prompt
    assert f"## {FEEDBACK}\nCite a source." in prompt and f"## {EARLIER}" in prompt
    assert "Group 1: A (2 voters)" in prompt and "Group 2: B (1 voter)" in prompt


def test_after_the_last_round_only_pick_and_edit_remain():
    client = scripted({"voter_1": "A", "voter_2": "B", "voter_3": "C"},
                      {"groups": [group([1]), group([2]), group([3])]})
    result, _ = run_until_stop(start(max_rounds=1), client)
    assert result.gate.payload["last_round"] is True
    with pytest.raises(InvalidDecision, match="the last of 1"):
        PATTERN.decide(GATE, result.state, Decision("again"))
    assert PATTERN.decide(GATE, result.state, Decision("pick", edits={"group": 3})).next_stage \
        == "final:1"


# --- offline --------------------------------------------------------------------------------------
def offline_model():
    assert PATTERNS["vote"] is PATTERN  # loading the registry teaches the offline model
    return FunctionModel(lambda messages, info: offline.reply(
        info.role, info.schema.__name__ if info.schema else None, messages))


def test_offline_voters_disagree_visibly_then_settle_in_another_round():
    result, _ = run_until_stop(start(), offline_model())
    data = result.records[0].data
    assert result.gate is not None and data["agreement"] == 67
    assert [g["voters"] for g in data["groups"]] == [[1, 3], [2]]
    assert data["groups"][0]["label"] != data["groups"][1]["label"]
    assert "Offline model" in data["groups"][0]["answer"] and "Offline model" in data["summary"]
    again = PATTERN.decide(GATE, result.state, Decision("again", feedback="Be brief."))
    final, _ = run_until_stop(again.state, offline_model(), "vote:2")
    assert final.outcome == "completed"
    assert "Be brief." in final.answer and data["groups"][0]["label"] in final.answer


def test_offline_runs_are_deterministic():
    first, _ = run_until_stop(start(voters=5), offline_model())
    second, _ = run_until_stop(start(voters=5), offline_model())
    assert json.dumps(first.state, sort_keys=True) == json.dumps(second.state, sort_keys=True)
    assert [g["voters"] for g in first.state["groups"]] == [[1, 3, 5], [2, 4]]


def test_a_slow_voter_is_left_behind_at_the_timeout():
    def fn(messages, info):
        if info.role == "voter_2":
            time.sleep(1.0)
        if info.role == "aggregator":
            return {"groups": [group([1, 3])]}
        return "A"

    state = start()
    state["options"]["timeout"] = 0.2
    vote = PATTERN.run_stage("vote:1", state, FunctionModel(fn))
    assert "no answer within" in vote.records[1].data["error"]


def test_the_package_imports_no_django():
    import pathlib

    import agents_app.patterns.vote as package

    root = pathlib.Path(package.__file__).parent
    for name in ("__init__.py", "pattern.py", "grouping.py", "prompts.py", "offline.py"):
        text = (root / name).read_text()
        assert "import django" not in text and "from django" not in text, name
