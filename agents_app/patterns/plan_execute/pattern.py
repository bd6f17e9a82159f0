"""Plan-and-Execute: a planner writes the plan, a person may approve, edit or reject it,
an executor carries out the steps in order, and a synthesizer writes the answer.

Stages (the name is also the journal key of the stage's model calls):
  ``start``        complexity gate; no model call
  ``plan:V``       the planner writes plan version V (after feedback or a failed step too)
  ``step:V:I``     the executor carries out step I of plan version V
  ``synthesize``   the synthesizer combines the step outputs into the answer
  ``direct``       a simple task answered in one call, without a plan
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from ..base import (
    Decision,
    Event,
    ForkEdit,
    Gate,
    InvalidDecision,
    ModelClient,
    ModelError,
    OfflineReply,
    Pattern,
    StageResult,
)
from ..gate_input import check_text
from ..options import PatternOptions, option
from ..records import GateDecided, PlanProposed, StepRecorded
from . import offline
from .complexity import complexity_score
from .prompts import (
    COMPLETED,
    CURRENT,
    DIRECT_SYSTEM,
    EARLIER,
    EXECUTOR_SYSTEM,
    FAILED,
    FEEDBACK,
    INSTRUCTION,
    OUTPUTS,
    PLAN,
    PLANNER_SYSTEM,
    PREVIOUS_PLAN,
    SYNTHESIZER_SYSTEM,
    TASK,
    _numbered,
    _section,
)

PLAN_GATE = "plan_approval"
MAX_STEP_CHARS = 2000
EMPTY_PLAN = ("The plan has no steps left to carry out, so there is nothing to approve. Add a "
              "step, or reject the plan with feedback and the planner writes a new one.")


class EmptyPlan(InvalidDecision):
    """An approval of a plan with nothing left to carry out; the page offers to reject."""


# --- schemas the models answer in -----------------------------------------------------------
class ForkPlan(BaseModel):
    """A fork's edit of the plan at its gate."""

    steps: list[str] = Field(max_length=30)  # none left: the gate's own message says so


class PlanDraft(BaseModel):
    """The planner's answer."""

    goal: str = Field(default="", description="The objective in one sentence.")
    reasoning: str = Field(default="", description="Why these steps, briefly.")
    steps: list[str] = Field(description="Concrete steps in execution order.", min_length=1)

    @field_validator("steps")
    @classmethod
    def _no_blank_steps(cls, steps: list[str]) -> list[str]:
        cleaned = [s.strip() for s in steps]
        if any(not s for s in cleaned):
            raise ValueError("steps must not be empty strings")
        return cleaned


class StepReport(BaseModel):
    """The executor's answer for one step."""

    output: str = Field(description="The result of this step, in Markdown.")
    succeeded: bool = Field(default=True, description="False if the step could not be done.")
    problem: str = Field(default="", description="When not succeeded: what stood in the way.")


class PlanExecuteOptions(PatternOptions):
    max_steps: int = option(10, label="Max steps", ge=1, le=30, setting="QUORUM_MAX_STEPS",
                            help="most steps in a plan")
    max_replans: int = option(2, label="Max replans", ge=0, le=10, setting="QUORUM_MAX_REPLANS",
                              help="replans after a failed step before the run fails")
    auto_approve: bool = option(False, label="Auto-approve the plan",
                                help="skip the plan gate (recorded as auto-approved)")
    complexity_gate: bool = option(False, label="Skip planning for simple tasks",
                                   help="a simple one-line question is answered directly")
    min_complexity: int = option(2, label="Least complexity planned", ge=1, le=10, hidden=True)


class PlanExecute(Pattern):
    name = "plan_execute"
    label = "Plan and execute"
    stage_labels = {"start": "Getting started", "plan": "Planning (plan v{0})",
                    "step": "Step {1+} of plan v{0}", "synthesize": "Final answer",
                    "direct": "Direct answer"}
    stage_lines = {"start": "The run has started.", "plan": "The planner is writing plan v{0}.",
                   "step": "The executor is working on step {1+} (plan v{0}).",
                   "synthesize": "The synthesizer is writing the answer.",
                   "direct": "Answering directly."}
    gate_lines = {PLAN_GATE: "Waiting for you: approve, edit or reject the plan."}
    status_lines = {"planning": "The planner is writing a new version of the plan.",
                    "executing": "The executor is carrying out the plan's steps.",
                    "synthesizing": "The synthesizer is writing the answer."}
    purpose = "For multi-step work you want to read, edit and approve before it runs."
    summary = ("A planner writes numbered steps; you approve, edit or reject the plan; an "
               "executor carries out each step; a synthesizer writes the answer.")
    roles = ("planner", "executor", "synthesizer")
    gates = (PLAN_GATE,)
    options = PlanExecuteOptions
    panels = ("plan-panel", "steps-panel")
    live_events = {"plan_proposed": ("plan-panel",), "plan_edited": ("plan-panel",),
                   "plan_decided": ("plan-panel",), "plan_trimmed": ("plan-panel",),
                   "step_completed": ("steps-panel",), "step_failed": ("steps-panel",)}

    def offline_replies(self) -> list[OfflineReply]:
        return [("PlanDraft", None, offline.plan), ("StepReport", None, offline.step_report),
                (None, "synthesizer", offline.synthesis)]

    def headless_hint(self, gate: str) -> str:
        return "rerun with --auto-approve" if gate == PLAN_GATE else ""

    # --- setup ----------------------------------------------------------------------------
    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = self.check_options(options)
        return {"task": task, "options": opts, "plan": None, "results": [], "replans": 0,
                "feedback": "", "failure": None}

    def first_stage(self, state: dict[str, Any]) -> str:
        return "start"

    def status_for(self, stage: str) -> str:
        kind = stage.split(":", 1)[0]
        return {"start": "planning", "plan": "planning", "step": "executing",
                "synthesize": "synthesizing", "direct": "executing"}[kind]

    # --- stages ---------------------------------------------------------------------------
    def run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        kind, *args = stage.split(":")
        if kind == "start":
            return self._start(state)
        if kind == "plan":
            return self._plan(int(args[0]), state, client)
        if kind == "step":
            return self._step(int(args[0]), int(args[1]), state, client)
        if kind == "synthesize":
            return self._synthesize(state, client)
        if kind == "direct":
            return self._direct(state, client)
        raise ValueError(f"unknown stage {stage!r}")

    def _start(self, state: dict[str, Any]) -> StageResult:
        opts = state["options"]
        if opts["complexity_gate"]:
            score = complexity_score(state["task"])
            if score < opts["min_complexity"]:
                return StageResult(state=state, next_stage="direct", events=[Event(
                    "complexity_gate",
                    f"Simple task (complexity {score} < {opts['min_complexity']}): "
                    "answering directly without a plan.", {"score": score})])
            return StageResult(state=state, next_stage="plan:1", events=[Event(
                "complexity_gate", f"Complexity {score} ≥ {opts['min_complexity']}: planning.",
                {"score": score})])
        return StageResult(state=state, next_stage="plan:1")

    def _planner_messages(self, state: dict[str, Any]) -> list[dict[str, str]]:
        opts = state["options"]
        parts = [_section(TASK, state["task"])]
        done = state["results"]
        plan = state["plan"]
        if done:
            parts.append(_section(COMPLETED, "\n\n".join(
                f"{i}. {r['description']}\nOutput: {r['output'][:1500]}" for i, r in
                enumerate(done, 1))))
        if state.get("failure"):
            f = state["failure"]
            parts.append(_section(FAILED, f"{f['description']}\nProblem: {f['problem']}"))
        if plan and state.get("feedback"):
            parts.append(_section(PREVIOUS_PLAN, _numbered(plan["steps"])))
        if state.get("feedback"):
            parts.append(_section(FEEDBACK, state["feedback"]))
        parts.append(_section(INSTRUCTION, "Write the remaining steps only."
                              if done or state.get("failure") else "Write the plan."))
        return [
            {"role": "system", "content": PLANNER_SYSTEM.format(max_steps=opts["max_steps"])},
            {"role": "user", "content": "\n".join(parts)},
        ]

    def _plan(self, version: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        reply = client.complete("planner", self._planner_messages(state), schema=PlanDraft)
        draft: PlanDraft = reply.data
        kept = [r["description"] for r in state["results"]]
        max_new = max(1, state["options"]["max_steps"] - len(kept))
        new_steps = [s[:MAX_STEP_CHARS] for s in draft.steps]
        events = []
        if len(new_steps) > max_new:
            events.append(Event("plan_trimmed", f"The planner proposed {len(new_steps)} steps; "
                                f"kept the first {max_new} (max steps {state['options']['max_steps']}).",
                                {"proposed": len(new_steps), "kept": max_new}))
            new_steps = new_steps[:max_new]
        if state.get("failure"):
            reason = f"Replanned after step {state['failure']['index'] + 1} failed"
        elif state.get("feedback"):
            reason = "Revised after feedback"
        else:
            reason = "First plan"
        plan: dict[str, Any] = {"version": version, "steps": kept + new_steps, "goal": draft.goal,
                "reasoning": draft.reasoning, "frozen": len(kept), "author": "model"}
        state = {**state, "plan": plan, "feedback": "", "failure": None}
        record = PlanProposed(version=version, steps=plan["steps"], goal=draft.goal,
                              reasoning=draft.reasoning, reason=reason, frozen=len(kept))
        events.append(Event("plan_proposed", f"{reason}: plan v{version} with "
                            f"{len(plan['steps'])} steps.", {"version": version}))
        if state["options"]["auto_approve"]:
            approval = GateDecided(PLAN_GATE, "auto_approve", version, author="auto-approve")
            events.append(Event("plan_decided", f"Plan v{version} approved automatically "
                                "(auto-approve was chosen at start).", {"version": version}))
            return StageResult(state=state, next_stage=f"step:{version}:{len(kept)}",
                               records=[record, approval], events=events)
        return StageResult(state=state, next_stage=f"step:{version}:{len(kept)}",
                           gate=Gate(PLAN_GATE, {"version": version}),
                           records=[record], events=events)

    def _step(self, version: int, index: int, state: dict[str, Any],
              client: ModelClient) -> StageResult:
        plan = state["plan"]
        description = plan["steps"][index]
        prior = "\n\n".join(f"### Step {i} — {r['description']}\n{r['output']}"
                            for i, r in enumerate(state["results"], 1)) or "(none yet)"
        messages = [
            {"role": "system", "content": EXECUTOR_SYSTEM},
            {"role": "user", "content": "\n".join([
                _section(TASK, state["task"]),
                _section(PLAN, _numbered(plan["steps"])),
                _section(EARLIER, prior),
                _section(CURRENT, f"{index + 1}. {description}"),
            ])},
        ]
        try:
            report: StepReport = client.complete("executor", messages, schema=StepReport).data
            succeeded, output, problem = report.succeeded, report.output, report.problem
        except ModelError as exc:
            succeeded, output, problem = False, "", f"the executor's model failed: {exc}"
        if succeeded:
            record = StepRecorded(version, index, description, "done", output=output)
            results = state["results"] + [{"index": index, "description": description,
                                           "output": output}]
            state = {**state, "results": results}
            nxt = f"step:{version}:{index + 1}" if index + 1 < len(plan["steps"]) else "synthesize"
            return StageResult(state=state, next_stage=nxt, records=[record], events=[Event(
                "step_completed", f"Step {index + 1} of {len(plan['steps'])} done: {description}",
                {"index": index, "version": version})])
        problem = problem or "the executor reported failure without a reason"
        record = StepRecorded(version, index, description, "failed", output=output, problem=problem)
        failed = Event("step_failed", f"Step {index + 1} failed: {problem}",
                       {"index": index, "version": version})
        if state["replans"] < state["options"]["max_replans"]:
            state = {**state, "replans": state["replans"] + 1,
                     "failure": {"index": index, "description": description, "problem": problem}}
            return StageResult(state=state, next_stage=f"plan:{version + 1}", records=[record],
                               events=[failed, Event("replanning", f"Replanning the remaining steps "
                                       f"({state['replans']} of {state['options']['max_replans']}).")])
        error = (f"Step {index + 1} ({description}) failed: {problem.rstrip('.')}. "
                 f"No replans left (max {state['options']['max_replans']}).")
        return StageResult(state=state, outcome="failed", error=error, records=[record],
                           events=[failed])

    def _synthesize(self, state: dict[str, Any], client: ModelClient) -> StageResult:
        outputs = "\n\n".join(f"### {r['description']}\n{r['output']}" for r in state["results"])
        messages = [
            {"role": "system", "content": SYNTHESIZER_SYSTEM},
            {"role": "user", "content": _section(TASK, state["task"]) + "\n"
             + _section(OUTPUTS, outputs)},
        ]
        answer = client.complete("synthesizer", messages).text
        return StageResult(state=state, outcome="completed", answer=answer,
                           events=[Event("answer", "The synthesizer wrote the answer.")])

    def _direct(self, state: dict[str, Any], client: ModelClient) -> StageResult:
        messages = [{"role": "system", "content": DIRECT_SYSTEM},
                    {"role": "user", "content": _section(TASK, state["task"])}]
        answer = client.complete("executor", messages).text
        return StageResult(state=state, outcome="completed", answer=answer,
                           events=[Event("answer", "Answered directly.")])

    # --- the plan gate --------------------------------------------------------------------
    def decide(self, gate: str, state: dict[str, Any], decision: Decision) -> StageResult:
        if gate != PLAN_GATE:
            raise InvalidDecision(f"this run has no {gate} gate")
        plan = state["plan"]
        version = plan["version"]
        if decision.action == "reject":
            feedback = check_text("Your feedback", decision.feedback.strip())
            if not feedback:
                raise InvalidDecision("Say what is wrong with the plan, so the planner can fix it.")
            state = {**state, "feedback": feedback}
            return StageResult(
                state=state, next_stage=f"plan:{version + 1}",
                records=[GateDecided(PLAN_GATE, "reject", version, feedback=feedback,
                                     author=decision.author)],
                events=[Event("plan_decided", f"{decision.author} rejected plan v{version}: "
                              f"{feedback}", {"version": version})])
        if decision.action != "approve":
            raise InvalidDecision(f"unknown action {decision.action!r}")
        records: list[Any] = []
        events: list[Event] = []
        if decision.edits is not None:  # None: approved as proposed (no editor, e.g. a script)
            steps = self.validate_edit(plan, decision.edits, state["options"]["max_steps"])
            if steps != plan["steps"]:
                version += 1
                plan = {**plan, "version": version, "steps": steps, "author": decision.author}
                records.append(PlanProposed(version=version, steps=steps, goal=plan["goal"],
                                            reasoning=plan["reasoning"], author=decision.author,
                                            reason="Edited by hand", frozen=plan["frozen"]))
                events.append(Event("plan_edited", f"{decision.author} edited the plan "
                                    f"(v{version}).", {"version": version}))
        records.append(GateDecided(PLAN_GATE, "approve", version, edited=bool(records),
                                   author=decision.author))
        how = "edited and approved" if events else "approved"
        events.append(Event("plan_decided", f"{decision.author} {how} plan v{version}.",
                            {"version": version}))
        state = {**state, "plan": plan}
        return StageResult(state=state, next_stage=f"step:{version}:{plan['frozen']}",
                           records=records, events=events)

    # --- forks: the plan at its gate can be edited (issue 33) ------------------------------
    def fork_edit(self, stage: str, gate: str, state: dict[str, Any]) -> ForkEdit | None:
        plan = state.get("plan")
        if gate != PLAN_GATE or not plan:
            return None
        max_steps = state["options"]["max_steps"]

        def apply(st: dict[str, Any], value: ForkPlan, author: str) -> tuple[dict[str, Any],
                                                                             list[Any]]:
            p = st["plan"]
            steps = self.validate_edit(p, value.steps, max_steps)
            if steps == p["steps"]:
                return st, []
            version = p["version"] + 1
            new = {**p, "version": version, "steps": steps, "author": author}
            return {**st, "plan": new}, [PlanProposed(
                version=version, steps=steps, goal=p["goal"], reasoning=p["reasoning"],
                author=author, reason="Edited when forking", frozen=p["frozen"])]

        return ForkEdit(ForkPlan, {"steps": list(plan["steps"])},
                        f"Plan v{plan['version']}: its steps, one per line", apply)

    @staticmethod
    def validate_edit(plan: dict[str, Any], edited: list[str], max_steps: int) -> list[str]:
        """Check a person's edited step list; the steps already executed cannot change."""
        if isinstance(edited, str) or not all(isinstance(s, str) for s in edited):
            raise InvalidDecision("The edited plan must be a list of steps.")
        steps = [s.strip() for s in edited]
        frozen = plan["steps"][: plan["frozen"]]
        if not any(steps[len(frozen):]):
            raise EmptyPlan(EMPTY_PLAN)
        if any(not s for s in steps):
            raise InvalidDecision("A step is empty: write it or delete it.")
        for n, s in enumerate(steps, 1):
            check_text(f"Step {n}", s)
        if steps[: len(frozen)] != frozen:
            raise InvalidDecision("Steps that were already carried out cannot be changed.")
        if len(steps) > max_steps:
            raise InvalidDecision(f"At most {max_steps} steps; this plan has {len(steps)}.")
        too_long = [(i + 1, len(s)) for i, s in enumerate(steps) if len(s) > MAX_STEP_CHARS]
        if too_long:
            n, size = too_long[0]
            raise InvalidDecision(f"Step {n} is {size:,} characters; the limit is "
                                  f"{MAX_STEP_CHARS:,}.")
        return steps



