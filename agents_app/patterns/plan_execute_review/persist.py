"""How the change pattern's own records are saved: an agent's report of a round, and the merge
request's state. (Django side of the package; imported when the app starts.)"""

from __future__ import annotations

from django.utils import timezone

from ...models import AgentReport, MergeRequest, Run
from ...records import persister
from .schemas import AgentWorked, MergeRequestChanged


@persister(AgentWorked)
def _agent_report(run: Run, rec: AgentWorked, user) -> None:
    AgentReport.objects.create(
        run=run, stage=rec.stage, kind=rec.kind, plan_version=rec.plan_version, round=rec.round,
        trace=rec.trace, stopped=rec.stopped, answer=rec.answer, commit_sha=rec.commit_sha,
        base_sha=rec.base_sha, diff=rec.diff, diff_truncated=rec.diff_truncated, files=rec.files,
        test_ran=rec.test_ran, test_output=rec.test_output, test_exit=rec.test_exit)


@persister(MergeRequestChanged)
def _merge_request(run: Run, rec: MergeRequestChanged, user) -> None:
    opts = run.options or {}
    mr, _ = MergeRequest.objects.get_or_create(run=run, defaults={
        "repo": opts.get("repo", ""), "base_branch": opts.get("base", ""),
        "branch": opts.get("branch", "")})
    mr.status = rec.status
    for name in ("head_sha", "base_sha", "merged_sha", "message"):
        value = getattr(rec, name)
        if value:
            setattr(mr, name, value)
    if rec.status == "draft" and not rec.message:
        mr.message = ""
    if rec.decided:
        mr.decided_by, mr.decided_at = user, timezone.now()
    mr.save()
