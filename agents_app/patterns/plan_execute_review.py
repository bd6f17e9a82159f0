"""Plan → Execute → Review on a git repository, ending in a merge request a person decides.

A planner with read-only tools writes a plan document; a person approves, edits or rejects it.
An executor that sees only the plan (and, on later rounds, the review comments) changes the
code in the run's own git worktree and branch, runs the configured tests and reports. A
reviewer (by default from another model family) checks the diff against the plan and approves
or rejects with structured comments. Rejections go back to the executor (fix-up), to the
planner (plan wrong) or to the person (unclear, or the round cap reached). An approved change
waits as a merge request until the person merges, sends it back, or discards it.

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
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from ..repos import gitops
from ..repos import tools as repo_tools
from ..repos.workspace import ToolError, Workspace
from .agent_loop import AgentResult, run_agent
from .base import (
    Decision,
    Event,
    Gate,
    InvalidDecision,
    ModelClient,
    ModelError,
    Pattern,
    Schema,
    StageResult,
)
from .plan_execute import GateDecided, PlanProposed

PLAN_GATE = "plan_approval"
MERGE_GATE = "merge_request"
ESCALATION_GATE = "escalation"
MAX_DIFF_IN_PROMPT = 60_000
MAX_DIFF_STORED = 1_000_000
MAX_TEST_OUTPUT = 20_000
MAX_FIELD = 4000
MAX_COMMIT_MESSAGE = 10_000
MERGE_MODES = {"squash": "one squashed commit", "merge": "a merge commit"}
DEFAULT_MERGE_MODE = "squash"
PERSON_COMMENTS = "The person's comments to address"


# --- schemas the models answer in -----------------------------------------------------------
def _clean_list(items: list[str]) -> list[str]:
    return [s.strip() for s in items if s and s.strip()]


class PlanDoc(BaseModel):
    """The planner's plan document; the executor receives exactly this."""

    goal: str = Field(description="What the change achieves, in one or two sentences.")
    files: list[str] = Field(default_factory=list, description="Files to create or modify, "
                             "relative to the repository root.")
    approach: str = Field(default="", description="How the change is made, and why this way.")
    steps: list[str] = Field(min_length=1, description="Ordered, concrete edit steps.")
    test_strategy: str = Field(default="", description="How to check the change works.")
    risks: list[str] = Field(default_factory=list, description="What could go wrong.")

    @field_validator("files", "risks")
    @classmethod
    def _lists(cls, items: list[str]) -> list[str]:
        return _clean_list(items)

    @field_validator("steps")
    @classmethod
    def _steps(cls, steps: list[str]) -> list[str]:
        steps = _clean_list(steps)
        if not steps:
            raise ValueError("the plan needs at least one step")
        return steps


class ExecutionReport(BaseModel):
    """The executor's report after its changes."""

    summary: str = Field(description="What you changed, in a few sentences.")
    done: list[str] = Field(default_factory=list, description="Plan steps carried out.")
    skipped: list[str] = Field(default_factory=list, description="Steps not carried out, "
                               "each with the reason.")
    surprises: list[str] = Field(default_factory=list, description="What you did not expect "
                                 "in the code, including anything that suggests the plan is "
                                 "wrong.")
    tests: str = Field(default="", description="Tests you ran and their result.")

    @field_validator("done", "skipped", "surprises")
    @classmethod
    def _lists(cls, items: list[str]) -> list[str]:
        return _clean_list(items)


class ReviewComment(BaseModel):
    file: str = Field(default="", description="Path of the file, or empty for the whole change.")
    line: int | None = Field(default=None, description="Line in the new version, if any.")
    problem: str = Field(description="What is wrong.")
    requested_change: str = Field(default="", description="What the executor should do.")


class ReviewVerdict(BaseModel):
    """The reviewer's decision on the change."""

    approve: bool = Field(description="True only if the change does what the plan says and "
                          "is correct.")
    summary: str = Field(description="The verdict in two or three sentences.")
    follows_plan: bool = Field(default=True, description="Does the change match the plan?")
    comments: list[ReviewComment] = Field(default_factory=list)
    rejection_kind: Literal["fixup", "plan_wrong", "unclear"] | None = Field(
        default=None, description="When rejecting: fixup (the executor can fix it from the "
        "comments), plan_wrong (the plan itself is mistaken), unclear (a person must decide).")
    reason: str = Field(default="", description="When rejecting: why, in one paragraph.")


# --- records the engine persists ------------------------------------------------------------
@dataclass
class AgentWorked:
    """One agent stage: its tool trace and its structured answer."""

    stage: str
    kind: str  # plan | execute | review
    plan_version: int
    round: int
    trace: list[dict[str, Any]]
    stopped: str
    answer: dict[str, Any]
    commit_sha: str = ""
    base_sha: str = ""
    diff: str = ""
    diff_truncated: bool = False
    files: list[dict[str, str]] = field(default_factory=list)
    test_output: str = ""
    test_exit: int | None = None
    test_ran: bool = False


@dataclass
class MergeRequestChanged:
    status: str  # draft | open | conflict | merged | discarded | closed
    head_sha: str = ""
    base_sha: str = ""
    merged_sha: str = ""
    message: str = ""
    decided: bool = False  # a person's decision: the persister records who and when


# --- prompts (ours) ---------------------------------------------------------------------------
PLANNER_SYSTEM = """You plan a code change in a git repository for a separate executor.
Read the code with the tools before you plan: find the files involved and look at them.
You cannot change anything. Your plan is the only thing the executor will see, so it must
stand on its own: name the files, say how to make the change, list the edit steps in order,
say how to check the change (tests to run or add), and name the risks."""

EXECUTOR_SYSTEM = """You carry out a plan for a code change in a git repository. Follow the
plan; do not redesign it. Read the files before you edit them. Make the edits with the tools
(prefer replace_in_file or apply_patch for small changes to existing files). If a test
command is available, run it after your changes. If the plan cannot work, do what you can
and explain why in `surprises`; do not invent a different plan. Your changes are committed
for you when you finish."""

REVIEWER_SYSTEM = """You review a code change against the plan it was meant to implement.
The question is whether the change does what the plan and the request ask, correctly and
completely, not only whether the code looks tidy. You can read the repository (the change
is applied) and, if available, run the tests; you cannot edit. Reject when something is
wrong or missing, with comments precise enough to act on (file, line, problem, requested
change). When the person sent the change back with comments, check that the change addresses
them. Choose the rejection kind: `fixup` if the executor can fix it from your comments,
`plan_wrong` if the plan itself is mistaken (say why in `reason`), `unclear` if a person
must decide. Failing tests, an empty change, or changes outside the plan's scope without a
good reason are grounds to reject. Do not approve out of politeness."""


def _section(title: str, body: str, level: int = 2) -> str:
    return f"{'#' * level} {title}\n{(body or '').strip() or '(none)'}\n"


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {s}" for s in items) or "(none)"


def plan_markdown(plan: dict[str, Any]) -> str:
    """The plan document as the executor and the reviewer read it (level-3 headings, so it
    nests under a prompt's own sections)."""
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(plan.get("steps") or [], 1))
    return "\n".join(_section(title, body, level=3) for title, body in (
        ("Goal", plan.get("goal", "")),
        ("Files to touch", _bullets(plan.get("files") or [])),
        ("Approach", plan.get("approach", "")),
        ("Steps", steps),
        ("Test strategy", plan.get("test_strategy", "")),
        ("Risks", _bullets(plan.get("risks") or []))))


def comments_markdown(comments: list[dict[str, Any]]) -> str:
    lines = []
    for c in comments:
        if c.get("by"):  # a person's comment: their words, as they wrote them
            lines.append(f"- {c['by']}: {c.get('problem', '').strip()}")
            continue
        where = c.get("file") or "(whole change)"
        if c.get("line"):
            where += f":{c['line']}"
        text = f"- {where}: {c.get('problem', '').strip()}"
        if c.get("requested_change"):
            text += f" → {c['requested_change'].strip()}"
        lines.append(text)
    return "\n".join(lines) or "(none)"


def subject(text: str) -> str:
    """A commit subject: the first line, whole (a cut subject loses what the change does)."""
    return " ".join((text or "").split("\n", 1)[0].split()) or "Quorum change"


def person_comments(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in comments or [] if c.get("by")]


def proposed_merge_message(state: dict[str, Any]) -> str:
    """The commit message offered to the person at the merge gate: the plan's goal as the
    subject, the last round's summary, and where it came from."""
    plan = state.get("plan") or {}
    report = (state.get("last_round") or {}).get("report") or {}
    parts = [subject(plan.get("goal", ""))]
    if (report.get("summary") or "").strip():
        parts.append(report["summary"].strip()[:2000])
    parts.append(f"Approved in Quorum after {state.get('round', 0)} round(s) of execution and "
                 f"review (branch {(state.get('options') or {}).get('branch', '')}).")
    return "\n\n".join(parts)


def clean_commit_message(text: Any) -> str:
    """The person's commit message, or InvalidDecision saying plainly what is wrong."""
    if not isinstance(text, str):
        raise InvalidDecision("The commit message could not be read; reload the page.")
    message = text.replace("\r\n", "\n").replace("\r", "\n")
    if any(unicodedata.category(ch) == "Cc" and ch not in "\n\t" for ch in message):
        raise InvalidDecision("The commit message contains control characters (such as NUL "
                              "bytes); remove them and merge again. Nothing was merged.")
    message = "\n".join(line.rstrip() for line in message.strip().split("\n"))
    if not message:
        raise InvalidDecision("Write a commit message: it cannot be empty. Nothing was merged.")
    if len(message) > MAX_COMMIT_MESSAGE:
        raise InvalidDecision(f"The commit message is {len(message):,} characters; the limit is "
                              f"{MAX_COMMIT_MESSAGE:,}. Nothing was merged.")
    return message


def clip(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n[... {len(text) - limit:,} more characters not shown ...]\n", True


_FAMILIES = (
    ("offline", ("offline/",)),
    ("openai", ("gpt-", "openai/", "o1", "o3", "o4", "chatgpt", "azure/")),
    ("anthropic", ("claude", "anthropic/", "bedrock/anthropic")),
    ("google", ("gemini", "vertex_ai/", "google/")),
    ("mistral", ("mistral", "codestral")),
    ("meta", ("llama", "meta-llama", "groq/llama")),
    ("deepseek", ("deepseek",)),
)


def model_family(model: str) -> str:
    """The family a model name belongs to (its maker), for the same-family warning."""
    name = (model or "").strip().lower()
    for family, prefixes in _FAMILIES:
        if any(name.startswith(p) or f"/{p}" in name for p in prefixes):
            return family
    return name.split("/", 1)[0] if "/" in name else name


def same_family(a: str, b: str) -> bool:
    return bool(a and b) and model_family(a) == model_family(b)


class PlanExecuteReview(Pattern):
    name = "plan_execute_review"
    label = "Plan, execute, review (git)"
    roles = ("planner", "executor", "reviewer")
    gates = (PLAN_GATE, MERGE_GATE, ESCALATION_GATE)
    starts_from_task = False  # needs a repository: started from its own form
    page = "change_detail"
    defaults: dict[str, Any] = {
        "repo": "",
        "base": "",
        "branch": "",
        "worktree": "",
        "worktree_root": "",
        "max_rounds": 2,
        "planner_turns": 15,
        "executor_turns": 25,
        "reviewer_turns": 12,
        "test_command": [],  # argv; empty: no test tool
        "test_allowlist": [],
        "test_timeout": 300.0,
        "auto_approve_plan": False,
        "auto_merge": False,
        "max_run_seconds": 1800.0,
    }

    # --- setup ----------------------------------------------------------------------------
    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = {**self.defaults, **{k: v for k, v in options.items() if k in self.defaults}}
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

    def status_for(self, stage: str) -> str:
        kind = stage.split(":", 1)[0]
        return {"setup": "planning", "plan": "planning", "execute": "executing",
                "review": "reviewing", "merge": "merging", "close": "merging"}[kind]

    def describe_stage(self, stage: str) -> str | None:
        kind, *args = stage.split(":")
        if kind == "setup":
            return "Creating the run's worktree and branch."
        if kind == "plan":
            return f"The planner is reading the code and writing plan v{args[0]}."
        if kind == "execute":
            return f"Round {args[1]}: the executor is changing the code (plan v{args[0]})."
        if kind == "review":
            return f"Round {args[1]}: the reviewer is checking the change against the plan."
        if kind == "merge":
            return "Merging the branch into the base branch."
        if kind == "close":
            return "Removing the run's worktree."
        return None

    def gate_message(self, gate: str) -> str | None:
        return {
            PLAN_GATE: "Waiting for you: approve, edit or reject the plan.",
            MERGE_GATE: "Waiting for you: the merge request is ready (merge, send back, or "
                        "discard).",
            ESCALATION_GATE: "Waiting for you: the agents could not settle this change "
                             "(another round, a new plan, or stop).",
        }.get(gate)

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
        doc: PlanDoc = result.answer
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

    def _execute(self, stage: str, version: int, rnd: int, state: dict[str, Any],
                 client: ModelClient) -> StageResult:
        opts = state["options"]
        gitops.reset_worktree(opts["worktree"], state["head"])
        parts = [_section("Plan", plan_markdown(state["plan"]))]
        asked = person_comments(state["comments"])
        reviewer = [c for c in state["comments"] if not c.get("by")]
        where = ("the branch starts again from the current base branch, so make the whole "
                 "change again" if state.get("fresh_base") else
                 "your previous attempt is already in the files")
        if asked:
            parts.append(_section(f"{PERSON_COMMENTS} ({where}; do what they ask)",
                                  comments_markdown(asked)))
        if reviewer:
            parts.append(_section("Review comments to address (your previous attempt is "
                                  "already in the files)", comments_markdown(reviewer)))
        try:
            result = self._agent(
                client, "executor", state, system=EXECUTOR_SYSTEM, task="\n".join(parts),
                write=True, schema=ExecutionReport, key=f"exec{rnd}",
                turns=opts["executor_turns"], instruction="Now write your execution report.")
        except ModelError as exc:
            gitops.reset_worktree(opts["worktree"], state["head"])  # drop half-made edits
            return self._model_failed(state, stage, "executor", rnd, exc)
        report: ExecutionReport = result.answer
        ran, test_output, test_exit = self._run_tests(state)
        message = f"{subject(state['plan']['goal'])}\n\n{report.summary.strip()[:2000]}\n\n" \
                  f"Quorum run round {rnd}, plan v{version}."
        answer = report.model_dump()
        if asked:  # the page shows which comments of the person this round had to address
            answer["addressing"] = asked
        sha = gitops.commit_all(opts["worktree"], message, timestamp=state["commit_time"])
        head = sha or state["head"]
        full_diff = gitops.diff(opts["worktree"], state["base_sha"], head)
        files = gitops.changed_files(opts["worktree"], state["base_sha"], head)
        stored, truncated = clip(full_diff, MAX_DIFF_STORED)
        state = {**state, "head": head, "comments": [], "fresh_base": False, "last_round": {
            "round": rnd, "report": report.model_dump(), "test_output": test_output,
            "test_exit": test_exit, "test_ran": ran, "commit": sha or "", "files": files,
            "addressing": asked}}
        tests = "no tests configured" if not ran else (
            "tests passed" if test_exit == 0 else "tests FAILED")
        what = f"committed {sha[:10]}" if sha else "no new changes"
        return StageResult(state=state, next_stage=f"review:{version}:{rnd}", records=[
            AgentWorked(stage, "execute", version, rnd, result.trace_dicts(), result.stopped,
                        answer, commit_sha=sha or "", base_sha=state["base_sha"],
                        diff=stored, diff_truncated=truncated, files=files,
                        test_output=test_output, test_exit=test_exit, test_ran=ran),
            MergeRequestChanged("draft", head_sha=head)],
            events=[Event("execution_reported", f"Round {rnd}: {what}; {len(files)} files "
                          f"changed in total; {tests}; {len(result.trace)} tool calls.",
                          {"round": rnd, "commit": sha or ""})])

    def _review(self, stage: str, version: int, rnd: int, state: dict[str, Any],
                client: ModelClient) -> StageResult:
        opts = state["options"]
        gitops.reset_worktree(opts["worktree"], state["head"])
        last = state["last_round"]
        diff = gitops.diff(opts["worktree"], state["base_sha"], state["head"])
        shown, _ = clip(diff, MAX_DIFF_IN_PROMPT)
        report = last["report"]
        report_md = "\n".join([
            report["summary"], "", "Done:", _bullets(report["done"]), "Skipped:",
            _bullets(report["skipped"]), "Surprises:", _bullets(report["surprises"]),
            "Tests (executor's account):", report["tests"] or "(none)"])
        parts = [_section("Change request", state["task"]),
                 _section("Plan", plan_markdown(state["plan"])),
                 _section("Diff against the base branch", f"```diff\n{shown}\n```" if diff.strip()
                          else "(the branch has no changes)"),
                 _section("Execution report", report_md),
                 *([_section(f"{PERSON_COMMENTS} (the person sent the change back with these)",
                             comments_markdown(last["addressing"]))]
                   if last.get("addressing") else []),
                 _section("Test output (run by Quorum after the change)", last["test_output"])]
        try:
            result = self._agent(
                client, "reviewer", state, system=REVIEWER_SYSTEM, task="\n".join(parts),
                write=False, schema=ReviewVerdict, key=f"review{rnd}",
                turns=opts["reviewer_turns"], instruction="Now give your verdict.")
        except ModelError as exc:
            gitops.reset_worktree(opts["worktree"], state["head"])
            return self._model_failed(state, stage, "reviewer", rnd, exc)
        verdict: ReviewVerdict = result.answer
        data = verdict.model_dump()
        if not verdict.approve and not verdict.rejection_kind:
            data["rejection_kind"] = "fixup"
        if verdict.approve:
            data["rejection_kind"] = None
        warnings = []
        if verdict.approve and last["test_ran"] and last["test_exit"] != 0:
            warnings.append("The reviewer approved although the tests fail.")
        if verdict.approve and not diff.strip():
            warnings.append("The reviewer approved a branch with no changes.")
        if last.get("addressing") and not last.get("commit"):
            who = ", ".join(sorted({c["by"] for c in last["addressing"]}))
            warnings.append(f"Round {rnd} made no new change after the comments from {who}: "
                            "the branch is as it was before they sent it back.")
        data["warnings"] = warnings
        gitops.reset_worktree(opts["worktree"], state["head"])  # drop files the tests left
        state = {**state, "last_review": {**data, "round": rnd}}
        records: list[Any] = [AgentWorked(stage, "review", version, rnd, result.trace_dicts(),
                                          result.stopped, data)]
        if verdict.approve:
            msg = f"Round {rnd}: the reviewer approved. {verdict.summary[:300]}"
            events = [Event("review_verdict", msg, {"round": rnd, "approve": True})]
            events += [Event("review_warning", w, {"round": rnd}) for w in warnings]
            if opts["auto_merge"]:
                records.append(GateDecided(MERGE_GATE, "auto_approve", version,
                                           author="auto-merge"))
                events.append(Event("merge_decided", "Merge approved automatically (chosen at "
                                    "start)."))
                return StageResult(state=state, next_stage=f"merge:{rnd}", records=records,
                                   events=events)
            state = {**state, "mr_status": "open"}
            records.append(MergeRequestChanged("open", head_sha=state["head"]))
            return StageResult(state=state, next_stage=f"merge:{rnd}",
                               gate=Gate(MERGE_GATE, {"round": rnd}), records=records,
                               events=events)
        kind = data["rejection_kind"]
        rejections = state["rejections"] + 1
        state = {**state, "rejections": rejections}
        label = {"fixup": "fix-up", "plan_wrong": "plan wrong", "unclear": "unclear"}[kind]
        events = [Event("review_verdict", f"Round {rnd}: the reviewer rejected the change "
                        f"({label}). {(verdict.reason or verdict.summary)[:300]}",
                        {"round": rnd, "approve": False, "kind": kind})]
        cap = int(opts["max_rounds"])
        if kind == "unclear" or rejections >= cap:
            why = "the reviewer found it unclear" if kind == "unclear" else \
                f"{rejections} rejected rounds reached the cap of {cap}"
            state = {**state, "escalation": why, "escalation_from": "review"}
            events.append(Event("escalated", f"Escalated to you: {why}.", {"round": rnd}))
            return StageResult(state=state, next_stage=f"review:{version}:{rnd}",
                               gate=Gate(ESCALATION_GATE, {"round": rnd, "why": why}),
                               records=records, events=events)
        if kind == "plan_wrong":
            state = {**state, "plan_feedback": verdict.reason or verdict.summary,
                     "head": state["base_sha"], "comments": []}
            events.append(Event("replanning", f"Back to the planner: plan v{version} was judged "
                                "wrong. The branch starts again from the base."))
            return StageResult(state=state, next_stage=f"plan:{version + 1}", records=records,
                               events=events)
        state = {**state, "comments": [c.model_dump() for c in verdict.comments] or [
            {"file": "", "line": None, "problem": verdict.reason or verdict.summary,
             "requested_change": ""}]}
        state, nxt = self._next_execute(state)
        events.append(Event("fixup_round", f"Back to the executor with {len(state['comments'])} "
                            f"comment(s): round {state['round']} of at most {cap}.",
                            {"round": state["round"]}))
        return StageResult(state=state, next_stage=nxt, records=records, events=events)

    def _model_failed(self, state: dict[str, Any], stage: str, role: str, rnd: int,
                      exc: ModelError) -> StageResult:
        """A model that keeps failing (after the gateway's retries) hands the run to the person
        instead of failing it: a long run should not be lost to a provider's bad hour."""
        why = f"the {role}'s model failed in round {rnd}: {str(exc)[:300]}"
        state = {**state, "escalation": why, "escalation_from": role}
        return StageResult(state=state, next_stage=stage, gate=Gate(ESCALATION_GATE, {
            "round": rnd, "why": why}), events=[Event("escalated", f"Escalated to you: {why}. "
                                                     "Another round retries it.", {"round": rnd})])

    def _merge(self, state: dict[str, Any]) -> StageResult:
        opts = state["options"]
        message = state.get("merge_message") or proposed_merge_message(state)
        mode = state.get("merge_mode") or DEFAULT_MERGE_MODE
        try:
            if state.get("head") and gitops.branch_sha(opts["repo"], opts["branch"]) is None:
                # An earlier attempt of this stage merged and removed the branch, and the worker
                # died before the run recorded it. Put the branch back at the approved commit:
                # the merge then finds it already contained instead of "no such branch".
                gitops.create_worktree(opts["repo"], opts["worktree"], opts["branch"],
                                       state["head"])
            outcome = gitops.merge_into_base(opts["repo"], opts["base"], opts["branch"], message,
                                             mode=mode)
        except gitops.GitError as exc:
            outcome = {"merged": False, "conflicts": [], "message": str(exc)}
        if not outcome["merged"]:
            conflicts = outcome.get("conflicts") or []
            # Only a conflict makes the executor redo the change on the current base; a merge
            # blocked by the person's own uncommitted changes keeps the branch as it is.
            base_now = (gitops.branch_sha(opts["repo"], opts["base"]) or "") if conflicts else ""
            text = (f"Not merged: {opts['base']} changed in the same places "
                    f"({', '.join(conflicts[:10])})." if conflicts else
                    f"Not merged: {outcome['message']}")
            status = "conflict" if conflicts else "open"
            if conflicts:
                text += " Nothing was changed."
            state = {**state, "mr_status": status, "conflict_base": base_now,
                     "merge_problem": {"conflicts": conflicts, "message": text,
                                       "detail": outcome.get("message", "")[:MAX_FIELD]}}
            return StageResult(state=state, next_stage=f"merge:{state['round']}",
                               gate=Gate(MERGE_GATE, {"conflicts": conflicts}),
                               records=[MergeRequestChanged(status, message=text)],
                               events=[Event("merge_conflict" if conflicts else "merge_blocked",
                                             text, {"conflicts": conflicts})])
        sha = outcome["sha"]
        how = "already contained" if outcome.get("up_to_date") else (
            "fast-forward" if outcome.get("fast_forward") else
            "squashed into one commit" if outcome.get("squashed") else "merge commit")
        try:
            gitops.remove_worktree(opts["repo"], opts["worktree"], opts["branch"])
            cleaned = f" Worktree and branch {opts['branch']} removed."
        except gitops.GitError as exc:
            cleaned = f" The worktree could not be removed: {exc}"
        text = f"Merged into {opts['base']} at {sha[:10]} ({how}).{cleaned}"
        state = {**state, "mr_status": "merged", "merge_problem": None}
        return StageResult(state=state, outcome="completed", answer=self.summary(state, text),
                           records=[MergeRequestChanged("merged", merged_sha=sha, message=text)],
                           events=[Event("merged", text, {"sha": sha})])

    def _close(self, kind: str, state: dict[str, Any]) -> StageResult:
        opts = state["options"]
        keep = kind == "stop"
        try:
            gitops.remove_worktree(opts["repo"], opts["worktree"], opts["branch"],
                                   delete_branch=not keep)
            done = (f"Worktree removed; branch {opts['branch']} kept for you to inspect."
                    if keep else f"Worktree and branch {opts['branch']} removed.")
        except gitops.GitError as exc:
            done = f"The worktree could not be removed: {exc}"
        status = "closed" if keep else "discarded"
        text = ("Stopped at the escalation; nothing was merged. " if keep
                else "Merge request discarded; nothing was merged. ") + done
        state = {**state, "mr_status": status}
        return StageResult(state=state, outcome="cancelled" if keep else "completed",
                           answer=self.summary(state, text), error="",
                           records=[MergeRequestChanged(status, message=text)],
                           events=[Event(status, text)])

    @staticmethod
    def summary(state: dict[str, Any], outcome: str) -> str:
        plan = state.get("plan") or {}
        review = state.get("last_review") or {}
        lines = [f"**{outcome}**", "", f"Goal: {plan.get('goal', '')}",
                 f"Rounds of execution: {state.get('round', 0)}"]
        if review.get("summary"):
            lines.append(f"Last review: {review['summary']}")
        return "\n".join(lines)

    # --- decisions ------------------------------------------------------------------------
    def decide(self, gate: str, state: dict[str, Any], decision: Decision) -> StageResult:
        if gate == PLAN_GATE:
            return self._decide_plan(state, decision)
        if gate == MERGE_GATE:
            return self._decide_merge(state, decision)
        if gate == ESCALATION_GATE:
            return self._decide_escalation(state, decision)
        raise InvalidDecision(f"this run has no {gate} gate")

    def _decide_plan(self, state: dict[str, Any], decision: Decision) -> StageResult:
        plan = state["plan"]
        version = plan["version"]
        who = decision.author
        if decision.action == "reject":
            feedback = decision.feedback.strip()
            if not feedback:
                raise InvalidDecision("Say what is wrong with the plan, so the planner can fix it.")
            state = {**state, "plan_feedback": f"{who} rejected the plan: {feedback}"}
            return StageResult(state=state, next_stage=f"plan:{version + 1}", records=[
                GateDecided(PLAN_GATE, "reject", version, feedback=feedback, author=who)],
                events=[Event("plan_decided", f"{who} rejected plan v{version}: {feedback}",
                              {"version": version})])
        if decision.action != "approve":
            raise InvalidDecision(f"unknown action {decision.action!r}")
        records: list[Any] = []
        events: list[Event] = []
        if decision.edits is not None:
            edited = self.validate_plan_edit(decision.edits)
            current = {k: plan[k] for k in edited}
            if edited != current:
                version += 1
                plan = {**plan, **edited, "version": version, "author": who}
                records.append(self._plan_record(plan, reason="Edited by hand", author=who))
                events.append(Event("plan_edited", f"{who} edited the plan (v{version}).",
                                    {"version": version}))
        records.append(GateDecided(PLAN_GATE, "approve", version, edited=bool(records),
                                   author=who))
        events.append(Event("plan_decided", f"{who} approved plan v{version}.",
                            {"version": version}))
        state = {**state, "plan": plan, "rejections": 0}
        state, nxt = self._next_execute(state)
        return StageResult(state=state, next_stage=nxt, records=records, events=events)

    @staticmethod
    def validate_plan_edit(edits: dict[str, Any]) -> dict[str, Any]:
        """A person's edited plan document: the same checks as the planner's answer."""
        if not isinstance(edits, dict):
            raise InvalidDecision("The edited plan could not be read.")
        if not _clean_list(edits.get("steps") or []):
            raise InvalidDecision("The plan has no steps, so there is nothing to approve: add at "
                                  "least one step, or reject the plan with feedback for the "
                                  "planner.")
        for name, value in edits.items():
            items = value if isinstance(value, list) else [value]
            if any(isinstance(v, str) and any(unicodedata.category(ch) == "Cc" and ch not in
                                              "\n\t" for ch in v) for v in items):
                raise InvalidDecision(f"The plan's {name.replace('_', ' ')} contains control "
                                      "characters (such as NUL bytes); remove them.")
        try:
            doc = PlanDoc(**edits)
        except (ValueError, TypeError) as exc:
            first = str(exc).splitlines()
            detail = first[2].strip() if len(first) > 2 else str(exc)
            raise InvalidDecision(f"The edited plan is not valid: {detail}") from None
        if not doc.goal.strip():
            raise InvalidDecision("The plan needs a goal.")
        for name, value in doc.model_dump().items():
            items = value if isinstance(value, list) else [value]
            if any(len(v) > MAX_FIELD for v in items):
                raise InvalidDecision(f"The plan's {name.replace('_', ' ')} is longer than "
                                      f"{MAX_FIELD} characters.")
        if len(doc.steps) > 30 or len(doc.files) > 200 or len(doc.risks) > 50:
            raise InvalidDecision("The plan is too long (at most 30 steps, 200 files, 50 risks).")
        return doc.model_dump()

    def _decide_merge(self, state: dict[str, Any], decision: Decision) -> StageResult:
        who = decision.author
        version = state["plan"]["version"]
        rnd = state["round"]
        if decision.action == "approve":
            message, mode = self.validate_merge_choice(state, decision.edits)
            state = {**state, "merge_message": message, "merge_mode": mode}
            return StageResult(state=state, next_stage=f"merge:{rnd}", records=[
                GateDecided(MERGE_GATE, "approve", version, author=who),
                MergeRequestChanged("open", decided=True)],
                events=[Event("merge_decided", f"{who} approved the merge request.")])
        if decision.action == "discard":
            return StageResult(state=state, next_stage="close:discard", records=[
                GateDecided(MERGE_GATE, "discard", version, feedback=decision.feedback.strip(),
                            author=who), MergeRequestChanged("open", decided=True)],
                events=[Event("merge_decided", f"{who} discarded the merge request.")])
        if decision.action != "reject":
            raise InvalidDecision(f"unknown action {decision.action!r}")
        comment = decision.feedback.strip()
        if not comment:
            raise InvalidDecision("Say what should change, so the executor can act on it.")
        state = {**state, "comments": [{"file": "", "line": None, "problem": comment,
                                        "requested_change": "", "by": who}],
                 "rejections": 0, "merge_problem": None}
        note = ""
        if state.get("conflict_base"):
            # The branch conflicts with the base: redo the plan on the base as it is now.
            state = {**state, "base_sha": state["conflict_base"], "head": state["conflict_base"],
                     "conflict_base": "", "fresh_base": True}
            note = " The branch starts again from the current base, since it conflicted."
        state, nxt = self._next_execute(state)
        return StageResult(state=state, next_stage=nxt, records=[
            GateDecided(MERGE_GATE, "reject", version, feedback=comment, author=who),
            MergeRequestChanged("draft", decided=True)],
            events=[Event("merge_decided", f"{who} sent the merge request back: {comment}"
                          + note)])

    @staticmethod
    def validate_merge_choice(state: dict[str, Any], choice: Any) -> tuple[str, str]:
        """The commit message and merge mode the person chose (the proposal and a squash when
        they chose nothing)."""
        if choice is None:
            return proposed_merge_message(state), DEFAULT_MERGE_MODE
        if not isinstance(choice, dict):
            raise InvalidDecision("The merge choice could not be read; reload the page.")
        mode = choice.get("mode") or DEFAULT_MERGE_MODE
        if mode not in MERGE_MODES:
            raise InvalidDecision("Choose a squashed commit or a merge commit.")
        return clean_commit_message(choice.get("message")), mode

    def _decide_escalation(self, state: dict[str, Any], decision: Decision) -> StageResult:
        who = decision.author
        version = state["plan"]["version"]
        note = decision.feedback.strip()
        review = state.get("last_review") or {}
        if decision.action == "another_round" and state.get("escalation_from") == "executor":
            # The executor's model failed: retry the round with the input it had.
            comments = list(state["comments"])
            if note:
                comments.append({"file": "", "line": None, "problem": note,
                                 "requested_change": "", "by": who})
            state = {**state, "comments": comments, "rejections": 0, "escalation_from": ""}
            state, nxt = self._next_execute(state)
            return StageResult(state=state, next_stage=nxt, records=[
                GateDecided(ESCALATION_GATE, "another_round", version, feedback=note, author=who)],
                events=[Event("escalation_decided", f"{who} asked to retry the round.")])
        if decision.action == "another_round" and state.get("escalation_from") == "reviewer":
            # The reviewer's model failed: review the same change again.
            retry = state.get("review_retries", 0) + 1
            state = {**state, "escalation_from": "", "review_retries": retry}
            return StageResult(state=state, next_stage=f"review:{version}:{state['round']}:"
                               f"retry{retry}", records=[
                GateDecided(ESCALATION_GATE, "another_round", version, feedback=note, author=who)],
                events=[Event("escalation_decided", f"{who} asked to retry the review.")])
        if decision.action == "another_round":
            comments = [c for c in review.get("comments") or []]
            if note:
                comments.append({"file": "", "line": None, "problem": note,
                                 "requested_change": "", "by": who})
            if not comments:
                comments = [{"file": "", "line": None, "problem": review.get("reason") or
                             review.get("summary") or "The reviewer rejected the change.",
                             "requested_change": ""}]
            state = {**state, "comments": comments, "rejections": 0}
            state, nxt = self._next_execute(state)
            return StageResult(state=state, next_stage=nxt, records=[
                GateDecided(ESCALATION_GATE, "another_round", version, feedback=note, author=who)],
                events=[Event("escalation_decided", f"{who} asked for another round.")])
        if decision.action == "replan":
            reason = note or review.get("reason") or review.get("summary") or ""
            if not reason:
                raise InvalidDecision("Say what the new plan should do differently.")
            state = {**state, "plan_feedback": reason, "head": state["base_sha"],
                     "comments": [], "rejections": 0, "escalation_from": ""}
            return StageResult(state=state, next_stage=f"plan:{version + 1}", records=[
                GateDecided(ESCALATION_GATE, "replan", version, feedback=note, author=who)],
                events=[Event("escalation_decided", f"{who} asked for a new plan.")])
        if decision.action == "stop":
            return StageResult(state=state, next_stage="close:stop", records=[
                GateDecided(ESCALATION_GATE, "stop", version, feedback=note, author=who),
                MergeRequestChanged("draft", decided=True)],
                events=[Event("escalation_decided", f"{who} stopped the run.")])
        raise InvalidDecision(f"unknown action {decision.action!r}")

