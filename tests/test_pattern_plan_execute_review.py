"""Plan → execute → review on real temporary git repositories, with scripted models that make
real edits through the sandboxed tools. No Django: the pattern is driven stage by stage."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agents_app.llm.families import model_family, same_family
from agents_app.patterns.base import Decision, InvalidDecision
from agents_app.patterns.plan_execute_review import (
    ESCALATION_GATE,
    MERGE_GATE,
    PLAN_GATE,
    PlanExecuteReview,
)
from agents_app.patterns.plan_execute_review.schemas import AgentWorked, MergeRequestChanged
from agents_app.patterns.testing import QueueModel
from agents_app.repos import gitops

PATTERN = PlanExecuteReview()


def git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "proj"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    (path / "greet.py").write_text('def greet(name):\n    return "Helo, " + name\n')
    (path / "test_greet.py").write_text(
        "import unittest\nfrom greet import greet\n\n\nclass T(unittest.TestCase):\n"
        "    def test_greet(self):\n        self.assertEqual(greet('Ann'), 'Hello, Ann')\n\n\n"
        "if __name__ == '__main__':\n    unittest.main()\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


TEST_CMD = [sys.executable, "-m", "unittest", "-q"]


def start(repo, tmp_path, **options):
    opts = {"repo": str(repo), "base": "main", "worktree_root": str(tmp_path / "wt"),
            "test_command": TEST_CMD, "test_allowlist": [TEST_CMD], "test_timeout": 60,
            **options}
    state = PATTERN.initial_state("Fix the greeting typo.", opts)
    return PATTERN.bind_run(state, 7)


def turn(tool=None, **args):
    return {"thought": "t", "action": {"tool": tool, "args": args} if tool else None,
            "done": tool is None}


PLAN = {"goal": "Fix the typo in greet()", "files": ["greet.py"], "approach": "Edit the string.",
        "steps": ["Replace Helo with Hello in greet.py", "Run the tests"],
        "test_strategy": "test_greet.py", "risks": []}
FIX = turn("replace_in_file", path="greet.py", search="Helo", replacement="Hello")
REPORT = {"summary": "Fixed the typo.", "done": ["Replaced the word"], "tests": "pass"}
APPROVE = {"approve": True, "summary": "Matches the plan; tests pass."}


def reject(kind, reason="wrong", comments=None):
    return {"approve": False, "summary": "No.", "rejection_kind": kind, "reason": reason,
            "comments": comments or [{"file": "greet.py", "line": 2, "problem": "p",
                                      "requested_change": "c"}]}


class Driver:
    """Runs stages until a gate or the end, collecting records and events like the engine."""

    def __init__(self, state, model):
        self.state, self.model = state, model
        self.stage = PATTERN.first_stage(state)
        self.gate = None
        self.outcome = None
        self.records: list = []
        self.events: list = []
        self.stages: list[str] = []

    def _apply(self, result):
        self.state = result.state
        self.records += result.records
        self.events += result.events
        self.gate = result.gate.kind if result.gate else None
        self.outcome = result.outcome
        self.error = result.error
        self.stage = result.next_stage

    def run(self, max_stages=30):
        for _ in range(max_stages):
            self.stages.append(self.stage)
            self._apply(PATTERN.run_stage(self.stage, self.state, self.model))
            if self.gate or self.outcome:
                return self
        raise AssertionError("too many stages")

    def decide(self, action, feedback="", edits=None):
        assert self.gate, "not at a gate"
        self._apply(PATTERN.decide(self.gate, self.state, Decision(
            action, feedback=feedback, edits=edits, author="alice")))
        return self.run()

    def reports(self, kind):
        return [r for r in self.records if isinstance(r, AgentWorked) and r.kind == kind]


def base_file(repo, path="greet.py"):
    return git(repo, "show", f"main:{path}")


def test_approved_and_merged(repo, tmp_path):
    model = QueueModel(turn("read_file", path="greet.py"), turn(), PLAN,
                       FIX, turn("run_tests"), turn(), REPORT,
                       turn("read_file", path="greet.py"), turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    assert d.gate == PLAN_GATE and d.state["plan"]["goal"] == PLAN["goal"]
    assert base_file(repo) == 'def greet(name):\n    return "Helo, " + name'
    d.decide("approve")
    assert d.gate == MERGE_GATE
    # The person's checkout and base branch are untouched until the merge.
    assert "Helo" in base_file(repo) and "Helo" in (repo / "greet.py").read_text()
    (execute,) = d.reports("execute")
    assert execute.test_ran and execute.test_exit == 0 and "OK" in execute.test_output
    assert "+    return \"Hello, \" + name" in execute.diff
    assert [f["path"] for f in execute.files] == ["greet.py"]
    d.decide("approve")
    assert d.outcome == "completed"
    assert "Hello, " in base_file(repo)
    assert gitops.branch_sha(repo, "quorum/run-7") is None  # merged branch removed
    assert not (tmp_path / "wt" / "run-7").exists()
    assert [r.status for r in d.records if isinstance(r, MergeRequestChanged)][-1] == "merged"
    # The executor saw the plan, not the change request or the planner's conversation.
    executor_prompt = next(c for c in model.history if c.role == "executor").messages[1]["content"]
    assert "Fix the typo in greet()" in executor_prompt
    assert "Fix the greeting typo." not in executor_prompt
    # The reviewer saw the plan, the diff, the report and the test output.
    review_prompt = next(c for c in model.history if c.role == "reviewer").messages[1]["content"]
    for part in ("### Steps", "+    return \"Hello, \" + name", "Fixed the typo.", "exit code 0"):
        assert part in review_prompt


def test_fixup_round_sends_comments_back_then_merges(repo, tmp_path):
    partial = turn("replace_in_file", path="greet.py", search='"Helo, "', replacement='"Hello "')
    comma = turn("replace_in_file", path="greet.py", search='"Hello "', replacement='"Hello, "')
    model = QueueModel(turn(), PLAN, partial, turn(), REPORT, turn(),
                       reject("fixup", comments=[{"file": "greet.py", "line": 2,
                                                  "problem": "the comma is missing",
                                                  "requested_change": "add the comma"}]),
                       comma, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    assert d.gate == MERGE_GATE
    assert [r.test_exit for r in d.reports("execute")] == [1, 0]
    second = [c for c in model.history if c.role == "executor"][-2].messages[1]["content"]
    assert "the comma is missing" in second and "add the comma" in second
    # Two commits on the branch, one per round; the second builds on the first.
    log = git(repo, "log", "--format=%s", "main..quorum/run-7").splitlines()
    assert len(log) == 2
    d.decide("approve")
    assert "Hello, " in base_file(repo)


def test_plan_wrong_goes_back_to_the_planner_and_the_plan_gate(repo, tmp_path):
    wrong = turn("write_file", path="other.py", content="x = 1\n")
    plan2 = {**PLAN, "goal": "Fix the typo where it is"}
    model = QueueModel(turn(), PLAN, wrong, turn(), REPORT, turn(),
                       reject("plan_wrong", reason="the plan edits the wrong file"),
                       turn(), plan2)
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    assert d.gate == PLAN_GATE and d.state["plan"]["version"] == 2
    planner_prompt = [c for c in model.history if c.role == "planner"][-1].messages[1]["content"]
    assert "the plan edits the wrong file" in planner_prompt
    # The next round starts again from the base: the wrong file is gone.
    model.enqueue(FIX, turn(), REPORT, turn(), APPROVE)
    d.decide("approve")
    assert d.gate == MERGE_GATE
    assert not (tmp_path / "wt" / "run-7" / "other.py").exists()
    assert "other.py" not in d.reports("execute")[-1].diff


def test_cap_escalates_then_person_chooses(repo, tmp_path):
    model = QueueModel(turn(), PLAN, turn(), REPORT, turn(), reject("fixup"),
                       turn(), REPORT, turn(), reject("fixup"))
    d = Driver(start(repo, tmp_path, max_rounds=2), model).run()
    d.decide("approve")
    assert d.gate == ESCALATION_GATE
    assert "cap of 2" in d.state["escalation"]
    assert d.stages.count("execute:1:1") == 1 and "execute:1:3" not in d.stages
    with pytest.raises(InvalidDecision):
        PATTERN.decide(ESCALATION_GATE, d.state, Decision("merge", author="alice"))
    # Another round: the executor gets the reviewer's comments and the person's note.
    model.enqueue(FIX, turn(), REPORT, turn(), APPROVE)
    d.decide("another_round", feedback="Just fix the typo.")
    assert d.gate == MERGE_GATE
    last_exec = [c for c in model.history if c.role == "executor"][-2].messages[1]["content"]
    assert "Just fix the typo." in last_exec


def test_unclear_escalates_immediately_and_stop_keeps_the_branch(repo, tmp_path):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), reject("unclear"))
    d = Driver(start(repo, tmp_path, max_rounds=3), model).run()
    d.decide("approve")
    assert d.gate == ESCALATION_GATE and "unclear" in d.state["escalation"]
    d.decide("stop")
    assert d.outcome == "cancelled"
    assert gitops.branch_sha(repo, "quorum/run-7") is not None  # kept to inspect
    assert not (tmp_path / "wt" / "run-7").exists()
    assert "Helo" in base_file(repo)


def test_escalation_replan_needs_a_reason_and_restarts_from_base(repo, tmp_path):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(),
                       {"approve": False, "summary": "", "rejection_kind": "unclear"})
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    with pytest.raises(InvalidDecision, match="differently"):
        PATTERN.decide(ESCALATION_GATE, d.state, Decision("replan", author="alice"))
    model.enqueue(turn(), {**PLAN, "goal": "v2"})
    d.decide("replan", feedback="Also update the docstring.")
    assert d.gate == PLAN_GATE and d.state["plan"]["goal"] == "v2"
    assert d.state["head"] == d.state["base_sha"]


def test_merge_conflict_leaves_request_open_and_nothing_half_merged(repo, tmp_path):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    assert d.gate == MERGE_GATE
    # Meanwhile someone changes the same line on main.
    (repo / "greet.py").write_text('def greet(name):\n    return "Hi, " + name\n')
    git(repo, "commit", "-qam", "different greeting")
    main_before = git(repo, "rev-parse", "main")
    d.decide("approve")
    assert d.gate == MERGE_GATE and d.state["mr_status"] == "conflict"
    assert "greet.py" in d.state["merge_problem"]["message"]
    assert git(repo, "rev-parse", "main") == main_before
    assert git(repo, "status", "--porcelain") == ""
    # Sending it back re-does the change on the current base.
    model.enqueue(turn("replace_in_file", path="greet.py", search='"Hi, "',
                       replacement='"Hello, "'), turn(), REPORT, turn(), APPROVE)
    d.decide("reject", feedback="Redo it on top of the new greeting.")
    assert d.gate == MERGE_GATE and d.state["base_sha"] == main_before
    # The executor is told the truth: its earlier attempt is gone, the change is to redo.
    prompt = [c for c in model.history if c.role == "executor"][-2].messages[1]["content"]
    assert "starts again from the current base branch" in prompt
    assert "already in the files" not in prompt
    d.decide("approve")
    assert d.outcome == "completed" and "Hello, " in base_file(repo)


def test_discard_removes_worktree_and_branch(repo, tmp_path):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    assert (tmp_path / "wt" / "run-7").is_dir()
    d.decide("discard")
    assert d.outcome == "completed" and d.state["mr_status"] == "discarded"
    assert not (tmp_path / "wt" / "run-7").exists()
    assert gitops.branch_sha(repo, "quorum/run-7") is None
    assert "quorum/run-7" not in git(repo, "worktree", "list")
    assert "Helo" in base_file(repo)


def test_merge_reject_needs_a_comment_and_the_executor_sees_it(repo, tmp_path):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    with pytest.raises(InvalidDecision):
        PATTERN.decide(MERGE_GATE, d.state, Decision("reject", feedback="  ", author="alice"))
    docstring = turn("replace_in_file", path="greet.py", search="def greet(name):\n",
                     replacement='def greet(name):\n    """Greet someone."""\n')
    model.enqueue(docstring, turn(), REPORT, turn(), APPROVE)
    d.decide("reject", feedback="Please add a docstring.")
    assert "Please add a docstring." in [c for c in model.history
                                        if c.role == "executor"][-2].messages[1]["content"]
    assert d.gate == MERGE_GATE


def test_edited_plan_is_what_the_executor_receives(repo, tmp_path):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    edits = {**PLAN, "steps": ["Replace Helo with Hello", "Also keep the comma"]}
    with pytest.raises(InvalidDecision):
        PATTERN.decide(PLAN_GATE, d.state, Decision("approve", edits={**PLAN, "steps": [" "]},
                                                    author="alice"))
    with pytest.raises(InvalidDecision, match="goal"):
        PATTERN.decide(PLAN_GATE, d.state, Decision("approve", edits={**PLAN, "goal": ""},
                                                    author="alice"))
    d.decide("approve", edits=edits)
    assert d.state["plan"]["version"] == 2 and d.state["plan"]["author"] == "alice"
    prompt = [c for c in model.history if c.role == "executor"][0].messages[1]["content"]
    assert "Also keep the comma" in prompt


def test_auto_approve_plan_and_auto_merge(repo, tmp_path):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path, auto_approve_plan=True, auto_merge=True), model).run()
    assert d.outcome == "completed" and "Hello, " in base_file(repo)


def test_sandbox_escapes_are_tool_errors_the_model_sees(repo, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret\n")
    (repo / "link").symlink_to(outside)
    git(repo, "add", "link")
    git(repo, "commit", "-qm", "add a symlink")
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    attempts = [
        turn("read_file", path=str(outside)),
        turn("write_file", path="../escape.txt", content="x"),
        turn("read_file", path="link"),
        turn("write_file", path="link", content="overwrite"),
        turn("write_file", path=".git/config", content="x"),
        turn("run_tests", args=["; rm -rf /"]),
        turn("run_tests", args=["/etc/passwd"]),
        turn("run_tests", args=["-c", "import time; time.sleep(30)"]),
    ]
    model = QueueModel(turn(), PLAN, *attempts, turn(), REPORT, turn(), reject("unclear"))
    d = Driver(start(repo, tmp_path, test_command=[sys.executable],
                     test_allowlist=[[sys.executable, "-m", "unittest"], slow[:1] + ["-c"]],
                     test_timeout=1), model).run()
    d.decide("approve")
    (execute,) = d.reports("execute")
    results = [(e["tool"], e["ok"], e["observation"]) for e in execute.trace]
    assert len(results) == len(attempts)
    for tool, ok, observation in results[:6]:
        assert not ok, (tool, observation)
        assert "top secret" not in observation
    assert "TIMED OUT" in results[7][2]
    assert not (tmp_path / "escape.txt").exists()
    assert outside.read_text() == "top secret\n"
    assert "x" != (repo / ".git" / "config").read_text()


def test_execute_stage_run_twice_makes_the_identical_commit(repo, tmp_path):
    """A redelivered execute stage (the journal replays the same replies) resets the worktree
    and re-creates the same commit: the branch never gets a duplicate."""
    replies = [turn(), PLAN]
    model = QueueModel(*replies)
    d = Driver(start(repo, tmp_path), model).run()
    d._apply(PATTERN.decide(PLAN_GATE, d.state, Decision("approve", author="alice")))
    stage, state = d.stage, d.state
    first = PATTERN.run_stage(stage, state, QueueModel(FIX, turn(), REPORT))
    # The crashed attempt also left a stray file behind.
    (tmp_path / "wt" / "run-7" / "stray.txt").write_text("half-written")
    second = PATTERN.run_stage(stage, state, QueueModel(FIX, turn(), REPORT))
    assert first.state["head"] == second.state["head"]
    assert len(git(repo, "log", "--format=%H", "main..quorum/run-7").splitlines()) == 1
    assert not (tmp_path / "wt" / "run-7" / "stray.txt").exists()


def test_setup_failure_is_a_readable_error(repo, tmp_path):
    state = start(repo, tmp_path, base="no-such-branch")
    result = PATTERN.run_stage("setup", state, QueueModel())
    assert result.outcome == "failed" and "worktree" in result.error


def test_model_families():
    assert model_family("gpt-4o") == model_family("openai/gpt-4o-mini") == "openai"
    assert model_family("anthropic/claude-3-5-sonnet-latest") == "anthropic"
    assert model_family("claude-3-opus") == "anthropic"
    assert model_family("gemini/gemini-2.0-flash") == "google"
    assert same_family("gpt-4o", "o3-mini")
    assert not same_family("gpt-4o", "anthropic/claude-3-5-haiku-latest")
    assert same_family("offline/default", "offline/default")


def test_a_leftover_branch_of_the_same_name_is_never_reused(repo, tmp_path):
    git(repo, "branch", "quorum/run-7")  # e.g. kept by a run of an earlier database
    (tmp_path / "wt" / "run-7-2").mkdir(parents=True)  # and a stray folder
    state = start(repo, tmp_path)
    assert state["options"]["branch"] == "quorum/run-7-3"
    assert state["options"]["worktree"] == str(tmp_path / "wt" / "run-7-3")


def test_a_failing_executor_model_escalates_and_another_round_retries(repo, tmp_path):
    from agents_app.patterns.base import ModelError

    model = QueueModel(turn(), PLAN, FIX, ModelError("provider down"))
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    assert d.gate == ESCALATION_GATE and "executor's model failed" in d.state["escalation"]
    assert "Hello" not in (tmp_path / "wt" / "run-7" / "greet.py").read_text()  # edits dropped
    model.enqueue(FIX, turn(), REPORT, turn(), APPROVE)
    d.decide("another_round")
    assert d.gate == MERGE_GATE and d.stages[-2:] == ["execute:1:2", "review:1:2"]


def test_a_failing_reviewer_model_escalates_and_the_retry_reviews_the_same_change(repo,
                                                                                   tmp_path):
    from agents_app.patterns.base import ModelError

    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, ModelError("provider down"))
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    assert d.gate == ESCALATION_GATE and "reviewer's model failed" in d.state["escalation"]
    head = d.state["head"]
    model.enqueue(turn(), APPROVE)
    d.decide("another_round")
    assert d.gate == MERGE_GATE and d.stages[-1] == "review:1:1:retry1"
    assert d.state["head"] == head and len(d.reports("execute")) == 1


def test_merge_blocked_by_the_persons_local_edits_waits_and_keeps_the_branch(repo, tmp_path):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    (repo / "greet.py").write_text("# my unsaved work\n")
    d.decide("approve")
    assert d.gate == MERGE_GATE
    assert "commit or stash" in d.state["merge_problem"]["message"]
    assert d.state["conflict_base"] == ""  # sending it back would keep the branch's work
    assert d.state["mr_status"] == "open"  # nothing conflicts: the person's edits block it
    (blocked,) = [e for e in d.events if e.kind == "merge_blocked"]
    assert blocked.message.count("Nothing was changed.") == 1
    assert (repo / "greet.py").read_text() == "# my unsaved work\n"
    git(repo, "checkout", "--", "greet.py")
    d.decide("approve")
    assert d.outcome == "completed"
    assert 'return "Hello, " + name' in (repo / "greet.py").read_text()
    assert git(repo, "status", "--porcelain") == ""


def test_a_repository_that_disappears_fails_the_run_with_a_reason(repo, tmp_path):
    import shutil

    model = QueueModel(turn(), PLAN)
    d = Driver(start(repo, tmp_path), model).run()
    shutil.rmtree(tmp_path / "wt")
    shutil.rmtree(repo)
    d.decide("approve")
    assert d.outcome == "failed" and d.error.startswith("git failed in stage execute:1:1")
    assert "does not exist" in d.error


def test_a_note_for_another_round_reaches_the_executor_and_the_reviewer(repo, tmp_path):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), reject("unclear"))
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    assert d.gate == ESCALATION_GATE
    model.enqueue(turn(), REPORT, turn(), APPROVE, turn(), REPORT, turn(), APPROVE)
    d.decide("another_round", feedback="Keep the comma after Hello.")
    executor = [c for c in model.history if c.role == "executor"
                and c.key.startswith("exec2")][-1].messages[1]["content"]
    reviewer = [c for c in model.history if c.role == "reviewer"
                and c.key.startswith("review2")][-1].messages[1]["content"]
    for prompt in (executor, reviewer):
        assert "The person's comments to address" in prompt
        assert "- alice: Keep the comma after Hello." in prompt
    # The round made no new commit after the note: never approved, whatever the reviewer said;
    # round 3 (the same) reaches the cap and the person decides.
    (_, second, _) = d.reports("execute")
    assert second.answer["addressing"][0]["problem"] == "Keep the comma after Hello."
    assert d.gate == ESCALATION_GATE and d.stages[-2:] == ["execute:1:3", "review:1:3"]
    review = d.reports("review")[1].answer
    assert review["approve"] is False and review["rejection_kind"] == "fixup"
    assert "Round 2 made no change after the comment of alice: “Keep the comma after Hello.”" \
        in review["overruled"]
    verdict = [e for e in d.events if e.kind == "review_verdict"][-2]
    assert "the reviewer approved, but quorum sent round 2 back" in verdict.message.lower()
    # The person's comment stayed theirs to act on in the next round.
    assert d.reports("execute")[2].answer["addressing"][0]["by"] == "alice"


def test_no_change_after_the_persons_comment_is_sent_back_until_the_cap_then_escalates(
        repo, tmp_path):
    """QA (issue 32): sent back with a comment, the next round made no commit and was approved
    again. Now it goes back as a fix-up with the reason, and at the round cap to the person."""
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path, max_rounds=2), model).run()
    d.decide("approve")
    assert d.gate == MERGE_GATE
    model.enqueue(turn(), REPORT, turn(), APPROVE,  # round 2: nothing done, approved anyway
                  turn(), REPORT, turn(), APPROVE)  # round 3: the same
    d.decide("reject", feedback="Add a docstring to greet().")
    assert d.gate == ESCALATION_GATE and "cap of 2" in d.state["escalation"]
    assert [r.round for r in d.reports("review")] == [1, 2, 3]
    for review in d.reports("review")[1:]:
        assert review.answer["approve"] is False and review.answer["rejection_kind"] == "fixup"
        assert f"Round {review.round} made no change after the comment of alice" in \
            review.answer["reason"]
    # Round 3's executor had the person's comment again, as theirs, and the reviewer saw what
    # Quorum found unfinished.
    executor_3 = [c for c in model.history if c.role == "executor"][-2].messages[1]["content"]
    assert "- alice: Add a docstring to greet()." in executor_3
    reviewer_3 = [c for c in model.history if c.role == "reviewer"][-1].messages[1]["content"]
    assert "## Unfinished work Quorum found in this round" in reviewer_3
    assert "Round 3 made no new commit" in reviewer_3
    assert git(repo, "log", "--format=%s", "main..quorum/run-7").count("\n") == 0  # one commit


@pytest.mark.parametrize("mode, parents", [("squash", 1), ("merge", 2)])
def test_the_person_s_message_and_mode_make_the_merge(repo, tmp_path, mode, parents):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    proposal = PATTERN.validate_merge_choice(d.state, None)
    assert proposal[0].startswith("Fix the typo in greet()\n\nFixed the typo.") and \
        proposal[1] == "squash"
    for bad in ({"message": " ", "mode": mode}, {"message": "a\0b", "mode": mode},
                {"message": "ok", "mode": "octopus"}, "squash"):
        with pytest.raises(InvalidDecision):
            PATTERN.decide(MERGE_GATE, d.state, Decision("approve", edits=bad, author="alice"))
    message = "Fix the greeting typo that every user of greet() sees in their output\n\nBody."
    d.decide("approve", edits={"message": message + "\r\n", "mode": mode})
    assert d.outcome == "completed"
    assert len(git(repo, "rev-list", "--parents", "-n", "1", "main").split()) - 1 == parents
    assert git(repo, "log", "-1", "--format=%B", "main") == message + "\n\nApproved-by: alice"


def test_the_offline_executor_does_not_apply_the_plans_edits_twice_on_a_later_round():
    """QA 2026-11-26: a send-back round replaced "hello" with "hello, world" again, giving
    "hello, world, world". The plan's edits are in the files then; only the comments' count."""
    from agents_app.patterns.plan_execute_review import offline as off
    from agents_app.patterns.plan_execute_review.prompts import _section
    from agents_app.patterns.plan_execute_review.schemas import ALREADY_IN_FILES, PERSON_COMMENTS

    plan = _section("Plan", '1. Replace "hello" with "hello, world" in README.md')
    edit = {"path": "README.md", "search": "hello", "replacement": "hello, world"}

    def executor(*sections: str) -> dict:
        return off.executor_turn([{"role": "user", "content": "\n".join([plan, *sections])}])

    assert executor()["action"] == {"tool": "replace_in_file", "args": edit}
    said = _section(f"{PERSON_COMMENTS} ({ALREADY_IN_FILES}; do what they ask)", "- alice: ok")
    assert executor(said) == {"thought": "Finished.", "action": None, "done": True}
    asked = _section(f"{PERSON_COMMENTS} ({ALREADY_IN_FILES}; do what they ask)",
                     '- alice: replace "world" with "there" in README.md')
    assert executor(asked)["action"]["args"] == {"path": "README.md", "search": "world",
                                                 "replacement": "there"}
    reviewer = _section(f"Review comments to address ({ALREADY_IN_FILES})", "- the greeting")
    assert executor(reviewer)["done"] is True
    # A fresh base branch: the whole change is made again.
    fresh = _section(f"{PERSON_COMMENTS} (the branch starts again from the current base "
                     "branch, so make the whole change again; do what they ask)", "- alice: x")
    assert executor(fresh)["action"] == {"tool": "replace_in_file", "args": edit}
    report = off.execution_report([{"role": "user", "content": plan + said}])
    assert report["summary"].startswith("The plan's edits are in the files")


# --- a round is never approved with work unfinished (issue 32) --------------------------------
PLAN_TWO = {"goal": "Fix the greeting", "files": ["greet.py"], "approach": "Two edits.",
            "steps": ["Replace Helo with Hello in greet.py", "Add a docstring to greet()"],
            "test_strategy": "test_greet.py", "risks": []}
DOCSTRING = turn("replace_in_file", path="greet.py", search="def greet(name):\n",
                 replacement='def greet(name):\n    """Greet someone."""\n')


def test_a_reviewer_approving_a_skipped_plan_step_is_overruled_to_a_fixup(repo, tmp_path):
    skipped = {"summary": "Fixed the typo.", "done": ["Step 1"],
               "skipped": ["Step 2: could not decide where the docstring goes"]}
    model = QueueModel(turn(), PLAN_TWO, FIX, turn(), skipped, turn(), APPROVE,
                       DOCSTRING, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    first_exec, second_exec = d.reports("execute")
    first_review, second_review = d.reports("review")
    # Round 1: one of two steps done and committed; the reviewer approved; Quorum did not.
    assert first_exec.commit_sha
    assert first_exec.answer["not_done"] == {"plan_steps": 2, "other": [], "steps": [
        {"number": 2, "step": "Add a docstring to greet()",
         "why": "could not decide where the docstring goes"}]}
    assert first_review.answer["approve"] is False
    assert first_review.answer["rejection_kind"] == "fixup"
    assert first_review.answer["overruled"].startswith(
        "The reviewer approved, but Quorum sent round 1 back: Plan step 2 was not done "
        "(“Add a docstring to greet()”): could not decide where the docstring goes")
    event = next(e for e in d.events if e.kind == "execution_reported")
    assert "1 of 2 plan steps not done" in event.message
    # The reviewer had been told, and so is the executor of round 2.
    review_1 = [c for c in model.history if c.role == "reviewer"][1].messages[1]["content"]
    assert "- Plan step 2 was not done (“Add a docstring to greet()”)" in review_1
    assert "Never approve a round that left work unfinished" in \
        [c for c in model.history if c.role == "reviewer"][1].messages[0]["content"]
    exec_2 = [c for c in model.history if c.role == "executor"][-3].messages[1]["content"]
    assert "Plan step 2 was not done" in exec_2 and "Carry out step 2 of the plan." in exec_2
    # Round 2 finishes the work: approved, and only then the merge request opens.
    assert second_exec.answer["not_done"]["steps"] == [] and second_review.answer["approve"]
    assert d.gate == MERGE_GATE
    assert '"""Greet someone."""' in git(repo, "show", "quorum/run-7:greet.py")


def test_a_reviewer_that_rejects_keeps_its_own_kind(repo, tmp_path):
    """The check only overrules approvals: a reviewer sending the change to the person stays."""
    skipped = {**REPORT, "skipped": ["Step 2: no idea"]}
    model = QueueModel(turn(), PLAN_TWO, FIX, turn(), skipped, turn(), reject("unclear"))
    d = Driver(start(repo, tmp_path, max_rounds=3), model).run()
    d.decide("approve")
    assert d.gate == ESCALATION_GATE and "unclear" in d.state["escalation"]
    assert "overruled" not in d.reports("review")[0].answer


def offline_model():
    from agents_app.llm import offline as offline_llm
    from agents_app.patterns import PATTERNS
    from agents_app.patterns.testing import FunctionModel

    assert PATTERNS["plan_execute_review"] is not None  # teaches the offline model its replies
    return FunctionModel(lambda messages, info: offline_llm.reply(
        info.role, info.schema.__name__ if info.schema else None, messages))


@pytest.fixture
def colour_repo(repo):
    (repo / "README.md").write_text("# Greet\n\nHelo world.\nThe colour of the colour.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "readme")
    return repo


TWO_STEPS = ('replace "Helo world" with "Hello world" in README.md, then '
             'replace "colour" with "color" in README.md')


def test_offline_a_skipped_step_is_sent_back_never_approved_and_escalates_at_the_cap(
        colour_repo, tmp_path):
    """QA (issue 32): the executor skipped one of two steps (its search text occurred twice),
    committed the other, and the reviewer approved."""
    state = PATTERN.bind_run(PATTERN.initial_state(TWO_STEPS, {
        "repo": str(colour_repo), "base": "main", "worktree_root": str(tmp_path / "wt")}), 7)
    d = Driver(state, offline_model()).run()
    assert d.gate == PLAN_GATE and len(d.state["plan"]["steps"]) == 2
    d.decide("approve")
    assert d.gate == ESCALATION_GATE and "2 rejected rounds reached the cap of 2" in \
        d.state["escalation"]
    assert MERGE_GATE not in [e.data.get("gate") for e in d.events]
    first, second = d.reports("execute")
    assert first.commit_sha and not second.commit_sha  # step 1 made; step 2 tried again
    for report in (first, second):
        (step,) = report.answer["not_done"]["steps"]
        assert step["number"] == 2 and step["step"] == 'Replace "colour" with "color" in README.md'
        # Why, and how to say it so the offline model can do it.
        assert step["why"].startswith("“colour” occurs 2 times in README.md")
        assert "replace all “colour” with “color” in README.md" in step["why"]
        assert "replace the 2nd “colour” with “color” in README.md" in step["why"]
    for review in d.reports("review"):
        assert review.answer["approve"] is False and review.answer["rejection_kind"] == "fixup"
        assert review.answer["reason"].startswith("Plan step 2 was not done")
    assert "The colour of the colour." in git(colour_repo, "show", "quorum/run-7:README.md")
    # The person says which: every occurrence. That round finishes the work and is approved.
    d.decide("another_round", feedback='replace all "colour" with "color" in README.md')
    assert d.gate == MERGE_GATE
    assert d.reports("execute")[-1].answer["not_done"] == {"plan_steps": 2, "steps": [],
                                                           "other": []}
    assert git(colour_repo, "show", "quorum/run-7:README.md") == \
        "# Greet\n\nHello world.\nThe color of the color."


def test_offline_instructions_replace_one_every_or_a_numbered_occurrence():
    from agents_app.patterns.plan_execute_review import offline as off

    found = off.instructions(
        'replace "a" with "b" in x.py; replace all "c" with "d" in x.py; '
        'Replace every occurrence of "e" with "f" in x.py; replace the 2nd "g" with "h" in x.py; '
        'replace the third occurrence of "i" with "j" in `x.py`.')
    assert [f["args"] for f in found] == [
        {"path": "x.py", "search": "a", "replacement": "b"},
        {"path": "x.py", "search": "c", "replacement": "d", "replace_all": True},
        {"path": "x.py", "search": "e", "replacement": "f", "replace_all": True},
        {"path": "x.py", "search": "g", "replacement": "h", "occurrence": 2},
        {"path": "x.py", "search": "i", "replacement": "j", "occurrence": 3}]
    # A step reads back as the same instruction (the executor reads the plan's steps).
    steps = [f["step"] for f in found]
    assert steps[1:4] == ['Replace all "c" with "d" in x.py', 'Replace all "e" with "f" in x.py',
                          'Replace the 2nd "g" with "h" in x.py']
    assert [off.instructions(s)[0]["args"] for s in steps] == [f["args"] for f in found]
    # The advice given for an ambiguous replace is never read as an instruction itself.
    assert off.instructions(off.HOWTO) == []
    assert [off.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]


def test_the_merge_commit_names_the_approver_and_keeps_the_offline_label_out_of_its_subject(
        colour_repo, tmp_path):
    state = PATTERN.bind_run(PATTERN.initial_state(
        'replace "Helo world" with "Hello world" in README.md', {
            "repo": str(colour_repo), "base": "main", "worktree_root": str(tmp_path / "wt"),
            "auto_approve_plan": True}), 7)
    d = Driver(state, offline_model()).run()
    assert d.gate == MERGE_GATE
    proposal, _ = PATTERN.validate_merge_choice(d.state, None)
    assert "Offline model" in d.state["plan"]["goal"]  # the plan says what wrote it …
    assert proposal.split("\n", 1)[0] == "Apply 1 explicit edit(s) from the request"  # … not
    # Round commits have the plain subject too.
    assert git(colour_repo, "log", "-1", "--format=%s", "quorum/run-7") == \
        "Apply 1 explicit edit(s) from the request"
    d.decide("approve", edits={"approver": "Alice Example <alice@example.com>"})
    assert d.outcome == "completed"
    subject_line, body = git(colour_repo, "log", "-1", "--format=%s%n%b", "main").split("\n", 1)
    assert subject_line == "Apply 1 explicit edit(s) from the request"
    assert body.rstrip().endswith("\n\nApproved-by: Alice Example <alice@example.com>")
    assert git(colour_repo, "log", "-1", "--format=%cn <%ce>", "main") == \
        "Alice Example <alice@example.com>"


@pytest.mark.parametrize("message, expected", [
    ("Fix it", "Fix it\n\nApproved-by: alice"),
    ("Fix it\n\nBody.\n\nCo-authored-by: Bob <bob@example.com>",
     "Fix it\n\nBody.\n\nCo-authored-by: Bob <bob@example.com>\nApproved-by: alice"),
    ("Fix it\n\nApproved-by: alice", "Fix it\n\nApproved-by: alice"),
])
def test_the_approver_trailer_joins_an_existing_trailer_block_once(repo, tmp_path, message,
                                                                   expected):
    model = QueueModel(turn(), PLAN, FIX, turn(), REPORT, turn(), APPROVE)
    d = Driver(start(repo, tmp_path), model).run()
    d.decide("approve")
    d.decide("approve", edits={"message": message, "mode": "squash"})
    assert d.outcome == "completed"
    assert git(repo, "log", "-1", "--format=%B", "main") == expected
    # No e-mail address known: the person is named in the trailer; Quorum stays the committer.
    assert git(repo, "log", "-1", "--format=%cn", "main") == "Quorum"


def test_offline_a_persons_instruction_replaces_the_step_it_redoes_and_no_other():
    from agents_app.patterns.plan_execute_review import offline as off
    from agents_app.patterns.plan_execute_review.prompts import _section
    from agents_app.patterns.plan_execute_review.schemas import ALREADY_IN_FILES, PERSON_COMMENTS

    plan = _section("Plan", '1. Replace "colour" with "color" in README.md')
    review = _section(f"Review comments to address ({ALREADY_IN_FILES})",
                      '- Plan step 1 was not done (“Replace "colour" with "color" in README.md”)')

    def todo(note: str) -> list[dict]:
        asked = _section(f"{PERSON_COMMENTS} ({ALREADY_IN_FILES}; do what they ask)", note)
        return [t["args"] for t in off._todo([{"role": "user",
                                               "content": plan + asked + review}])]

    assert todo('- alice: replace all "colour" with "color" in README.md') == [
        {"path": "README.md", "search": "colour", "replacement": "color", "replace_all": True}]
    # An instruction about something else leaves the unfinished step to be tried again.
    assert todo('- alice: replace "Helo" with "Hello" in README.md') == [
        {"path": "README.md", "search": "Helo", "replacement": "Hello"},
        {"path": "README.md", "search": "colour", "replacement": "color"}]
