"""The change pattern's three gates: the plan, the merge request, and an escalation to the
person."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, Any

from ..base import (
    Decision,
    Event,
    InvalidDecision,
    StageResult,
)
from ..records import GateDecided, PlanProposed
from .messages import (
    clean_commit_message,
    clean_identity,
    proposed_merge_message,
)
from .schemas import (
    DEFAULT_MERGE_MODE,
    ESCALATION_GATE,
    MAX_FIELD,
    MERGE_GATE,
    MERGE_MODES,
    PLAN_GATE,
    MergeRequestChanged,
    PlanDoc,
    _clean_list,
)


class GateDecisions:
    """Mixed into the pattern: the decisions at its gates."""

    if TYPE_CHECKING:  # defined by the pattern (pattern.py) this is mixed into
        @staticmethod
        def _plan_record(plan: dict[str, Any], *, reason: str, author: str) -> PlanProposed: ...

        @staticmethod
        def _next_execute(state: dict[str, Any]) -> tuple[dict[str, Any], str]: ...

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
            # The merge commit names who approved it (a trailer; the committer too when their
            # address is known).
            approver = (clean_identity(decision.edits.get("approver"))
                        if isinstance(decision.edits, dict) else "") or clean_identity(who)
            state = {**state, "merge_message": message, "merge_mode": mode,
                     "merge_approver": approver}
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
        if isinstance(choice, dict) and set(choice) <= {"approver"}:
            choice = None  # who approved, and no message or mode chosen
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



