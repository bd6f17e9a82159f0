"""An agent that uses tools: think, call one tool, read what it returned, repeat; then give
a structured answer. Plain Python; the model is any ``ModelClient``.

Each turn is one model call answering ``AgentTurn`` (a thought and either one tool call or
"done"). Turn keys are ``<prefix>:<n>`` and the answer's is ``<prefix>:answer``, so a stage
executed again replays the same calls from the engine's journal; the caller makes the tools'
effects repeatable (e.g. by resetting a worktree to the stage's starting commit).

The loop ends when the model says it is done, when it has used ``max_turns``, or when it
repeats itself (the same call three times in a row): then it is told to answer with what
it has, and the reason is kept in the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic

from pydantic import BaseModel, Field

from .base import ModelClient, Schema

MAX_OBSERVATION_IN_TRACE = 2000


class ToolCall(BaseModel):
    tool: str = Field(description="Name of the tool to call.")
    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")


class AgentTurn(BaseModel):
    """One step of a tool-using agent."""

    thought: str = Field(default="", description="What you know and what you do next, briefly.")
    action: ToolCall | None = Field(default=None, description="The one tool to call now; "
                                    "null when you are done.")
    done: bool = Field(default=False, description="True when you need no more tools.")


@dataclass
class TraceEntry:
    turn: int
    thought: str
    tool: str | None
    args: dict[str, Any]
    ok: bool
    observation: str


@dataclass
class AgentResult(Generic[Schema]):
    answer: Schema
    trace: list[TraceEntry] = field(default_factory=list)
    stopped: str = "done"  # done | max_turns | repeating

    def trace_dicts(self) -> list[dict[str, Any]]:
        return [e.__dict__.copy() for e in self.trace]


ToolRunner = Callable[[str, dict[str, Any]], tuple[bool, str]]

LOOP_RULES = """You work in turns. In each turn answer with a short `thought` and either one
tool call in `action` (`tool` and `args`) or `done: true` when you have what you need.
After each call you get the tool's output as an observation. Tool errors are observations
too: read them and adjust. You have at most {max_turns} turns.

Tools:
{catalogue}"""


def run_agent(client: ModelClient, role: str, *, system: str, task: str, catalogue: str,
              run_tool: ToolRunner, answer_schema: type[Schema], answer_instruction: str,
              key: str, max_turns: int = 12) -> AgentResult[Schema]:
    """Run the tool loop for ``role`` and return its structured answer and its trace."""
    messages = [
        {"role": "system", "content": system + "\n\n" +
         LOOP_RULES.format(max_turns=max_turns, catalogue=catalogue)},
        {"role": "user", "content": task},
    ]
    trace: list[TraceEntry] = []
    stopped = "max_turns"
    recent: list[str] = []
    for n in range(1, max_turns + 1):
        turn: AgentTurn = client.complete(role, messages, schema=AgentTurn,
                                          key=f"{key}:{n}").data
        if turn.done or turn.action is None:
            stopped = "done"
            break
        call = turn.action
        ok, observation = run_tool(call.tool, call.args)
        trace.append(TraceEntry(n, turn.thought, call.tool, call.args, ok,
                                observation[:MAX_OBSERVATION_IN_TRACE]))
        messages.append({"role": "assistant", "content": turn.model_dump_json()})
        messages.append({"role": "user", "content": f"## Observation ({call.tool}, "
                         f"{'ok' if ok else 'error'})\n{observation}"})
        recent.append(json.dumps([call.tool, call.args], sort_keys=True, default=str))
        if len(recent) >= 3 and len(set(recent[-3:])) == 1:
            stopped = "repeating"
            break
    why = {"done": "", "max_turns": "You have used all your turns. ",
           "repeating": "You called the same tool with the same arguments three times; stop "
                        "calling tools. "}[stopped]
    messages.append({"role": "user", "content": why + answer_instruction})
    answer = client.complete(role, messages, schema=answer_schema, key=f"{key}:answer").data
    return AgentResult(answer=answer, trace=trace, stopped=stopped)
