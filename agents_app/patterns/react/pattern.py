"""ReAct: think → act → observe, one iteration per stage, until the model gives its final
answer or a limit or a loop forces one.

Limits (defaults from the seed): ``max_iterations`` 10, ``max_tool_calls`` 20,
``max_seconds`` 300 of working time, ``step_timeout`` 60 s per tool call.

Loop detection, checked before a proposed tool call runs; each forces the final answer with
its reason recorded:
  * *same action three times*: the last three calls, this one included, use the same tool;
  * *A-B-A alternation*: this call repeats, exactly, the call before the previous one;
  * *same tool, same input*: this call repeats, exactly, any earlier call.

A tool that needs a person's approval stops the run at the ``tool_approval`` gate (approve,
approve with edited arguments, or reject with a reason the agent reads); ``ask_person`` stops
it at the ``ask_person`` gate until the person answers.

Stages: ``step:N`` (think, and act unless a gate is needed), ``act:N`` (run an approved call),
``final`` (the forced final answer). Each iteration is an ``Item("step", N)``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from .. import safe_json
from ..base import (
    Decision,
    Event,
    ForkEdit,
    Gate,
    InvalidDecision,
    Item,
    ModelClient,
    OfflineReply,
    Pattern,
    StageResult,
)
from ..gate_input import check_arguments, check_text
from ..options import PatternOptions, option
from ..tools.toolbox import (
    ASK_PERSON,
    PERSON,
    TOOL_NAMES,
    AgentTool,
    ApprovableTool,
    ToolName,
    check_args,
    describe,
    registry,
    run_tool,
)
from . import offline
from .prompts import agent_messages, final_messages, person_answered

APPROVAL_GATE = "tool_approval"
ASK_GATE = "ask_person"


class Action(BaseModel):
    type: Literal["tool_call", "final_answer"]
    tool: str = Field(default="", description="For a tool call: the tool's name.")
    input: dict[str, Any] = Field(default_factory=dict, description="For a tool call: its "
                                  "arguments.")
    answer: str = Field(default="", description="For the final answer: the answer, Markdown.")


class Thought(BaseModel):
    """One ReAct iteration."""

    thought: str = Field(description="What you know so far and why you take this action.")
    action: Action


class ForkToolCall(BaseModel):
    """A fork's edit of the call waiting at the approval gate."""

    arguments: dict[str, Any] = Field(default_factory=dict, description="The call's "
                                      "arguments, a JSON object.")


class FinalAnswer(BaseModel):
    answer: str = Field(description="The best answer from what was found, in Markdown; say "
                                    "what is uncertain or missing.")


def _signature(tool: str, args: dict[str, Any]) -> str:
    return json.dumps([tool, args], sort_keys=True, default=str)


def detect_loop(history: list[dict[str, Any]], tool: str, args: dict[str, Any]) -> str:
    """The loop a proposed call would make, or "" (see the module docstring)."""
    calls = [h for h in history if h.get("tool")]
    sig = _signature(tool, args)
    tools = [c["tool"] for c in calls[-2:]] + [tool]
    if len(tools) == 3 and len(set(tools)) == 1:
        return f"the same action three times in a row ({tool})"
    if len(calls) >= 2 and _signature(calls[-2]["tool"], calls[-2]["input"]) == sig \
            and _signature(calls[-1]["tool"], calls[-1]["input"]) != sig:
        return f"an A-B-A alternation ({calls[-2]['tool']}, {calls[-1]['tool']}, {tool})"
    if any(_signature(c["tool"], c["input"]) == sig for c in calls):
        return f"the same tool with the same input twice ({tool})"
    return ""


class ReActOptions(PatternOptions):
    max_iterations: int = option(10, label="Max iterations", ge=1, le=30,
                                 help="most think-act-observe iterations")
    max_tool_calls: int = option(20, label="Max tool calls", ge=1, le=50,
                                 help="most tool calls")
    tools: list[ToolName] = option([], label="Tools", help="None ticked: all of them.")
    approval: list[ApprovableTool] = option(
        [], label="Ask me before running", web_only=True,
        help="the run waits for you at each call of these (ask person always does)")
    repo_roots: list[str] = option([], label="Repository roots", hidden=True,
                                   setting="QUORUM_REPO_ROOTS")
    max_seconds: float = option(300.0, label="Seconds in all", hidden=True)
    step_timeout: float = option(60.0, label="Seconds per tool call", hidden=True)

    @field_validator("tools")
    @classmethod
    def _headless_tools(cls, tools: list[str], info: ValidationInfo) -> list[str]:
        if (info.context or {}).get("headless"):
            if ASK_PERSON in tools:
                raise ValueError("ask_person needs the web page to answer; leave it out on "
                                 "the command line.")
            # No one can answer a question at a terminal: all tools but that one.
            return tools or [n for n in TOOL_NAMES if n != ASK_PERSON]
        return tools

    @model_validator(mode="before")
    @classmethod
    def _tools_checked_headless(cls, data: Any, info: ValidationInfo) -> Any:
        # A field validator runs on a value given, not on the default: from the command line,
        # "no tools ticked" must also reach _headless_tools.
        if (info.context or {}).get("headless") and isinstance(data, dict) \
                and not data.get("tools"):
            data = {**data, "tools": []}
        return data


class ReAct(Pattern):
    name = "react"
    label = "ReAct (think, act, observe)"
    purpose = "For questions that need tools, one step at a time, with you approving calls."
    summary = ("An agent thinks, calls a tool, reads the result and repeats until it can "
               "answer; a tool call can wait for your approval, and the agent can ask you.")
    stage_labels = {"step": "Iteration {0}", "act": "Iteration {0}: tool call",
                    "final": "Final answer"}
    stage_lines = {"step": "Iteration {0}: thinking.",
                   "act": "Iteration {0}: running the approved tool call.",
                   "final": "Writing the final answer."}
    gate_lines = {APPROVAL_GATE: "Waiting for you: approve, edit or reject the tool call.",
                  ASK_GATE: "Waiting for you: the agent asked you a question."}
    status_lines = {"executing": "The agent goes on: it thinks, then acts.",
                    "synthesizing": "The agent is writing its final answer."}
    roles = ("agent",)
    gates = (APPROVAL_GATE, ASK_GATE)
    options = ReActOptions
    live_events = {"tool_observed": ("items-panel",), "tool_gate": ("items-panel",),
                   "tool_decided": ("items-panel",), "loop_stopped": ("items-panel",),
                   "final_answer": ("items-panel", "answer-panel")}

    def offline_replies(self) -> list[OfflineReply]:
        return [("Thought", "agent", offline.thought), ("FinalAnswer", "agent", offline.final)]

    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = self.check_options(options)
        return {"task": task, "options": opts, "history": [], "tool_calls": 0,
                "seconds": 0.0, "pending": None, "stop_reason": ""}

    def first_stage(self, state: dict[str, Any]) -> str:
        return "step:1"

    def status_for(self, stage: str) -> str:
        return "synthesizing" if stage == "final" else "executing"

    def tools(self, state: dict[str, Any]) -> dict[str, AgentTool]:
        opts = state["options"]
        every = registry(opts["repo_roots"])
        chosen = opts["tools"] or list(every)
        return {n: every[n] for n in chosen if n in every}

    # --- stages ---------------------------------------------------------------------------
    def run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        if stage == "final":
            return self._final(state, client)
        kind, n = stage.split(":")
        if kind == "step":
            return self._step(int(n), state, client)
        if kind == "act":
            return self._act(int(n), state)
        raise ValueError(f"unknown stage {stage!r}")

    def _messages(self, state: dict[str, Any], tools: dict[str, AgentTool]) -> list[dict[str, str]]:
        return agent_messages(state["task"], state["history"], describe(tools))

    def _limit_reason(self, n: int, state: dict[str, Any]) -> str:
        opts = state["options"]
        if n > int(opts["max_iterations"]):
            return f"the iteration limit ({opts['max_iterations']}) was reached"
        if state["tool_calls"] >= int(opts["max_tool_calls"]):
            return f"the tool-call limit ({opts['max_tool_calls']}) was reached"
        if state["seconds"] >= float(opts["max_seconds"]):
            return f"the time limit ({float(opts['max_seconds']):g} s) was reached"
        return ""

    def _force(self, state: dict[str, Any], reason: str, events: list[Event] | None = None,
               records: list[Any] | None = None) -> StageResult:
        state = {**state, "stop_reason": reason}
        return StageResult(state=state, next_stage="final", records=records or [],
                           events=(events or []) + [Event("loop_stopped", f"Stopping: {reason}; "
                                                          "asking for the final answer.",
                                                          {"reason": reason})])

    def _step(self, n: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        if reason := self._limit_reason(n, state):
            return self._force(state, reason)
        tools = self.tools(state)
        started = time.monotonic()
        thought: Thought = client.complete("agent", self._messages(state, tools),
                                           schema=Thought).data
        action = thought.action
        if action.type == "final_answer":
            answer = action.answer.strip() or thought.thought
            record = Item("step", str(n), {"iteration": n, "thought": thought.thought,
                                           "final": True, "answer": answer})
            return StageResult(state={**state, "stop_reason": "answered"}, outcome="completed",
                               answer=answer, records=[record], events=[Event(
                                   "final_answer", f"Iteration {n}: final answer.",
                                   {"iteration": n})])
        if loop := detect_loop(state["history"], action.tool, action.input):
            record = Item("step", str(n), {"iteration": n, "thought": thought.thought,
                                           "tool": action.tool, "input": action.input,
                                           "skipped": f"not run: {loop}"})
            return self._force(state, f"loop detected: {loop}", records=[record])
        tool = tools.get(action.tool)
        pending = {"iteration": n, "thought": thought.thought, "tool": action.tool,
                   "input": action.input}
        if tool is not None and (tool.kind == PERSON or tool.needs_approval
                                 or tool.name in state["options"]["approval"]):
            gate = ASK_GATE if tool.kind == PERSON else APPROVAL_GATE
            state = {**state, "pending": pending,
                     "seconds": state["seconds"] + time.monotonic() - started}
            what = (f"asks you: {action.input.get('question', '')[:200]}" if gate == ASK_GATE
                    else f"wants to call {action.tool}")
            end = "" if what.endswith(("?", ".", "!")) else "."
            return StageResult(state=state, next_stage=f"act:{n}", gate=Gate(gate, pending),
                               events=[Event("tool_gate", f"Iteration {n}: the agent {what}{end}",
                                             {"iteration": n, "tool": action.tool})])
        return self._observe(n, state, pending, started)

    def _observe(self, n: int, state: dict[str, Any], call: dict[str, Any], started: float, *,
                 approved_by: str = "") -> StageResult:
        timeout = float(state["options"]["step_timeout"])
        ok, observation, seconds = run_tool(self.tools(state), call["tool"], call["input"],
                                            timeout=timeout)
        entry = {**call, "ok": ok, "observation": observation, "seconds": round(seconds, 3)}
        if approved_by:
            entry["approved_by"] = approved_by
        state = {**state, "history": state["history"] + [entry], "pending": None,
                 "tool_calls": state["tool_calls"] + 1,
                 "seconds": state["seconds"] + time.monotonic() - started}
        return StageResult(state=state, next_stage=f"step:{n + 1}",
                           records=[Item("step", str(n), {"iteration": n, **entry})],
                           events=[Event("tool_observed", f"Iteration {n}: {call['tool']} "
                                         f"{'returned' if ok else 'failed'} "
                                         f"({seconds:.2f} s).", {"iteration": n})])

    def _act(self, n: int, state: dict[str, Any]) -> StageResult:
        call = state["pending"]
        return self._observe(n, state, {k: call[k] for k in ("iteration", "thought", "tool",
                                                             "input")},
                             time.monotonic(), approved_by=call.get("approved_by", ""))

    def _final(self, state: dict[str, Any], client: ModelClient) -> StageResult:
        messages = final_messages(state["task"], state["history"],
                                  describe(self.tools(state)), state["stop_reason"])
        final: FinalAnswer = client.complete("agent", messages, schema=FinalAnswer,
                                             key="final").data
        return StageResult(state=state, outcome="completed", answer=final.answer,
                           records=[Item("final", "forced", {"reason": state["stop_reason"],
                                                             "answer": final.answer})],
                           events=[Event("final_answer", "Final answer written "
                                         f"({state['stop_reason']}).")])

    # --- the gates --------------------------------------------------------------------------
    def decide(self, gate: str, state: dict[str, Any], decision: Decision) -> StageResult:
        pending = state.get("pending")
        if not pending or gate not in (APPROVAL_GATE, ASK_GATE):
            raise InvalidDecision(f"this run is not waiting at {gate}")
        n = pending["iteration"]
        who = decision.author
        if gate == ASK_GATE:
            answer = check_text("Your answer", decision.feedback.strip())
            if not answer:
                raise InvalidDecision("Write your answer to the agent's question.")
            entry = {**pending, "ok": True, "observation": person_answered(who, answer),
                     "seconds": 0.0, "answered_by": who}
            return self._after_person(n, state, entry, f"{who} answered the agent.")
        if decision.action == "reject":
            reason = check_text("Your reason", decision.feedback.strip())
            if not reason:
                raise InvalidDecision("Say why, so the agent can choose another way.")
            entry = {**pending, "ok": False, "observation": f"{who} rejected this call: "
                     f"{reason}", "seconds": 0.0, "rejected_by": who}
            return self._after_person(n, state, entry, f"{who} rejected the call: {reason}")
        if decision.action != "approve":
            raise InvalidDecision(f"unknown action {decision.action!r}")
        call = dict(pending)
        if decision.edits is not None:  # None: approved as proposed (e.g. from a script)
            call["input"] = self.edited_arguments(state, pending, decision.edits)
        call["approved_by"] = who
        edited = call["input"] != pending["input"]
        return StageResult(state={**state, "pending": call}, next_stage=f"act:{n}",
                           events=[Event("tool_decided", f"{who} approved the call"
                                         + (" with edited arguments." if edited else "."),
                                         {"iteration": n})])

    def edited_arguments(self, state: dict[str, Any], pending: dict[str, Any],
                         edits: Any) -> Any:
        """A person's arguments for the pending call, checked like the agent's (the tool's
        schema) and for what a person may type; InvalidDecision saying what is wrong."""
        tool = self.tools(state).get(pending["tool"])
        try:
            args = safe_json.loads(edits) if isinstance(edits, str) else edits
            check_arguments(args)
            parsed = check_args(tool, args) if tool else None
        except InvalidDecision:
            raise
        except RecursionError:
            raise InvalidDecision("The edited arguments are nested too deeply.") from None
        except (ValueError, TypeError) as exc:
            raise InvalidDecision(f"The edited arguments are not valid: {exc}") from None
        except Exception as exc:  # ToolError: the schema refused them
            raise InvalidDecision(str(exc)) from None
        if parsed is None:  # a tool this run no longer offers: the call fails as proposed
            return pending["input"]
        return parsed.model_dump(exclude_unset=True) or args

    # --- forks (issue 33): the arguments of the call waiting for approval -------------------
    def decided_on(self, gate: str, state: dict[str, Any]) -> Any:
        """The call waiting and the iterations that led to it, without their timings (the
        working seconds, each tool's latency), which differ between two runs of the same
        calls: a replay reuses the person's decision on the same call."""
        return {"task": state["task"], "options": state["options"],
                "pending": state.get("pending"), "tool_calls": state["tool_calls"],
                "history": [{k: v for k, v in h.items() if k != "seconds"}
                            for h in state["history"]]}

    def fork_edit(self, stage: str, gate: str, state: dict[str, Any]) -> ForkEdit | None:
        pending = state.get("pending")
        if gate != APPROVAL_GATE or not pending:
            return None

        def apply(st: dict[str, Any], value: ForkToolCall, author: str) -> tuple[
                dict[str, Any], list[Any]]:
            call = st["pending"]
            args = self.edited_arguments(st, call, value.arguments)
            if args == call["input"]:
                return st, []
            return {**st, "pending": {**call, "input": args, "edited_by": author}}, []

        return ForkEdit(ForkToolCall, {"arguments": pending["input"]},
                        f"Iteration {pending['iteration']}: the arguments of the "
                        f"{pending['tool']} call", apply)

    def _after_person(self, n: int, state: dict[str, Any], entry: dict[str, Any],
                      message: str) -> StageResult:
        state = {**state, "history": state["history"] + [entry], "pending": None}
        return StageResult(state=state, next_stage=f"step:{n + 1}",
                           records=[Item("step", str(n), {"iteration": n, **entry})],
                           events=[Event("tool_decided", message, {"iteration": n})])

