"""Plan → Execute → Review on a git repository, ending in a merge request a person decides.

A planner with read-only tools writes a plan document; a person approves, edits or rejects it.
An executor that sees only the plan (and, on later rounds, the review comments) changes the
code in the run's own git worktree and branch, runs the configured tests and reports. A
reviewer (by default from another model family) checks the diff against the plan and approves
or rejects with structured comments. Rejections go back to the executor (fix-up), to the
planner (plan wrong) or to the person (unclear, or the round cap reached). A round that left
work unfinished (a plan step not done, a comment of the person's not acted on, no change;
``checks.py``) is never approved: the pattern overrules such an approval to a fix-up. An
approved change waits as a merge request until the person merges, sends it back, or discards
it; the merge commit names the person who approved it (an ``Approved-by:`` trailer).

Stages (a stage name is also the journal key of its model calls):
  ``setup``          create the worktree and branch from the base branch; no model call
  ``plan:V``         the planner writes plan version V
  ``execute:V:R``    round R of the executor on plan version V (R counts all rounds of the run)
  ``review:V:R``     the reviewer checks round R
  ``merge:R``        merge the branch into the base branch (after the person approved)
  ``close:KIND``     remove the worktree: ``discard`` (branch deleted) or ``stop`` (branch kept)

Every stage that touches the worktree first resets it to ``state["head"]``, the commit the
stage starts from, and commits with a timestamp fixed before the stage began. A stage run
again after a crash therefore replays the same model calls (from the journal) on the same
files and re-creates the identical commit: the branch never gets a duplicate.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ...repos import gitops
from ...repos import tools as repo_tools
from ...repos.workspace import ToolError, Workspace
from ..agent_loop import AgentResult, run_agent
from ..base import (
    Event,
    ForkEdit,
    Gate,
    ModelClient,
    OfflineReply,
    Pattern,
    Schema,
    StageResult,
)
from ..options import PatternOptions, option
from ..records import GateDecided, PlanProposed
from . import offline
from .gates import GateDecisions
from .prompts import (
    PLANNER_SYSTEM,
    _section,
    plan_markdown,
)
from .rounds import RoundStages
from .schemas import (
    ESCALATION_GATE,
    MAX_TEST_OUTPUT,
    MERGE_GATE,
    PLAN_GATE,
    AgentWorked,
    ForkPlanDoc,
    MergeRequestChanged,
    PlanDoc,
)


class PlanExecuteReviewOptions(PatternOptions):
    """Set by the change form (``forms.StartChangeForm``) and the service that starts a change,
    which checks the repository, the base branch and the test command first."""

    repo: str = option("", label="Repository", hidden=True)
    base: str = option("", label="Base branch", hidden=True)
    branch: str = option("", label="Branch", hidden=True)
    worktree: str = option("", label="Worktree", hidden=True)
    worktree_root: str = option("", label="Worktree root", hidden=True)
    max_rounds: int = option(2, label="Execute/review rounds before asking you", ge=1, le=5,
                             hidden=True, setting="QUORUM_CHANGE_MAX_ROUNDS")
    planner_turns: int = option(15, label="Planner turns", hidden=True)
    executor_turns: int = option(25, label="Executor turns", hidden=True)
    reviewer_turns: int = option(12, label="Reviewer turns", hidden=True)
    test_command: list[str] = option([], label="Test command (argv; empty: no test tool)",
                                     hidden=True)
    test_allowlist: list[list[str]] = option([], label="Allowed test commands", hidden=True)
    test_timeout: float = option(300.0, label="Test time limit (s)", hidden=True)
    auto_approve_plan: bool = option(False, label="Approve the plan without asking", hidden=True)
    auto_merge: bool = option(False, label="Merge without asking", hidden=True)
    max_run_seconds: float = option(1800.0, label="Run time limit (s)", hidden=True)


class PlanExecuteReview(RoundStages, GateDecisions, Pattern):
    name = "plan_execute_review"
    label = "Plan, execute, review (git)"
    stage_labels = {"setup": "Setting up the branch", "plan": "Planning (plan v{0})",
                    "execute": "Round {1}: changing the code (plan v{0})",
                    "review": "Round {1}: review (plan v{0})", "merge": "Merging",
                    "close": "Closing"}
    stage_lines = {"setup": "Creating the run's worktree and branch.",
                   "plan": "The planner is reading the code and writing plan v{0}.",
                   "execute": "Round {1}: the executor is changing the code (plan v{0}).",
                   "review": "Round {1}: the reviewer is checking the change against the plan.",
                   "merge": "Merging the branch into the base branch.",
                   "close": "Removing the run's worktree."}
    gate_lines = {
        PLAN_GATE: "Waiting for you: approve, edit or reject the plan.",
        MERGE_GATE: "Waiting for you: the merge request is ready (merge, send back, or discard).",
        ESCALATION_GATE: "Waiting for you: the agents could not settle this change "
                         "(another round, a new plan, or stop).",
    }
    roles = ("planner", "executor", "reviewer")
    role_defaults = {"reviewer": "other-family"}
    summary = ("On a git repository: a planner writes a plan you approve, an executor changes "
               "the code on its own branch, a reviewer from another model family checks it, and "
               "you merge, send back or discard the merge request.")
    live_renderer = "agents_app.patterns.plan_execute_review.views.render_live_update"
    on_terminal = "agents_app.patterns.plan_execute_review.service.close_after_end"
    on_fork = "agents_app.patterns.plan_execute_review.service.on_fork"
    gates = (PLAN_GATE, MERGE_GATE, ESCALATION_GATE)
    starts_from_task = False  # needs a repository: started from its own form
    page = "change_detail"
    options = PlanExecuteReviewOptions

    def offline_replies(self) -> list[OfflineReply]:
        return offline.replies()

    # --- setup ----------------------------------------------------------------------------
    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = self.check_options(options)
        return {"task": task, "options": opts, "plan": None, "plan_feedback": "",
                "base_sha": "", "head": "", "round": 0, "rejections": 0, "comments": [],
                "last_review": None, "last_round": None, "merge_problem": None,
                "conflict_base": "", "commit_time": 0, "mr_status": "draft"}

    def bind_run(self, state: dict[str, Any], run_id: int) -> dict[str, Any]:
        """Name the run's branch and worktree once the run has its id: ``quorum/run-<id>``,
        with a suffix if a branch or worktree of that name is left from an earlier database
        (a run must never build on another run's branch)."""
        opts = state["options"]
        root = opts["worktree_root"].rstrip("/")
        name = f"run-{run_id}"
        for n in range(2, 100):
            taken = gitops.branch_sha(opts["repo"], f"quorum/{name}") is not None \
                if opts.get("repo") else False
            if not taken and not os.path.exists(f"{root}/{name}"):
                break
            name = f"run-{run_id}-{n}"
        opts = {**opts, "branch": f"quorum/{name}", "worktree": f"{root}/{name}"}
        return {**state, "options": opts}

    def first_stage(self, state: dict[str, Any]) -> str:
        return "setup"

    # --- forks (issue 33) -------------------------------------------------------------------
    def _fork_name(self, state: dict[str, Any], run_id: int) -> str:
        return f"run-{run_id}"

    def fork_state(self, state: dict[str, Any], run_id: int) -> dict[str, Any]:
        """A fork works on a branch and in a worktree of its own, named after it (never the
        original's), which its first stage that touches the worktree makes from the commit
        recorded at the fork point (``fork_start``: the checkpoint's head, or its base; empty
        before ``setup`` ran, which makes them as for any run). No git command runs here:
        this is called inside the fork's creation transaction."""
        opts = state["options"]
        root = opts["worktree_root"].rstrip("/")
        base = name = self._fork_name(state, run_id)
        for n in range(2, 100):
            if not os.path.exists(f"{root}/{name}"):
                break
            name = f"{base}-{n}"
        opts = {**opts, "branch": f"quorum/{name}", "worktree": f"{root}/{name}"}
        return {**state, "options": opts,
                "fork_start": state.get("head") or state.get("base_sha") or ""}

    def decided_on(self, gate: str, state: dict[str, Any]) -> Any:
        """The state without the names of the run's own branch and worktree: a fork's gate
        may reuse the original's decision on the same plan or the same commits."""
        opts = {k: v for k, v in state["options"].items() if k not in ("branch", "worktree")}
        return {**{k: v for k, v in state.items() if k != "fork_start"}, "options": opts}

    def fork_refusal(self, stage: str, gate: str, state: dict[str, Any]) -> str | None:
        kind = (stage or "").split(":", 1)[0]
        if kind == "close":
            return ("The run was closing its worktree at this stage: a fork from here has "
                    "nothing left to do. Fork it from its merge-request gate or an earlier "
                    "stage.")
        if kind == "merge" and not gate:
            return ("At this stage the original run's merge request had been approved; a "
                    "fork's merge request is its own to decide. Fork it from the "
                    "merge-request gate instead.")
        return None

    def replay_refusal(self, state: dict[str, Any]) -> str | None:
        return ("A change run cannot be replayed: its agents read and changed the files of a "
                "worktree that is gone or has moved on, so the answers in its journal would "
                "not match what the tools find now, and a replay would rewrite a branch. Fork "
                "it from a stage instead: the fork's own branch starts from the commit "
                "recorded there.")

    def fork_edit(self, stage: str, gate: str, state: dict[str, Any]) -> ForkEdit | None:
        plan = state.get("plan")
        if gate != PLAN_GATE or not plan:
            return None
        value = {k: plan.get(k, default) for k, default in (
            ("goal", ""), ("files", []), ("approach", ""), ("steps", []),
            ("test_strategy", ""), ("risks", []))}

        def apply(st: dict[str, Any], edit: ForkPlanDoc, author: str) -> tuple[
                dict[str, Any], list[Any]]:
            p = st["plan"]
            edited = self.validate_plan_edit(edit.model_dump())  # the plan gate's checks
            if edited == {k: p.get(k) for k in edited}:
                return st, []
            new = {**p, **edited, "version": p["version"] + 1, "author": author}
            return {**st, "plan": new}, [self._plan_record(new, reason="Edited when forking",
                                                          author=author)]

        return ForkEdit(ForkPlanDoc, value, f"Plan v{plan['version']}: the plan document",
                        apply)

    def _ensure_worktree(self, state: dict[str, Any]) -> None:
        """A fork's worktree and branch, made when its first stage that touches them runs
        (outside any transaction), at the commit the stage starts from: at the fork's first
        stage the one recorded at the fork point. A branch of that name without the worktree
        is another run's: never built on."""
        opts = state["options"]
        if not state.get("fork_start") or (Path(opts["worktree"]) / ".git").exists():
            return
        start = state.get("head") or state["fork_start"]
        if gitops.branch_sha(opts["repo"], opts["branch"]) is not None:
            raise gitops.GitError(
                f"the branch {opts['branch']} exists already without this fork's worktree "
                "(left by another run?), and a fork never builds on another run's branch: "
                "delete that branch, then retry the fork")
        gitops.create_worktree(opts["repo"], opts["worktree"], opts["branch"], start)

    def status_for(self, stage: str) -> str:
        kind = stage.split(":", 1)[0]
        return {"setup": "planning", "plan": "planning", "execute": "executing",
                "review": "reviewing", "merge": "merging", "close": "merging"}[kind]

    # --- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _workspace(state: dict[str, Any]) -> Workspace:
        return Workspace(state["options"]["worktree"])

    @staticmethod
    def _tools(state: dict[str, Any], *, write: bool) -> dict[str, repo_tools.Tool]:
        opts = state["options"]
        chosen = dict(repo_tools.READ_TOOLS)
        if write:
            chosen.update(repo_tools.WRITE_TOOLS)
        if opts.get("test_command"):
            tool = repo_tools.run_tests_tool(opts["test_allowlist"] or [opts["test_command"]],
                                             float(opts["test_timeout"]),
                                             command=opts["test_command"])
            chosen[tool.name] = tool
        return chosen

    def _agent(self, client: ModelClient, role: str, state: dict[str, Any], *, system: str,
               task: str, write: bool, schema: type[Schema], instruction: str, key: str,
               turns: int) -> AgentResult[Schema]:
        ws = self._workspace(state)
        tools = self._tools(state, write=write)
        return run_agent(client, role, system=system, task=task,
                         catalogue=repo_tools.describe(tools),
                         run_tool=lambda name, args: repo_tools.call(tools, ws, name, args),
                         answer_schema=schema, answer_instruction=instruction, key=key,
                         max_turns=int(turns))

    @staticmethod
    def _next_execute(state: dict[str, Any]) -> tuple[dict[str, Any], str]:
        rnd = state["round"] + 1
        state = {**state, "round": rnd, "commit_time": int(time.time()), "mr_status": "draft"}
        return state, f"execute:{state['plan']['version']}:{rnd}"

    def _run_tests(self, state: dict[str, Any]) -> tuple[bool, str, int | None]:
        opts = state["options"]
        if not opts.get("test_command"):
            return False, "No test command is configured for this run.", None
        ws = self._workspace(state)
        try:
            result = ws.run_command(list(opts["test_command"]),
                                    allowlist=opts["test_allowlist"] or [opts["test_command"]],
                                    timeout=float(opts["test_timeout"]),
                                    max_output=MAX_TEST_OUTPUT)
        except ToolError as exc:
            return True, f"The test command could not run: {exc}", -1
        if result.timed_out:
            head = f"$ {' '.join(result.argv)}\nTIMED OUT after {float(opts['test_timeout']):g}s"
            return True, f"{head}\n{result.output}", -1
        return True, (f"$ {' '.join(result.argv)}\nexit code {result.exit_code} "
                      f"({result.seconds:.1f}s)\n{result.output}"), result.exit_code

    # --- stages ---------------------------------------------------------------------------
    def run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        try:
            return self._run_stage(stage, state, client)
        except gitops.GitError as exc:  # the repository went away, a disk filled up, ...
            return StageResult(state=state, outcome="failed",
                               error=f"git failed in stage {stage}: {exc}")

    def _run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        kind, *args = stage.split(":")
        if kind in ("plan", "execute", "review", "merge"):
            self._ensure_worktree(state)  # a fork's, on its first stage that needs it
        if kind == "setup":
            return self._setup(state)
        if kind == "plan":
            return self._plan(int(args[0]), state, client)
        if kind == "execute":
            return self._execute(stage, int(args[0]), int(args[1]), state, client)
        if kind == "review":
            return self._review(stage, int(args[0]), int(args[1]), state, client)
        if kind == "merge":
            return self._merge(state)
        if kind == "close":
            return self._close(args[0], state)
        raise ValueError(f"unknown stage {stage!r}")

    def _setup(self, state: dict[str, Any]) -> StageResult:
        opts = state["options"]
        try:
            base_sha = gitops.create_worktree(opts["repo"], opts["worktree"], opts["branch"],
                                              opts["base"])
        except gitops.GitError as exc:
            return StageResult(state=state, outcome="failed",
                               error=f"Could not create the run's worktree: {exc}")
        state = {**state, "base_sha": base_sha, "head": state["head"] or base_sha}
        return StageResult(state=state, next_stage="plan:1", records=[
            MergeRequestChanged("draft", head_sha=base_sha, base_sha=base_sha)], events=[Event(
                "worktree_ready", f"Branch {opts['branch']} created from {opts['base']} at "
                f"{base_sha[:10]}; the agents work in their own worktree.",
                {"base_sha": base_sha})])

    def _plan(self, version: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        gitops.reset_worktree(state["options"]["worktree"], state["head"])
        parts = [_section("Change request", state["task"])]
        if state["plan"] and state["plan_feedback"]:
            parts.append(_section("Previous plan", plan_markdown(state["plan"])))
        if state["plan_feedback"]:
            parts.append(_section("Why a new plan is needed", state["plan_feedback"]))
        result = self._agent(
            client, "planner", state, system=PLANNER_SYSTEM, task="\n".join(parts), write=False,
            schema=PlanDoc, key=f"plan{version}", turns=state["options"]["planner_turns"],
            instruction="Now write the plan document.")
        doc = result.answer
        reason = "Revised: " + state["plan_feedback"][:150] if state["plan_feedback"] \
            else "First plan"
        plan = {"version": version, "author": "model", **doc.model_dump()}
        state = {**state, "plan": plan, "plan_feedback": ""}
        records: list[Any] = [
            AgentWorked(f"plan:{version}", "plan", version, 0, result.trace_dicts(),
                        result.stopped, doc.model_dump()),
            self._plan_record(plan, reason=reason, author="model"),
        ]
        events = [Event("plan_proposed", f"Plan v{version}: {doc.goal[:200]} "
                        f"({len(doc.steps)} steps, {len(doc.files)} files, "
                        f"{len(result.trace)} tool calls).", {"version": version})]
        if state["options"]["auto_approve_plan"]:
            records.append(GateDecided(PLAN_GATE, "auto_approve", version, author="auto-approve"))
            events.append(Event("plan_decided", f"Plan v{version} approved automatically "
                                "(chosen at start).", {"version": version}))
            state, nxt = self._next_execute(state)
            return StageResult(state=state, next_stage=nxt, records=records, events=events)
        return StageResult(state=state, next_stage=f"plan:{version}",
                           gate=Gate(PLAN_GATE, {"version": version}), records=records,
                           events=events)

    @staticmethod
    def _plan_record(plan: dict[str, Any], *, reason: str, author: str) -> PlanProposed:
        details = {k: plan[k] for k in ("files", "approach", "test_strategy", "risks")}
        return PlanProposed(version=plan["version"], steps=plan["steps"], goal=plan["goal"],
                            reasoning=plan["approach"], author=author, reason=reason,
                            details=details)

