"""ReWOO: plan the tool calls first, run them side by side, then answer from the evidence.

  * ``sketch``: the planner decides whether tools are needed and writes at most
    ``top_k_sketches`` tool calls (none when the task needs no tool).
  * ``work``: the calls run concurrently, at most ``max_parallel_work`` at a time, each with
    ``per_work_timeout``; each piece of evidence records its tool, input, output or error and
    latency.
  * ``organize:K``: the answer, only from the evidence, citing evidence ids like [E1], saying
    when the evidence is insufficient, with a confidence.
  * ``verify:K``: up to ``max_verify_passes`` checks of the answer against the evidence; a
    failed check sends it back to organize with the problems found.

Defaults from the seed: 4 sketches, 4 parallel, 25 s per tool, 1 verify pass. Tools that need
a person (approval, ``ask_person``) are not offered here: the plan runs without stopping.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from ..base import (
    Event,
    ForkEdit,
    InvalidDecision,
    Item,
    ItemEdited,
    ModelClient,
    OfflineReply,
    Pattern,
    StageResult,
)
from ..gate_input import check_arguments, check_field
from ..options import PatternOptions, option
from ..parallel import run_parallel
from ..tools.toolbox import (
    ASK_PERSON,
    PERSON,
    AgentTool,
    UnattendedTool,
    check_args,
    describe,
    registry,
    run_tool,
)
from . import offline
from .prompts import CITATION, organize_messages, sketch_messages, verify_messages


class SketchCall(BaseModel):
    query: str = Field(description="The question this call answers.")
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Sketch(BaseModel):
    """The planner's answer."""

    needs_tools: bool = Field(description="False when the task can be answered without tools.")
    reasoning: str = Field(default="", description="Why these calls, briefly.")
    sketches: list[SketchCall] = Field(default_factory=list)


class ForkSketches(BaseModel):
    """A fork's edit of the planned tool calls, before they run."""

    sketches: list[SketchCall] = Field(default_factory=list)


MAX_QUERY_CHARS = 1000


class Organized(BaseModel):
    answer: str = Field(description="The answer in Markdown, citing evidence as [E1], [E2].")
    citations: list[str] = Field(default_factory=list, description="Evidence ids used.")
    confidence: float = Field(ge=0, le=1, description="0 to 1.")
    insufficient: bool = Field(default=False, description="True if the evidence does not "
                                                          "answer the task.")


class Verification(BaseModel):
    supported: bool = Field(description="True if every claim is backed by the cited evidence.")
    problems: list[str] = Field(default_factory=list)


class ReWOOOptions(PatternOptions):
    top_k_sketches: int = option(4, label="Max tool calls planned", ge=1, le=10,
                                 help="most tool calls in the plan")
    max_parallel_work: int = option(4, label="Calls at once", ge=1, le=10,
                                    help="tool calls run at once")
    max_verify_passes: int = option(1, label="Verify passes", ge=0, le=3,
                                    help="checks of the answer against the evidence")
    # Not ask_person: the form does not offer it (the choices come from this type), and the
    # validator below says why to anyone who sends it all the same (the command line).
    tools: list[UnattendedTool] = option([], label="Tools", help="None ticked: all of them.")
    repo_roots: list[str] = option([], label="Repository roots", hidden=True,
                                   setting="QUORUM_REPO_ROOTS")
    per_work_timeout: float = option(25.0, label="Seconds per tool call", hidden=True)

    @field_validator("tools", mode="before")
    @classmethod
    def _no_person(cls, tools: Any, info: ValidationInfo) -> Any:
        if isinstance(tools, list) and ASK_PERSON in tools:
            raise ValueError("ReWOO plans all its calls before any runs, so it cannot stop to "
                             "ask a person: leave out “ask person”.")
        return tools


class ReWOO(Pattern):
    name = "rewoo"
    label = "ReWOO (plan, work in parallel, organize)"
    purpose = "For questions answered from tools (arithmetic, time, files) in one planned pass."
    summary = ("A planner decides every tool call up front; the calls run side by side; an "
               "organizer writes the answer from their evidence, which a check holds it to.")
    stage_labels = {"sketch": "Planning the tool calls", "work": "Running the tool calls",
                    "organize": "Answer, draft {0}", "verify": "Checking draft {0}"}
    stage_lines = {"sketch": "The planner is deciding which tool calls to make.",
                   "work": "Running the planned tool calls side by side.",
                   "organize": "Writing the answer from the evidence.",
                   "verify": "Checking the answer against the evidence."}
    roles = ("planner", "organizer")
    options = ReWOOOptions
    live_events = {"sketched": ("items-panel",), "sketches_trimmed": ("items-panel",),
                   "evidence": ("items-panel",), "organized": ("items-panel",),
                   "verified": ("items-panel",)}

    def offline_replies(self) -> list[OfflineReply]:
        return [("Sketch", None, offline.sketch), ("Organized", None, offline.organize),
                ("Verification", None, offline.verify)]

    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = self.check_options(options)
        return {"task": task, "options": opts, "sketches": [], "evidence": [],
                "organized": None, "problems": []}

    def first_stage(self, state: dict[str, Any]) -> str:
        return "sketch"

    def status_for(self, stage: str) -> str:
        return {"sketch": "planning", "work": "executing"}.get(stage.split(":")[0],
                                                               "synthesizing")

    def tools(self, state: dict[str, Any]) -> dict[str, AgentTool]:
        opts = state["options"]
        every = {n: t for n, t in registry(opts["repo_roots"]).items() if t.kind != PERSON}
        chosen = opts["tools"] or list(every)
        return {n: every[n] for n in chosen if n in every}

    def run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        kind, _, arg = stage.partition(":")
        if kind == "sketch":
            return self._sketch(state, client)
        if kind == "work":
            return self._work(state)
        if kind == "organize":
            return self._organize(int(arg), state, client)
        if kind == "verify":
            return self._verify(int(arg), state, client)
        raise ValueError(f"unknown stage {stage!r}")

    def _sketch(self, state: dict[str, Any], client: ModelClient) -> StageResult:
        opts = state["options"]
        top_k = int(opts["top_k_sketches"])
        messages = sketch_messages(state["task"], top_k, describe(self.tools(state)))
        sketch: Sketch = client.complete("planner", messages, schema=Sketch).data
        calls = sketch.sketches if sketch.needs_tools else []
        events = []
        if len(calls) > top_k:
            events.append(Event("sketches_trimmed", f"The planner wrote {len(calls)} calls; "
                                f"kept the first {top_k}.", {"proposed": len(calls)}))
            calls = calls[:top_k]
        sketches = [{"id": f"S{i}", **c.model_dump()} for i, c in enumerate(calls, 1)]
        state = {**state, "sketches": sketches, "reasoning": sketch.reasoning}
        records = [Item("sketch", s["id"], s) for s in sketches]
        events.append(Event("sketched", f"{len(sketches)} tool call(s) planned." if sketches
                            else "No tool is needed: answering directly.",
                            {"count": len(sketches)}))
        return StageResult(state=state, next_stage="work" if sketches else "organize:1",
                           records=records, events=events)

    def _work(self, state: dict[str, Any]) -> StageResult:
        opts = state["options"]
        tools = self.tools(state)
        timeout = float(opts["per_work_timeout"])
        jobs = {s["id"]: (lambda s=s: run_tool(tools, s["tool"], s["arguments"],
                                               timeout=timeout))
                for s in state["sketches"]}
        outcomes = run_parallel(jobs, timeout + 5, int(opts["max_parallel_work"]))
        evidence, records = [], []
        for i, s in enumerate(state["sketches"], 1):
            out = outcomes[s["id"]]
            if out.value is not None:
                ok, text, seconds = out.value
            else:
                ok, text, seconds = False, out.error or "no result", out.seconds
            e = {"id": f"E{i}", "sketch": s["id"], "query": s["query"], "tool": s["tool"],
                 "input": s["arguments"], "ok": ok, "output": text if ok else "",
                 "error": "" if ok else text, "latency_ms": int(seconds * 1000)}
            evidence.append(e)
            records.append(Item("evidence", e["id"], e))
        failed = sum(not e["ok"] for e in evidence)
        return StageResult(state={**state, "evidence": evidence}, next_stage="organize:1",
                           records=records, events=[Event(
                               "evidence", f"{len(evidence)} piece(s) of evidence, {failed} "
                               "failed.", {"failed": failed})])

    def _organize(self, k: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        messages = organize_messages(state["task"], state["evidence"], state["problems"])
        org: Organized = client.complete("organizer", messages, schema=Organized,
                                         key=f"organize{k}").data
        known = {e["id"] for e in state["evidence"]}
        cited = sorted(set(CITATION.findall(org.answer)) | set(org.citations),
                       key=lambda c: int(c[1:]))
        unknown = [c for c in cited if c not in known]
        data = {**org.model_dump(), "citations": [c for c in cited if c in known],
                "unknown_citations": unknown, "pass": k}
        state = {**state, "organized": data}
        record = Item("answer", str(k), data)
        passes = int(state["options"]["max_verify_passes"])
        if k <= passes and state["evidence"]:
            return StageResult(state=state, next_stage=f"verify:{k}", records=[record],
                               events=[Event("organized", f"Answer {k} written (confidence "
                                             f"{org.confidence:.2f}, {len(data['citations'])} "
                                             "citations).", {"pass": k})])
        return StageResult(state=state, outcome="completed", answer=org.answer,
                           records=[record], events=[Event(
                               "organized", f"Answer written (confidence {org.confidence:.2f})"
                               + (", evidence insufficient" if org.insufficient else "") + ".",
                               {"pass": k})])

    def _verify(self, k: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        org = state["organized"]
        messages = verify_messages(state["task"], state["evidence"], org["answer"])
        v: Verification = client.complete("organizer", messages, schema=Verification,
                                          key=f"verify{k}").data
        problems = list(v.problems)
        if org["unknown_citations"]:
            problems.append(f"Cites evidence that does not exist: {', '.join(org['unknown_citations'])}.")
        supported = v.supported and not org["unknown_citations"]
        record = Item("verification", str(k), {"pass": k, "supported": supported,
                                               "problems": problems})
        if supported:
            return StageResult(state=state, outcome="completed", answer=org["answer"],
                               records=[record], events=[Event(
                                   "verified", f"Verification {k}: the answer is supported "
                                   "by its evidence.", {"pass": k})])
        return StageResult(state={**state, "problems": problems},
                           next_stage=f"organize:{k + 1}", records=[record],
                           events=[Event("verified", f"Verification {k} failed "
                                         f"({len(problems)} problem(s)); organizing again.",
                                         {"pass": k, "supported": False})])


    # --- forks (issue 33): the planned tool calls, before they run ---------------------------
    def fork_edit(self, stage: str, gate: str, state: dict[str, Any]) -> ForkEdit | None:
        if stage != "work" or not state.get("sketches"):
            return None
        value = {"sketches": [{"query": s["query"], "tool": s["tool"],
                               "arguments": s["arguments"]} for s in state["sketches"]]}

        def apply(st: dict[str, Any], edit: ForkSketches, author: str) -> tuple[
                dict[str, Any], list[Any]]:
            sketches = self.edited_sketches(st, edit)
            if sketches == st["sketches"]:
                return st, []
            records: list[Any] = [ItemEdited("sketch", s["id"], {**s, "edited_by": author})
                                  for s in sketches]
            records += [ItemEdited("sketch", s["id"], None)
                        for s in st["sketches"][len(sketches):]]
            return {**st, "sketches": sketches}, records

        return ForkEdit(ForkSketches, value, "The planned tool calls", apply)

    def edited_sketches(self, state: dict[str, Any], edit: ForkSketches) -> list[dict[str, Any]]:
        """A person's plan of tool calls, checked like the planner's (at most
        ``top_k_sketches``, tools this run offers, arguments its schema takes)."""
        top_k = int(state["options"]["top_k_sketches"])
        tools = self.tools(state)
        if not edit.sketches:
            raise InvalidDecision("The plan has no tool calls: keep at least one (fork from "
                                  "the start for an answer without tools).")
        if len(edit.sketches) > top_k:
            raise InvalidDecision(f"The plan has {len(edit.sketches)} tool calls; this run "
                                  f"allows at most {top_k}.")
        out = []
        for i, call in enumerate(edit.sketches, 1):
            tool = tools.get(call.tool)
            if tool is None:
                raise InvalidDecision(f"Call {i}: this run has no tool {call.tool[:40]!r}; its "
                                      f"tools are {', '.join(tools) or 'none'}.")
            query = check_field(f"Call {i}'s question", call.query, max_chars=MAX_QUERY_CHARS)
            check_arguments(call.arguments)
            try:
                parsed = check_args(tool, call.arguments)
            except Exception as exc:  # ToolError: the schema refused them
                raise InvalidDecision(f"Call {i}: {exc}") from None
            out.append({"id": f"S{i}", "query": query, "tool": call.tool,
                        "arguments": parsed.model_dump(exclude_unset=True) or call.arguments})
        return out
