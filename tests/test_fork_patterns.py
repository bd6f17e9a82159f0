"""Forks of every pattern (issue 33, the patterns' part), through the real engine with the
offline model: a fork from a stage in the middle of each pattern runs to its end, paying only
for what follows; each pattern's edit at its fork point is applied as its own records, and a
bad edit is refused with a plain message, saving nothing. Change runs (git) and code reviews
(their review rows, pull requests never published by a fork) have files of their own:
tests/test_fork_changes.py and tests/test_fork_reviews.py."""

from __future__ import annotations

import pytest

from agents_app import engine
from agents_app.forking.create import ForkRefused, create_fork
from agents_app.models import RUNNABLE, Checkpoint, ModelCall, Run, RunItem
from agents_app.patterns import get_pattern
from agents_app.patterns.base import Decision

# Parallel stages answer on helper threads with their own connections: commit like a worker.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_schedule(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)


def offline(pattern: str) -> dict[str, str]:
    return dict.fromkeys(get_pattern(pattern).roles, "offline/default")


def drive(run_id: int) -> Run:
    """Run it here until it waits for a person or ends."""
    engine.run_inline(run_id)
    while Run.objects.get(pk=run_id).status in RUNNABLE:
        engine.run_inline(run_id)
    return Run.objects.get(pk=run_id)


def start(user, pattern: str, task: str, **options) -> Run:
    run = engine.create_run(user, pattern, task, options=options, models=offline(pattern),
                            enqueue=False)
    return drive(run.pk)


def seq_of(run: Run, stage: str, gate: str = "") -> int:
    return Checkpoint.objects.get(run=run, stage=stage, gate=gate).seq


def fork(parent: Run, user, stage: str, gate: str = "", **kw) -> Run:
    return create_fork(parent, user, seq=seq_of(parent, stage, gate), enqueue=False, **kw)


def decide(run: Run, user, action: str = "approve", **kw) -> Run:
    engine.decide(run, user, run.stage_seq, Decision(action=action, author=user.get_username(),
                                                     **kw), enqueue=False)
    return drive(run.pk)


def items(run: Run, kind: str) -> dict[str, dict]:
    return {i.key: i.data for i in RunItem.objects.filter(run=run, kind=kind)}


def own_stages(run: Run) -> list[str]:
    return sorted({c.stage for c in ModelCall.objects.filter(run=run)})


def refused(parent: Run, user, stage: str, edits, gate: str = "") -> str:
    before = Run.objects.count()
    with pytest.raises(ForkRefused) as exc:
        fork(parent, user, stage, gate, edits=edits)
    assert Run.objects.count() == before  # nothing saved
    return str(exc.value)


# --- debate ------------------------------------------------------------------------------------
def test_a_debate_forked_from_its_second_round_argues_it_again_and_is_judged(alice):
    parent = start(alice, "debate", "Should we adopt microservices?", max_rounds=3)
    assert parent.status == "completed", parent.error
    child = drive(fork(parent, alice, "round:2").pk)
    assert child.status == "completed", child.error
    assert own_stages(child) == ["judge", "round:2", "round:3"]  # round 1 is its parent's
    arguments = items(child, "argument")
    assert sorted(arguments) == sorted(items(parent, "argument"))
    assert {a["round"] for a in arguments.values()} == {1, 2, 3}
    assert items(child, "conclusion") and child.answer
    # Forked from the judge: only the judge's call is made again.
    judged = drive(fork(parent, alice, "judge").pk)
    assert judged.status == "completed" and own_stages(judged) == ["judge"]


def test_a_debate_has_nothing_to_edit_at_a_round(alice):
    parent = start(alice, "debate", "Tabs or spaces?", max_rounds=2)
    assert "Nothing can be edited" in refused(parent, alice, "round:2", {"text": "x"})


# --- reflective --------------------------------------------------------------------------------
def test_a_reflective_fork_with_its_draft_edited_before_the_critic(alice):
    parent = start(alice, "reflective", "Explain vector databases briefly", max_reflections=3)
    assert parent.status == "completed", parent.error
    edited = "# Vector databases\n\nThey store embeddings and find the nearest ones fast."
    child = fork(parent, alice, "critique:1", edits={"text": edited})
    assert child.state["draft"] == edited
    draft = items(child, "draft")["1"]
    assert draft["text"] == edited and draft["edited_by"] == "alice"
    assert items(parent, "draft")["1"]["text"] != edited  # the parent's row is untouched
    child = drive(child.pk)
    assert child.status == "completed", child.error
    [critic] = ModelCall.objects.filter(run=child, stage="critique:1")
    assert edited in critic.messages[-1]["content"]  # the critic read the edited draft
    assert "actor" not in {c.role for c in ModelCall.objects.filter(run=child,
                                                                    stage="critique:1")}
    assert not ModelCall.objects.filter(run=child, stage="draft:1").exists()


@pytest.mark.parametrize(("text", "message"), [
    ("   ", "The draft is empty."),
    ("bad \x00 byte", "control characters"),
    ("x" * 50_001, "the limit is 50,000"),
])
def test_a_bad_draft_is_refused_with_a_message(alice, text, message):
    parent = start(alice, "reflective", "Explain vector databases briefly", max_reflections=2)
    assert message in refused(parent, alice, "critique:1", {"text": text})


def test_a_draft_cannot_be_edited_while_the_actor_writes_it(alice):
    parent = start(alice, "reflective", "Explain vector databases briefly", max_reflections=2)
    assert "Nothing can be edited" in refused(parent, alice, "draft:2", {"text": "x"})
    child = drive(fork(parent, alice, "draft:2").pk)  # as it was: the actor revises again
    assert child.status == "completed" and own_stages(child)[0] == "critique:2"


# --- team lead ---------------------------------------------------------------------------------
TEAM = "researcher: finds and summarizes information\nwriter: writes clear, concise reports"


def test_a_team_lead_fork_with_its_subtasks_edited(alice):
    parent = start(alice, "team_lead", "Write a short report on solar power", team=TEAM,
                   strategy="sequential")
    assert parent.status == "completed", parent.error
    edits = {"subtasks": [{"assignee": "Writer", "task": "Write two lines on solar panels."}]}
    child = fork(parent, alice, "work:1", edits=edits)
    [only] = child.state["subtasks"]
    assert (only["assignee"], only["task"], only["status"]) == (
        "writer", "Write two lines on solar panels.", "pending")
    assert list(items(child, "subtask")) == ["T1:pending"]
    assert items(child, "subtask")["T1:pending"]["edited_by"] == "alice"
    child = drive(child.pk)
    assert child.status == "completed", child.error
    [member] = ModelCall.objects.filter(run=child, role="member")
    assert "Write two lines on solar panels." in member.messages[-1]["content"]
    assert not ModelCall.objects.filter(run=child, stage="delegate").exists()
    assert [s["status"] for s in child.state["subtasks"]] == ["done"]


def test_a_dynamic_team_forked_at_the_leads_review_runs_to_its_end(alice):
    parent = start(alice, "team_lead", "Write a short report on solar power", team=TEAM)
    assert parent.status == "completed", parent.error
    child = drive(fork(parent, alice, "review:1").pk)
    assert child.status == "completed", child.error
    assert own_stages(child)[0] == "review:1" and "delegate" not in own_stages(child)


@pytest.mark.parametrize(("subtasks", "message"), [
    ([], "keep at least one"),
    ([{"assignee": "editor", "task": "Edit it."}], "“editor” is not on the team"),
    ([{"assignee": "writer", "task": "  "}], "Subtask 1 is empty."),
    ([{"assignee": "writer", "task": "a\x1bb"}], "control characters"),
    ([{"assignee": "writer", "task": "t"}] * 11, "at most 10"),
    ([{"task": "no one"}], "The edit is not valid"),
])
def test_bad_subtasks_are_refused(alice, subtasks, message):
    parent = start(alice, "team_lead", "Write a short report on solar power", team=TEAM,
                   strategy="parallel")
    assert message in refused(parent, alice, "work:1", {"subtasks": subtasks})


# --- ReWOO -------------------------------------------------------------------------------------
def test_a_rewoo_fork_with_its_plan_of_tool_calls_edited(alice):
    parent = start(alice, "rewoo", "What is (3 + 4) * 6 and what time is it?")
    assert parent.status == "completed", parent.error
    assert len(parent.state["sketches"]) == 2
    edits = {"sketches": [{"query": "What is 6 * 7?", "tool": "calculator",
                           "arguments": {"expression": "6 * 7"}}]}
    child = fork(parent, alice, "work", edits=edits)
    assert list(items(child, "sketch")) == ["S1"]  # S2 is left out of the fork's plan
    assert items(child, "sketch")["S1"]["arguments"] == {"expression": "6 * 7"}
    child = drive(child.pk)
    assert child.status == "completed", child.error
    [evidence] = items(child, "evidence").values()
    assert evidence["ok"] and evidence["output"].endswith("= 42")
    assert not ModelCall.objects.filter(run=child, role="planner").exists()
    assert len(items(parent, "evidence")) == 2  # the parent's evidence is its own


def test_a_rewoo_fork_from_its_answer_runs_to_its_end(alice):
    parent = start(alice, "rewoo", "What is (3 + 4) * 6?")
    child = drive(fork(parent, alice, "organize:1").pk)
    assert child.status == "completed", child.error
    assert own_stages(child)[0] == "organize:1"
    assert items(child, "evidence") == items(parent, "evidence")


@pytest.mark.parametrize(("sketches", "message"), [
    ([], "The plan has no tool calls"),
    ([{"query": "q", "tool": "shell", "arguments": {}}], "this run has no tool 'shell'"),
    ([{"query": "q", "tool": "calculator", "arguments": {"expr": "1"}}], "Call 1:"),
    ([{"query": "", "tool": "calculator", "arguments": {"expression": "1"}}],
     "Call 1's question is empty."),
    ([{"query": "q", "tool": "calculator", "arguments": {"expression": "1\x00"}}],
     "control characters"),
    ([{"query": "q", "tool": "calculator", "arguments": {"expression": "1"}}] * 5,
     "at most 4"),
])
def test_bad_tool_plans_are_refused(alice, sketches, message):
    parent = start(alice, "rewoo", "What is (3 + 4) * 6?")
    assert message in refused(parent, alice, "work", {"sketches": sketches})


# --- ReAct -------------------------------------------------------------------------------------
def test_a_react_fork_at_the_approval_gate_with_the_arguments_edited(alice):
    parent = start(alice, "react", "What is 6*7?", approval=["calculator"])
    assert parent.gate == "tool_approval"
    parent = decide(parent, alice)
    assert parent.status == "completed", parent.error
    child = fork(parent, alice, "act:1", "tool_approval",
                 edits={"arguments": {"expression": "6*8"}})
    assert child.status == "awaiting_tool_approval"
    assert child.state["pending"]["input"] == {"expression": "6*8"}
    child = decide(child, alice)  # approved as the fork now shows it
    assert child.status == "completed", child.error
    step = items(child, "step")["1"]
    assert step["input"] == {"expression": "6*8"} and step["observation"].endswith("48")
    assert items(parent, "step")["1"]["observation"].endswith("42")


@pytest.mark.parametrize(("arguments", "message"), [
    ({"expression": "1\x00"}, "control characters"),
    ({"expr": "1"}, "calculator"),
    ({}, "calculator"),
])
def test_bad_arguments_are_refused(alice, arguments, message):
    parent = start(alice, "react", "What is 6*7?", approval=["calculator"])
    assert message in refused(parent, alice, "act:1", {"arguments": arguments},
                              gate="tool_approval")


def test_a_react_fork_from_a_later_iteration_runs_to_its_end(alice):
    parent = start(alice, "react", "What is 6*7?")
    assert parent.status == "completed", parent.error
    child = drive(fork(parent, alice, "step:2").pk)
    assert child.status == "completed" and own_stages(child) == ["step:2"]
    assert child.answer == parent.answer


# --- vote --------------------------------------------------------------------------------------
def test_a_vote_fork_at_its_gate_with_the_grouping_edited(alice):
    parent = start(alice, "vote", "What is the capital of Australia?")
    assert parent.status == "awaiting_vote_pick", parent.error
    voters = sorted(v for g in parent.state["groups"] for v in g["voters"])
    child = fork(parent, alice, parent.stage, "vote_pick", edits={"groups": [
        {"voters": voters, "label": "All the same", "representative": voters[-1]}]})
    [group] = child.state["groups"]
    assert group["voters"] == voters and group["label"] == "All the same"
    grouping = items(child, "grouping")["1"]
    assert grouping["agreement"] == 100 and grouping["edited_by"] == "alice"
    assert "Grouped by alice" in grouping["notes"][0]
    assert items(parent, "grouping")["1"]["agreement"] < 100
    child = decide(child, alice, "pick", edits={"group": 1})
    assert child.status == "completed", child.error
    assert child.answer == group["answer"]


def test_a_vote_forked_from_its_grouping_runs_to_its_gate(alice):
    parent = start(alice, "vote", "What is the capital of Australia?")
    child = drive(fork(parent, alice, "aggregate:1").pk)
    assert child.status == "awaiting_vote_pick" and own_stages(child) == ["aggregate:1"]


@pytest.mark.parametrize(("groups", "message"), [
    ([], "has no groups"),
    ([{"voters": [1, 2]}], "Voter 3 is in no group"),
    ([{"voters": [1, 2]}, {"voters": [2, 3]}], "Voter 2 is in groups 1 and 2"),
    ([{"voters": [1, 2, 3, 9]}], "names voter 9, who gave no answer"),
    ([{"voters": [1, 2, 3], "representative": 5}], "representative, voter 5"),
    ([{"voters": [1, 2, 3], "label": "a\x00b"}], "control characters"),
    ([{"voters": [1, 2, 3], "label": "x" * 81}], "the limit is 80"),
])
def test_bad_groupings_are_refused(alice, groups, message):
    parent = start(alice, "vote", "What is the capital of Australia?")
    assert message in refused(parent, alice, parent.stage, {"groups": groups}, gate="vote_pick")


# --- replays: every call from the journal, every decision reused --------------------------------
@pytest.mark.parametrize(("pattern", "task", "options"), [
    ("debate", "Tabs or spaces?", {}),
    ("reflective", "Explain vector databases briefly", {}),
    ("team_lead", "Write a short report on solar power", {"team": TEAM}),
    ("rewoo", "What is (3 + 4) * 6?", {}),
    ("react", "What is 6*7?", {"approval": ["calculator"]}),
    ("vote", "What is the capital of Australia?", {}),
])
def test_a_replay_of_each_pattern_ends_where_the_original_did(alice, pattern, task, options):
    parent = start(alice, pattern, task, **options)
    while parent.status.startswith("awaiting"):  # a person decides at each gate
        parent = decide(parent, alice, *(("pick",) if pattern == "vote" else ()),
                        **({"edits": {"group": 1}} if pattern == "vote" else {}))
    assert parent.status == "completed", parent.error
    replay = drive(create_fork(parent, alice, kind="replay", enqueue=False).pk)
    assert replay.status == "completed", replay.error
    assert replay.answer == parent.answer
    calls = ModelCall.objects.filter(run=replay)
    assert calls.count() == ModelCall.objects.filter(run=parent).count()
    assert all(c.replayed_from_id for c in calls)
    # A gate's decision was reused: the working time or a voter's latency is no part of it.
    decided = Checkpoint.objects.filter(run=replay).exclude(decision=None)
    assert all(c.decision["how"] == "reused" for c in decided)


# --- from any stage ----------------------------------------------------------------------------
def settle(run: Run, user) -> Run:
    """Decide at every gate as a person would, until the run ends."""
    while run.status.startswith("awaiting"):
        if run.pattern == "vote":
            run = decide(run, user, "pick", edits={"group": 1})
        else:
            run = decide(run, user)
    return run


@pytest.mark.parametrize(("pattern", "task", "options"), [
    ("plan_execute", "Collect the logs, then find the error.", {}),
    ("debate", "Tabs or spaces?", {"max_rounds": 2}),
    ("reflective", "Explain vector databases briefly", {}),
    ("team_lead", "Write a short report on solar power", {"team": TEAM}),
    ("rewoo", "What is (3 + 4) * 6 and what time is it?", {}),
    ("react", "What is 6*7?", {"approval": ["calculator"]}),
    ("vote", "What is the capital of Australia?", {"max_rounds": 2}),
])
def test_a_fork_from_every_stage_of_a_run_runs_to_its_end(alice, pattern, task, options):
    parent = settle(start(alice, pattern, task, **options), alice)
    assert parent.status == "completed", parent.error
    points = list(Checkpoint.objects.filter(run=parent).order_by("seq"))
    assert len(points) >= 3
    for cp in points:
        if not cp.stage:  # the run's end: nothing follows
            continue
        child = settle(drive(create_fork(parent, alice, seq=cp.seq, enqueue=False).pk), alice)
        assert child.status == "completed", (cp.seq, cp.stage, cp.gate, child.error)
        assert child.answer, (cp.seq, cp.stage)
