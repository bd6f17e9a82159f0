"""Apply accepted fixes (issue 16): a code review's accepted findings whose fixes were proven
become one commit on a new branch ``quorum/fixes-<review id>``, created from the reviewed head
commit, which then waits at the merge-request gate of the plan → execute → review pattern
(the same page, the same merge, discard and conflict handling; ``MergeRequest`` rows alike).

Stages:
  ``fixes``    create the worktree and branch at the reviewed head, apply each fix's diff
               (a fix whose lines are not there as they were is left out and named), commit
               with a timestamp fixed when the run was created, and open the merge request
               (gate ``merge_request``)
  ``merge:1``  merge the branch into the reviewed branch after the person approved (the change
               pattern's merge: a branch that moved on meanwhile is merged, or its conflict
               reported plainly with nothing changed)
  ``close:discard``  remove the worktree and the branch

No model is called. A stage run again after a crash resets the worktree to the reviewed head
and makes the identical commit, so the branch never gets a second one. Plain Python: the
Django side (``reviews_app/fixes/views.py``) checks the review, its owner and the repository and
creates the run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agents_app.patterns.base import (
    Decision,
    Event,
    Gate,
    InvalidDecision,
    ModelClient,
    StageResult,
)
from agents_app.patterns.options import option
from agents_app.patterns.plan_execute_review.pattern import (
    PlanExecuteReview,
    PlanExecuteReviewOptions,
)
from agents_app.patterns.plan_execute_review.schemas import (
    MAX_DIFF_STORED,
    MERGE_GATE,
    AgentWorked,
    MergeRequestChanged,
)
from agents_app.patterns.records import PlanProposed
from agents_app.repos import gitops

from ..proof import FixDoesNotApply, apply_diff
from ..testrun import inside

AUTHOR = "Quorum <quorum@quorum.local>"


class ApplyFixesOptions(PlanExecuteReviewOptions):
    review: int = option(0, label="Review", hidden=True)
    head_sha: str = option("", label="Reviewed head commit", hidden=True)
    fixes: list[dict] = option([], label="Fixes (key, path, title, diff)", hidden=True)


class ApplyFixes(PlanExecuteReview):
    name = "apply_fixes"
    builds_on = ("plan_execute_review",)  # its merge gate, merge and close stages, its page
    label = "Apply accepted fixes (git)"
    summary = ("A code review's accepted, proven fixes as one commit on a new branch, opened as "
               "a merge request you merge or discard.")
    stage_labels = {"fixes": "Applying the fixes", "merge": "Merging", "close": "Closing"}
    stage_lines = {"fixes": "Applying the accepted fixes on a new branch.",
                   "merge": "Merging the fixes branch into the reviewed branch.",
                   "close": "Removing the fixes branch and its worktree."}
    gate_lines = {MERGE_GATE: "Waiting for you: the fixes are committed on their branch (merge "
                              "or discard the merge request)."}
    roles = ()
    role_defaults = {}
    gates = (MERGE_GATE,)
    options = ApplyFixesOptions
    live_renderer = PlanExecuteReview.live_renderer
    on_terminal = PlanExecuteReview.on_terminal

    def offline_replies(self):
        return []

    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        # the commit's time is fixed now: the stage run again makes the identical commit
        return {**super().initial_state(task, options), "commit_time": int(time.time())}

    def bind_run(self, state: dict[str, Any], run_id: int) -> dict[str, Any]:
        return state  # the branch and worktree are named after the review, by the caller

    def _fork_name(self, state: dict[str, Any], run_id: int) -> str:
        # a fork's own branch beside the review's quorum/fixes-<review>, never that one
        return f"fixes-{state['options']['review']}-run-{run_id}"

    def first_stage(self, state: dict[str, Any]) -> str:
        return "fixes"

    def status_for(self, stage: str) -> str:
        return "executing" if stage == "fixes" else super().status_for(stage)

    def _run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        if stage == "fixes":
            return self._apply(state)
        return super()._run_stage(stage, state, client)

    def _decide_merge(self, state: dict[str, Any], decision: Decision) -> StageResult:
        if decision.action == "reject":
            raise InvalidDecision("A fixes branch has no executor to send it back to: merge it, "
                                  "or discard it and change the code yourself.")
        return super()._decide_merge(state, decision)

    # --- the one stage ------------------------------------------------------------------------
    def _apply(self, state: dict[str, Any]) -> StageResult:
        opts = state["options"]
        repo, worktree, head = opts["repo"], opts["worktree"], opts["head_sha"]
        try:
            base_sha = gitops.create_worktree(repo, worktree, opts["branch"], head)
        except gitops.GitError as exc:
            return StageResult(state=state, outcome="failed",
                               error=f"Could not create the fixes branch: {exc}")
        gitops.reset_worktree(worktree, base_sha)
        root = Path(worktree)
        done, skipped = [], []
        for fix in opts["fixes"]:
            label = f"{fix.get('key', '?')} {str(fix.get('title') or '')[:120]}".strip()
            target = inside(root, str(fix.get("path") or ""))
            if target is None or not target.is_file():
                skipped.append(f"{label}: {fix.get('path')!s:.200} is not a file of the "
                               "reviewed commit.")
                continue
            try:
                text = target.read_text(encoding="utf-8")
                target.write_text(apply_diff(text, str(fix.get("diff") or "")),
                                  encoding="utf-8", newline="")
            except (FixDoesNotApply, UnicodeDecodeError) as exc:
                skipped.append(f"{label}: not applied, {exc}.")
                continue
            done.append(label)
        if not done:
            gitops.remove_worktree(repo, worktree, opts["branch"])
            why = " ".join(skipped) or "there was no fix to apply."
            return StageResult(state=state, outcome="failed",
                               error=f"No fix could be applied, so no branch was made: {why}")
        review = opts["review"]
        message = (f"Apply {len(done)} accepted fix{'es' if len(done) != 1 else ''} of Quorum "
                   f"review {review}\n\n" + "\n".join(f"- {d}" for d in done))
        if skipped:
            message += "\n\nLeft out:\n" + "\n".join(f"- {s}" for s in skipped)
        sha = gitops.commit_all(worktree, message, AUTHOR, timestamp=state["commit_time"])
        new_head = sha or base_sha
        full = gitops.diff(worktree, base_sha, new_head)
        files = gitops.changed_files(worktree, base_sha, new_head)
        goal = f"Apply the accepted, proven fixes of review {review} to {opts['base']}."
        plan = {"version": 1, "author": "quorum", "goal": goal, "files": sorted(
            {str(f.get("path")) for f in opts["fixes"]}), "approach": "Each fix was proven "
            "when the review was made: it applied, brought no new analyzer finding and, when a "
            "test command was set, kept the tests passing.", "steps": [f"Apply {d}" for d in
                                                                      done + skipped][:30],
            "test_strategy": "", "risks": []}
        moved = gitops.branch_sha(repo, opts["base"])
        note = (f" {opts['base']} moved on since the review ({head[:10]} → {moved[:10]}): the "
                "fixes branch starts at the reviewed commit, and merging shows any conflict."
                if moved and moved != head else "")
        summary = (f"Applied {len(done)} fix(es) on {opts['branch']} from the reviewed commit "
                   f"{head[:10]}." + (f" {len(skipped)} left out." if skipped else "") + note)
        state = {**state, "plan": plan, "round": 1, "base_sha": base_sha, "head": new_head,
                 "mr_status": "open",
                 "last_round": {"round": 1, "commit": sha or "", "report": {"summary": summary}}}
        records: list[Any] = [
            PlanProposed(version=1, steps=plan["steps"], goal=goal, reasoning=plan["approach"],
                         author="quorum", reason=f"Accepted fixes of review {review}",
                         details={k: plan[k] for k in ("files", "approach", "test_strategy",
                                                       "risks")}),
            MergeRequestChanged("draft", head_sha=base_sha, base_sha=base_sha),
            AgentWorked("fixes", "execute", 1, 1, [], "done",
                        {"summary": summary, "done": done, "skipped": skipped, "surprises": [],
                         "tests": ""}, commit_sha=sha or "", base_sha=base_sha,
                        diff=full[:MAX_DIFF_STORED], diff_truncated=len(full) > MAX_DIFF_STORED,
                        files=files),
            MergeRequestChanged("open", head_sha=new_head)]
        events = [Event("execution_reported", summary, {"round": 1, "commit": sha or ""})]
        events += [Event("review_warning", s, {"round": 1}) for s in skipped[:20]]
        return StageResult(state=state, next_stage="merge:1", gate=Gate(MERGE_GATE, {"round": 1}),
                           records=records, events=events)
