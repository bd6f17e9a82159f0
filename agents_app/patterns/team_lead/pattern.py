"""Team Lead: a lead splits the task into subtasks for named team members, the members carry
them out, and the lead writes the final answer.

Strategies:
  * ``sequential``: one subtask at a time, each member seeing the results before it;
  * ``parallel``: every subtask at once (side by side, each with its timeout);
  * ``dynamic``: sequential work, then the lead reviews the work log and either finishes or
    assigns more work (new subtasks, or a subtask again to someone), up to
    ``max_reassignments`` reviews that ask for more.

Stages: ``delegate``, ``work:K`` (the pending subtasks of batch K), ``review:K`` (dynamic only),
``synthesize``. Every subtask attempt is an ``Item("subtask", ...)`` with its assignee,
attempt, status and result.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from ..base import (
    Event,
    ForkEdit,
    InvalidDecision,
    Item,
    ItemEdited,
    ModelClient,
    ModelError,
    OfflineReply,
    Pattern,
    StageResult,
    parse_named_lines,
)
from ..gate_input import check_field
from ..options import PatternOptions, named_lines, option
from ..parallel import run_parallel
from . import offline
from .prompts import lead_messages, member_messages, review_messages, synthesis_messages, work_log

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,29}$")
MAX_SUBTASKS = 10
STRATEGIES = ("sequential", "parallel", "dynamic")


class Assignment(BaseModel):
    assignee: str = Field(description="A team member's name.")
    task: str = Field(description="What this member must do, self-contained.")


class Delegation(BaseModel):
    """The lead's plan of work."""

    subtasks: list[Assignment] = Field(min_length=1)


class LeadReview(BaseModel):
    """The lead's review of the work so far (dynamic strategy)."""

    complete: bool = Field(description="True if the results are enough for the final answer.")
    reassignments: list[Assignment] = Field(default_factory=list, description="More work, "
                                            "when not complete.")
    reason: str = Field(default="", description="Why, briefly.")


class ForkSubtasks(BaseModel):
    """A fork's edit of the subtasks waiting to be worked on."""

    subtasks: list[Assignment] = Field(default_factory=list)


MAX_SUBTASK_CHARS = 4000

DEFAULT_TEAM = [{"name": "researcher", "description": "finds and summarizes information"},
                {"name": "writer", "description": "writes clear, concise reports"}]


def parse_team(text: str) -> list[dict[str, str]]:
    """Team members from lines of ``name: what they do``; InvalidDecision otherwise."""
    return parse_named_lines(
        text, key="description", line_form="a member as “name: what they do”", name_re=NAME,
        name_rule="a member's name is one word of letters, digits, - or _ (at most 30 "
                  "characters)", max_text=500, bounds=(1, 6),
        count_message="A team has 1 to 6 members.")


class TeamLeadOptions(PatternOptions):
    strategy: Literal["dynamic", "sequential", "parallel"] = option(
        "dynamic", label="Strategy", help="how the members' work is ordered",
        choice_labels={"dynamic": "Dynamic (the lead reviews and may reassign)",
                       "sequential": "Sequential", "parallel": "Parallel"})
    team: Annotated[list[dict[str, str]], BeforeValidator(named_lines(parse_team))] = option(
        DEFAULT_TEAM, label="Team", widget="textarea", max_chars=4000,
        help="One per line, “name: what they do”; 1 to 6 members.",
        placeholder="researcher: finds and summarizes information\nwriter: writes clear reports")
    max_reassignments: int = option(2, label="Reassignment rounds", ge=0, le=5,
                                    help="rounds in which the lead may reassign work (dynamic)")
    timeout: float = option(180.0, label="Seconds per round", hidden=True)


class TeamLead(Pattern):
    name = "team_lead"
    label = "Team lead"
    purpose = "For work that splits into parts for specialists, brought together by a lead."
    summary = ("A lead splits the task among team members (a researcher, a writer, …), "
               "reviews their work, sends back what falls short, and writes the final answer.")
    stage_labels = {"delegate": "Splitting the task", "work": "Team work, batch {0}",
                    "review": "Lead's review of batch {0}", "synthesize": "Final answer"}
    stage_lines = {"delegate": "The lead is splitting the task among the team.",
                   "work": "The team is working on its subtasks.",
                   "review": "The lead is reviewing the team's work.",
                   "synthesize": "The lead is writing the final answer."}
    roles = ("lead", "member")
    options = TeamLeadOptions
    live_events = {"delegated": ("items-panel",), "work_done": ("items-panel",),
                   "lead_review": ("items-panel",), "assignee_unknown": ("items-panel",)}

    def offline_replies(self) -> list[OfflineReply]:
        return [("Delegation", "lead", offline.delegation),
                ("LeadReview", "lead", offline.lead_review),
                (None, "lead", offline.lead_text), (None, "member", offline.member)]

    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = self.check_options(options)
        return {"task": task, "options": opts, "subtasks": [], "reviews": 0}

    def first_stage(self, state: dict[str, Any]) -> str:
        return "delegate"

    def status_for(self, stage: str) -> str:
        kind = stage.split(":")[0]
        return {"delegate": "planning", "work": "executing", "review": "reviewing"}.get(
            kind, "synthesizing")

    def run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        kind, _, arg = stage.partition(":")
        if kind == "delegate":
            return self._delegate(state, client)
        if kind == "work":
            return self._work(int(arg), state, client)
        if kind == "review":
            return self._review(int(arg), state, client)
        if kind == "synthesize":
            return self._synthesize(state, client)
        raise ValueError(f"unknown stage {stage!r}")

    # --- assignments ------------------------------------------------------------------------
    def _add(self, state: dict[str, Any], assignments: list[Assignment],
             batch: int) -> tuple[dict[str, Any], list[Event]]:
        team = {m["name"].lower(): m["name"] for m in state["options"]["team"]}
        subtasks = [dict(s) for s in state["subtasks"]]
        events = []
        for a in assignments:
            if len(subtasks) >= MAX_SUBTASKS * 3:
                break
            name = team.get(a.assignee.strip().lower())
            if name is None:
                name = state["options"]["team"][0]["name"]
                events.append(Event("assignee_unknown", f"“{a.assignee[:40]}” is not on the "
                                    f"team; the subtask goes to {name}."))
            earlier = [s for s in subtasks if s["assignee"] == name and s["task"] == a.task]
            for s in earlier:
                if s["status"] == "done":
                    s["status"] = "reassigned"
            attempt = max((s["attempt"] for s in earlier), default=0) + 1
            subtasks.append({"id": f"T{len(subtasks) + 1}", "assignee": name,
                             "task": a.task.strip(), "attempt": attempt, "status": "pending",
                             "result": "", "error": "", "batch": batch})
        return {**state, "subtasks": subtasks}, events

    def _delegate(self, state: dict[str, Any], client: ModelClient) -> StageResult:
        team = state["options"]["team"]
        delegation: Delegation = client.complete(
            "lead", lead_messages(state["task"], team, MAX_SUBTASKS),
            schema=Delegation).data
        state, events = self._add(state, delegation.subtasks[:MAX_SUBTASKS], 1)
        events.append(Event("delegated", f"The lead made {len(state['subtasks'])} subtask(s) "
                            f"({state['options']['strategy']}).",
                            {"count": len(state["subtasks"])}))
        return StageResult(state=state, next_stage="work:1", events=events,
                           records=[self._record(s) for s in state["subtasks"]])

    @staticmethod
    def _record(s: dict[str, Any]) -> Item:
        return Item("subtask", f"{s['id']}:{s['status']}", dict(s))

    # --- work -------------------------------------------------------------------------------
    def _member_messages(self, state: dict[str, Any], s: dict[str, Any],
                         prior: str) -> list[dict[str, str]]:
        member = next(m for m in state["options"]["team"] if m["name"] == s["assignee"])
        return member_messages(state["task"], member, s["task"], prior)

    def _work(self, batch: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        opts = state["options"]
        subtasks = [dict(s) for s in state["subtasks"]]
        pending = [s for s in subtasks if s["status"] == "pending"]
        if opts["strategy"] == "parallel":
            prior = work_log(subtasks)
            jobs = {s["id"]: (lambda s=s: client.complete(
                "member", self._member_messages(state, s, prior if batch > 1 else ""),
                key=s["id"]).text.strip()) for s in pending}
            outcomes = run_parallel(jobs, float(opts["timeout"]), len(jobs) or 1)
            for s in pending:
                out = outcomes[s["id"]]
                s.update(status="failed" if out.error else "done", result=out.value or "",
                         error=out.error)
        else:
            for s in pending:  # each member sees the results before it
                try:
                    s["result"] = client.complete("member", self._member_messages(
                        state, s, work_log(subtasks)), key=s["id"]).text.strip()
                    s["status"] = "done"
                except ModelError as exc:
                    s.update(status="failed", error=str(exc))
        state = {**state, "subtasks": subtasks}
        done = sum(s["status"] == "done" for s in pending)
        failed = [s for s in pending if s["status"] == "failed"]
        # A failed subtask is said, with its reason: the lead answers without its result.
        events = [Event("subtask_failed", f"{s['id']} ({s['assignee']}) failed: "
                        f"{s['error'][:300]}", {"batch": batch, "subtask": s["id"]})
                  for s in failed]
        events.append(Event("work_done", f"Batch {batch}: {done} of {len(pending)} subtask(s) "
                            "done.", {"batch": batch}))
        records = [self._record(s) for s in pending]
        if not any(s["status"] == "done" for s in subtasks):
            reasons = "; ".join(f"{s['id']} ({s['assignee']}): {s['error'][:200]}"
                                for s in failed)
            return StageResult(state=state, outcome="failed", records=records, events=events,
                               error="No subtask could be done"
                                     + (f": {reasons}" if reasons else "."))
        nxt = f"review:{batch}" if opts["strategy"] == "dynamic" else "synthesize"
        return StageResult(state=state, next_stage=nxt, records=records, events=events)

    def _review(self, k: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        opts = state["options"]
        review: LeadReview = client.complete(
            "lead", review_messages(state["task"], opts["team"], state["subtasks"]),
            schema=LeadReview).data
        used = state["reviews"]
        if review.complete or not review.reassignments:
            return StageResult(state=state, next_stage="synthesize", events=[Event(
                "lead_review", f"The lead found the work complete. {review.reason[:200]}")])
        if used >= int(opts["max_reassignments"]):
            return StageResult(state=state, next_stage="synthesize", events=[Event(
                "lead_review", f"The lead wanted more work, but the limit of "
                f"{opts['max_reassignments']} reassignment round(s) is reached.")])
        before = {s["id"]: s["status"] for s in state["subtasks"]}
        state, events = self._add({**state, "reviews": used + 1},
                                  review.reassignments[:MAX_SUBTASKS], k + 1)
        changed = [s for s in state["subtasks"] if before.get(s["id"]) != s["status"]]
        events.append(Event("lead_review", f"The lead assigned {len(review.reassignments)} more "
                            f"subtask(s) (round {used + 1} of {opts['max_reassignments']}). "
                            f"{review.reason[:200]}"))
        return StageResult(state=state, next_stage=f"work:{k + 1}", events=events,
                           records=[self._record(s) for s in changed])

    def _synthesize(self, state: dict[str, Any], client: ModelClient) -> StageResult:
        answer = client.complete("lead", synthesis_messages(state["task"], state["subtasks"]),
                                 key="synthesis").text
        return StageResult(state=state, outcome="completed", answer=answer,
                           events=[Event("answer", "The lead wrote the final answer.")])


    # --- forks (issue 33): the subtasks before the team works on them -----------------------
    def fork_edit(self, stage: str, gate: str, state: dict[str, Any]) -> ForkEdit | None:
        kind, _, arg = stage.partition(":")
        pending = [s for s in state.get("subtasks") or () if s["status"] == "pending"]
        if kind != "work" or not pending:
            return None
        batch = int(arg)

        def apply(st: dict[str, Any], edit: ForkSubtasks, author: str) -> tuple[
                dict[str, Any], list[Any]]:
            assignments = self.edited_subtasks(st, edit)
            old = [s for s in st["subtasks"] if s["status"] == "pending"]
            if [(a.assignee, a.task) for a in assignments] == [(s["assignee"], s["task"])
                                                              for s in old]:
                return st, []
            kept = [s for s in st["subtasks"] if s["status"] != "pending"]
            before = {s["id"]: s["status"] for s in kept}
            new_state, _ = self._add({**st, "subtasks": kept}, assignments, batch)
            subtasks = new_state["subtasks"]
            added = subtasks[len(kept):]
            for s in added:
                s["edited_by"] = author
            records: list[Any] = [ItemEdited("subtask", f"{s['id']}:pending", dict(s))
                                  for s in added]
            records += [ItemEdited("subtask", f"{s['id']}:pending", None)
                        for s in old[len(added):]]
            records += [ItemEdited("subtask", f"{s['id']}:{s['status']}", dict(s))
                        for s in subtasks[:len(kept)] if before[s["id"]] != s["status"]]
            return new_state, records

        return ForkEdit(ForkSubtasks, {"subtasks": [{"assignee": s["assignee"],
                                                     "task": s["task"]} for s in pending]},
                        f"Batch {batch}: the subtasks and who does each", apply)

    @staticmethod
    def edited_subtasks(state: dict[str, Any], edit: ForkSubtasks) -> list[Assignment]:
        """A person's subtasks, checked: 1 to ``MAX_SUBTASKS``, each for a member of the team,
        its text not empty, not too long, no control characters."""
        team = {m["name"].lower(): m["name"] for m in state["options"]["team"]}
        if not edit.subtasks:
            raise InvalidDecision("There are no subtasks left: keep at least one.")
        if len(edit.subtasks) > MAX_SUBTASKS:
            raise InvalidDecision(f"{len(edit.subtasks)} subtasks; a batch has at most "
                                  f"{MAX_SUBTASKS}.")
        out = []
        for i, a in enumerate(edit.subtasks, 1):
            name = team.get(a.assignee.strip().lower())
            if name is None:
                raise InvalidDecision(f"Subtask {i}: “{a.assignee.strip()[:40]}” is not on the "
                                      f"team; its members are {', '.join(team.values())}.")
            task = check_field(f"Subtask {i}", a.task, max_chars=MAX_SUBTASK_CHARS)
            out.append(Assignment(assignee=name, task=task))
        return out
