"""The stages after the plan: a round of the executor, the reviewer's verdict on it, the merge,
and closing the worktree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...repos import gitops
from ...repos.gitcmd import is_identity
from ..agent_loop import AgentResult
from ..base import (
    Event,
    Gate,
    ModelClient,
    ModelError,
    Schema,
    StageResult,
)
from ..records import GateDecided
from .checks import headline, round_problems, steps_not_done
from .messages import (
    clip,
    person_comments,
    proposed_merge_message,
    subject,
    with_trailer,
)
from .prompts import (
    EXECUTOR_SYSTEM,
    REVIEWER_SYSTEM,
    _bullets,
    _section,
    comments_markdown,
    plan_markdown,
)
from .schemas import (
    ALREADY_IN_FILES,
    DEFAULT_MERGE_MODE,
    ESCALATION_GATE,
    MAX_DIFF_IN_PROMPT,
    MAX_DIFF_STORED,
    MAX_FIELD,
    MERGE_GATE,
    PERSON_COMMENTS,
    UNFINISHED,
    AgentWorked,
    ExecutionReport,
    MergeRequestChanged,
    ReviewVerdict,
)


class RoundStages:
    """Mixed into the pattern: execute, review, merge and close."""

    if TYPE_CHECKING:  # defined by the pattern (pattern.py) this is mixed into
        def _agent(self, client: ModelClient, role: str, state: dict[str, Any], *, system: str,
                   task: str, write: bool, schema: type[Schema], instruction: str, key: str,
                   turns: int) -> AgentResult[Schema]: ...

        def _run_tests(self, state: dict[str, Any]) -> tuple[bool, str, int | None]: ...

        @staticmethod
        def _next_execute(state: dict[str, Any]) -> tuple[dict[str, Any], str]: ...

    def _execute(self, stage: str, version: int, rnd: int, state: dict[str, Any],
                 client: ModelClient) -> StageResult:
        opts = state["options"]
        gitops.reset_worktree(opts["worktree"], state["head"])
        parts = [_section("Plan", plan_markdown(state["plan"]))]
        asked = person_comments(state["comments"])
        reviewer = [c for c in state["comments"] if not c.get("by")]
        where = ("the branch starts again from the current base branch, so make the whole "
                 "change again" if state.get("fresh_base") else ALREADY_IN_FILES)
        if asked:
            parts.append(_section(f"{PERSON_COMMENTS} ({where}; do what they ask)",
                                  comments_markdown(asked)))
        if reviewer:
            parts.append(_section(f"Review comments to address ({ALREADY_IN_FILES})",
                                  comments_markdown(reviewer)))
        try:
            result = self._agent(
                client, "executor", state, system=EXECUTOR_SYSTEM, task="\n".join(parts),
                write=True, schema=ExecutionReport, key=f"exec{rnd}",
                turns=opts["executor_turns"], instruction="Now write your execution report.")
        except ModelError as exc:
            gitops.reset_worktree(opts["worktree"], state["head"])  # drop half-made edits
            return self._model_failed(state, stage, "executor", rnd, exc)
        report = result.answer
        ran, test_output, test_exit = self._run_tests(state)
        message = f"{subject(state['plan']['goal'])}\n\n{report.summary.strip()[:2000]}\n\n" \
                  f"Quorum run round {rnd}, plan v{version}."
        answer = report.model_dump()
        if asked:  # the page shows which comments of the person this round had to address
            answer["addressing"] = asked
        # Which plan steps the executor says it did not do, and why (the page's notice, the
        # reviewer's rules).
        not_done = steps_not_done(state["plan"]["steps"], report.skipped)
        answer["not_done"] = not_done
        sha = gitops.commit_all(opts["worktree"], message, timestamp=state["commit_time"])
        head = sha or state["head"]
        full_diff = gitops.diff(opts["worktree"], state["base_sha"], head)
        files = gitops.changed_files(opts["worktree"], state["base_sha"], head)
        stored, truncated = clip(full_diff, MAX_DIFF_STORED)
        state = {**state, "head": head, "comments": [], "fresh_base": False, "last_round": {
            "round": rnd, "report": report.model_dump(), "test_output": test_output,
            "test_exit": test_exit, "test_ran": ran, "commit": sha or "", "files": files,
            "addressing": asked, "not_done": not_done}}
        tests = "no tests configured" if not ran else (
            "tests passed" if test_exit == 0 else "tests FAILED")
        what = f"committed {sha[:10]}" if sha else "no new changes"
        if unfinished := headline(not_done):
            what += f"; {unfinished}"
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
        # The rules a round must pass to be approved (checks.py): what this round left
        # unfinished. The reviewer is shown it, and an approval despite it is overruled below.
        if "not_done" not in last:  # a round recorded before the check existed
            last = {**last, "not_done": steps_not_done(state["plan"]["steps"],
                                                       report.get("skipped") or [])}
        problems = round_problems(last, branch_empty=not diff.strip())
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
                 _section("This round", f"Round {rnd} " + (
                     f"made commit {last['commit'][:10]}." if last.get("commit") else
                     "made no new commit: the branch is as it was before the round.")),
                 _section(f"{UNFINISHED} (never approve while this lists anything)",
                          _bullets([p["problem"] for p in problems])),
                 _section("Test output (run by Quorum after the change)", last["test_output"])]
        try:
            result = self._agent(
                client, "reviewer", state, system=REVIEWER_SYSTEM, task="\n".join(parts),
                write=False, schema=ReviewVerdict, key=f"review{rnd}",
                turns=opts["reviewer_turns"], instruction="Now give your verdict.")
        except ModelError as exc:
            gitops.reset_worktree(opts["worktree"], state["head"])
            return self._model_failed(state, stage, "reviewer", rnd, exc)
        verdict = result.answer
        data = verdict.model_dump()
        if not verdict.approve and not verdict.rejection_kind:
            data["rejection_kind"] = "fixup"
        if verdict.approve:
            data["rejection_kind"] = None
        overruled = ""
        if verdict.approve and problems:
            # Never trust an approval of unfinished work: the round goes back as a fix-up.
            overruled = (f"The reviewer approved, but Quorum sent round {rnd} back: "
                         + " ".join(p["problem"] for p in problems))[:MAX_FIELD]
            data.update(approve=False, rejection_kind="fixup", overruled=overruled,
                        reason=overruled)
        if data["rejection_kind"] == "fixup":  # the executor is told what is unfinished
            said = {c["problem"] for c in data["comments"]}
            data["comments"] = data["comments"] + [p for p in problems
                                                   if p["problem"] not in said]
        warnings: list[str] = []
        if data["approve"] and last["test_ran"] and last["test_exit"] != 0:
            warnings.append("The reviewer approved although the tests fail.")
        data["warnings"] = warnings
        gitops.reset_worktree(opts["worktree"], state["head"])  # drop files the tests left
        state = {**state, "last_review": {**data, "round": rnd}}
        records: list[Any] = [AgentWorked(stage, "review", version, rnd, result.trace_dicts(),
                                          result.stopped, data)]
        if data["approve"]:
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
        if overruled:
            events = [Event("review_verdict", f"Round {rnd}: {overruled[:400]}",
                            {"round": rnd, "approve": False, "kind": kind, "overruled": True})]
        else:
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
        # A comment of the person's that the round made no change for stays theirs to act on.
        carried = [] if last.get("commit") else list(last.get("addressing") or [])
        state = {**state, "comments": carried + (data["comments"] or [
            {"file": "", "line": None, "problem": data["reason"] or verdict.summary,
             "requested_change": ""}])}
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
        approver = state.get("merge_approver") or ""
        if approver:
            message = with_trailer(message, "Approved-by", approver)
        try:
            if state.get("head") and gitops.branch_sha(opts["repo"], opts["branch"]) is None:
                # An earlier attempt of this stage merged and removed the branch, and the worker
                # died before the run recorded it. Put the branch back at the approved commit:
                # the merge then finds it already contained instead of "no such branch".
                gitops.create_worktree(opts["repo"], opts["worktree"], opts["branch"],
                                       state["head"])
            outcome = gitops.merge_into_base(
                opts["repo"], opts["base"], opts["branch"], message, mode=mode,
                committer=approver if is_identity(approver) else None)
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
        return StageResult(state=state, outcome="completed", answer=self.outcome_summary(state, text),
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
                           answer=self.outcome_summary(state, text), error="",
                           records=[MergeRequestChanged(status, message=text)],
                           events=[Event(status, text)])

    @staticmethod
    def outcome_summary(state: dict[str, Any], outcome: str) -> str:
        plan = state.get("plan") or {}
        review = state.get("last_review") or {}
        lines = [f"**{outcome}**", "", f"Goal: {plan.get('goal', '')}",
                 f"Rounds of execution: {state.get('round', 0)}"]
        if review.get("summary"):
            lines.append(f"Last review: {review['summary']}")
        return "\n".join(lines)

    # --- decisions ------------------------------------------------------------------------
