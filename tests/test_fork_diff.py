"""The stage-aligned comparison of runs (agents_app/forking/diff.py): plain Python."""

from __future__ import annotations

from agents_app.forking.diff import (
    CallRecord,
    StageRecord,
    align,
    as_text,
    compare,
    side_by_side,
    text_diff,
)


def stage(seq, name, *, prompt="p", response="r", output=None, decision=None, tokens=10,
          cost=0.001, latency=100):
    return StageRecord(seq, name, name.title(), calls=[CallRecord(
        key=name, role="planner", model="offline/default", prompt=prompt, response=response,
        prompt_tokens=tokens, completion_tokens=tokens, cost=cost, latency_ms=latency)],
        output=output, decision=decision)


def test_identical_runs_do_not_diverge():
    a = [stage(0, "plan"), stage(1, "step:1"), stage(2, "synthesize")]
    b = [stage(0, "plan"), stage(1, "step:1"), stage(2, "synthesize")]
    diff = compare(a, b)
    assert diff.divergence is None and all(r.same for r in diff.rows)


def test_the_first_differing_stage_is_marked_with_its_prompt_and_deltas():
    a = [stage(0, "plan"), stage(1, "step:1", prompt="Do A"), stage(2, "synthesize")]
    b = [stage(0, "plan"), stage(1, "step:1", prompt="Do B", tokens=30, cost=0.004),
         stage(2, "synthesize")]
    diff = compare(a, b, ("run 1", "run 2"))
    assert diff.divergence == 1
    row = diff.first_divergent
    assert "-Do A" in row.prompts.lines and "+Do B" in row.prompts.lines
    assert row.prompts.lines[0] == "--- run 1"
    assert row.tokens_delta == 40 and round(row.cost_delta, 6) == 0.003
    assert diff.rows[2].same


def test_a_stage_only_one_run_has_is_paired_with_nothing():
    a = [stage(0, "plan"), stage(1, "step:1"), stage(2, "synthesize")]
    b = [stage(0, "plan"), stage(1, "step:1"), stage(2, "step:2"), stage(3, "synthesize")]
    pairs = align(a, b)
    assert [(x and x.stage, y and y.stage) for x, y in pairs] == [
        ("plan", "plan"), ("step:1", "step:1"), (None, "step:2"),
        ("synthesize", "synthesize")]
    assert compare(a, b).divergence == 2


def test_outputs_and_decisions_are_compared_as_sorted_json():
    a = [stage(0, "plan", output={"steps": ["a", "b"], "goal": "g"},
               decision={"action": "approve"})]
    b = [stage(0, "plan", output={"goal": "g", "steps": ["a", "b"]},
               decision={"action": "approve"})]
    assert compare(a, b).divergence is None
    c = [stage(0, "plan", output={"goal": "g", "steps": ["a", "c"]},
               decision={"action": "approve", "edited": True})]
    row = compare(a, c).rows[0]
    assert not row.outputs.same and not row.decisions.same
    assert as_text({"b": 1, "a": 2}).index('"a"') < as_text({"b": 1, "a": 2}).index('"b"')


def test_a_long_diff_is_cut_and_says_how_much():
    a = "\n".join(f"line {i}" for i in range(2000))
    b = "\n".join(f"line {i} changed" for i in range(2000))
    d = text_diff(a, b)
    assert not d.same and len(d.lines) == 400 and d.cut > 3000


def test_several_runs_side_by_side_on_the_first():
    base = [stage(0, "plan"), stage(1, "step:1"), stage(2, "synthesize")]
    same = [stage(0, "plan"), stage(1, "step:1"), stage(2, "synthesize")]
    other = [stage(0, "plan"), stage(1, "step:1", response="else"), stage(2, "step:2"),
             stage(3, "synthesize")]
    columns, first = side_by_side([base, same, other])
    assert [c.name for c in columns] == ["Plan", "Step:1", "Step:2", "Synthesize"]
    assert [c.same for c in columns] == [True, False, False, True]
    assert first == 1
    assert columns[2].stages[0] is None and columns[2].stages[2].stage == "step:2"
