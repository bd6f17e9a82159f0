"""Debate: two or more named positions argue for ``max_rounds`` rounds, then a judge writes
the conclusion.

In a round every position answers side by side: each sees the task, its own stance and the
transcript of the earlier rounds (not its opponents' arguments of the same round, which do
not exist yet when it speaks). A position whose call fails is recorded as silent for that
round and the debate goes on; a round in which nobody answers ends the run.

Stages: ``round:N`` and ``judge``. Arguments and the conclusion are ``Item`` records.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

from ..base import Event, Item, ModelClient, OfflineReply, Pattern, StageResult, parse_named_lines
from ..options import PatternOptions, named_lines, option
from ..parallel import run_parallel
from . import offline
from .prompts import debater_messages, judge_messages, transcript

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9 _-]{0,39}$")


class Conclusion(BaseModel):
    """The judge's conclusion."""

    conclusion: str = Field(description="The conclusion, in Markdown: what the debate "
                                        "established and what remains open.")
    favoured: str = Field(default="", description="The position with the stronger case, "
                                                  "or empty if none.")
    key_points: list[str] = Field(default_factory=list, description="The arguments that "
                                                                    "decided it.")


def parse_positions(text: str) -> list[dict[str, str]]:
    """Positions from lines of ``name: stance``; InvalidDecision (for the person) otherwise."""
    return parse_named_lines(
        text, key="stance", line_form="a position as “name: stance”", name_re=NAME,
        name_rule="a position's name has letters, digits, spaces, - or _ (at most 40 "
                  "characters)", max_text=1000, bounds=(2, 5),
        count_message="A debate needs 2 to 5 positions.")


DEFAULT_POSITIONS = [{"name": "For", "stance": "Argue in favour of the proposal."},
                     {"name": "Against", "stance": "Argue against the proposal."}]


class DebateOptions(PatternOptions):
    max_rounds: int = option(2, label="Rounds", ge=1, le=5, help="rounds of arguments")
    positions: Annotated[list[dict[str, str]], BeforeValidator(named_lines(parse_positions))] = \
        option(DEFAULT_POSITIONS, label="Positions", widget="textarea", max_chars=6000,
               help="One per line, “name: stance”; 2 to 5 positions.",
               placeholder="For: argue in favour\nAgainst: argue against")
    timeout: float = option(180.0, label="Seconds per round", hidden=True)


class Debate(Pattern):
    name = "debate"
    label = "Debate"
    purpose = "For a choice with sides: each position is argued, then a judge concludes."
    summary = ("Debaters argue the positions you set, round by round, each answering the "
               "others; a judge weighs the arguments and writes the conclusion.")
    stage_labels = {"round": "Round {0}", "judge": "Judge's conclusion"}
    stage_lines = {"round": "Round {0}: every position is making its case.",
                   "judge": "The judge is weighing the debate."}
    roles = ("debater", "judge")
    options = DebateOptions
    live_events = {"round_finished": ("items-panel",), "argument_failed": ("items-panel",),
                   "concluded": ("items-panel",)}

    def offline_replies(self) -> list[OfflineReply]:
        return [(None, "debater", offline.debater), ("Conclusion", "judge", offline.judge)]

    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = self.check_options(options)
        return {"task": task, "options": opts, "arguments": []}

    def first_stage(self, state: dict[str, Any]) -> str:
        return "round:1"

    def status_for(self, stage: str) -> str:
        return "executing" if stage.startswith("round") else "synthesizing"

    def run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        if stage == "judge":
            return self._judge(state, client)
        kind, n = stage.split(":")
        if kind == "round":
            return self._round(int(n), state, client)
        raise ValueError(f"unknown stage {stage!r}")

    def _round(self, n: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        opts = state["options"]
        earlier = transcript(state["arguments"])

        def argue(position: dict[str, str]) -> str:
            messages = debater_messages(state["task"], position, n, opts["max_rounds"], earlier)
            return client.complete("debater", messages, key=f"{position['name']}").text.strip()

        jobs = {p["name"]: (lambda p=p: argue(p)) for p in opts["positions"]}
        outcomes = run_parallel(jobs, float(opts["timeout"]), len(jobs))
        new, records, events = [], [], []
        for p in opts["positions"]:
            out = outcomes[p["name"]]
            arg = {"round": n, "position": p["name"], "text": out.value or "",
                   "error": out.error, "seconds": round(out.seconds, 2)}
            new.append(arg)
            records.append(Item("argument", f"{n}:{p['name']}", arg))
            if out.error:
                events.append(Event("argument_failed", f"Round {n}: {p['name']} did not "
                                    f"answer ({out.error[:200]}).", {"round": n}))
        state = {**state, "arguments": state["arguments"] + new}
        if all(a["error"] for a in new):
            reasons = "; ".join(f"{a['position']}: {a['error'][:200]}" for a in new)
            return StageResult(state=state, outcome="failed", records=records, events=events,
                               error=f"Round {n}: no position answered ({reasons}).")
        events.append(Event("round_finished", f"Round {n} of {opts['max_rounds']}: "
                            f"{sum(not a['error'] for a in new)} of {len(new)} positions "
                            "argued.", {"round": n}))
        nxt = f"round:{n + 1}" if n < int(opts["max_rounds"]) else "judge"
        return StageResult(state=state, next_stage=nxt, records=records, events=events)

    def _judge(self, state: dict[str, Any], client: ModelClient) -> StageResult:
        messages = judge_messages(state["task"], state["options"]["positions"], state["arguments"])
        result: Conclusion = client.complete("judge", messages, schema=Conclusion).data
        data = result.model_dump()
        names = {p["name"] for p in state["options"]["positions"]}
        if data["favoured"] and data["favoured"] not in names:
            data["favoured"] = ""  # a name the judge made up is no verdict
        return StageResult(state={**state, "conclusion": data}, outcome="completed",
                           answer=result.conclusion, records=[Item("conclusion", "judge", data)],
                           events=[Event("concluded", "The judge concluded"
                                         + (f", favouring {data['favoured']}." if data["favoured"]
                                            else " without favouring a position."))])

