"""``manage.py run_pattern`` for a change: its own flags, starting through the service that
checks the repository, and a report of the merge request. (Django side of the package.)"""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from ... import engine
from ...cli import bad_input, check_with
from ...models import MergeRequest
from ..registry import pattern_label
from .forms import StartChangeForm
from .service import ChangeError, family_warning, start_change

CHANGE_FIELDS = StartChangeForm.base_fields


def add_arguments(parser) -> None:
    group = parser.add_argument_group("a change to a git repository (started from its own "
                                      "form on the web)")
    group.add_argument("--repo", help="Repository under QUORUM_REPO_ROOTS.")
    group.add_argument("--base", default="", help="Base branch (default: the current one).")
    group.add_argument("--auto-approve-plan", action="store_true",
                       help="Approve the plan without asking.")
    group.add_argument("--auto-merge", action="store_true",
                       help="Merge an approved change without asking.")
    group.add_argument("--test-command", default="",
                       help="One of QUORUM_TEST_COMMANDS, run after each change.")


def run(command, pattern, owner, task, models, opts):
        if not opts["repo"]:
            raise bad_input(f"{pattern.name} needs --repo PATH.")
        if opts.get("max_rounds") is not None:
            check_with(CHANGE_FIELDS["max_rounds"], opts.get("max_rounds"), "--max-rounds")
        if warning := family_warning(models):
            command.stderr.write(command.style.WARNING(warning))
        try:
            run = start_change(owner, repo=opts["repo"], base=opts["base"], task=task,
                               models=models, max_rounds=opts.get("max_rounds"),
                               test_command=opts["test_command"],
                               auto_approve_plan=opts["auto_approve_plan"] or opts.get("auto_approve", False),
                               auto_merge=opts["auto_merge"], max_cost_usd=opts["max_cost"],
                               max_tokens=opts["max_tokens"], enqueue=False)
        except ChangeError as exc:
            raise bad_input(str(exc)) from None
        run = engine.run_inline(run.pk)
        mr = MergeRequest.objects.get(run=run)
        review = run.agent_reports.filter(kind="review").last()
        result = {"run": run.pk, "status": run.status, "offline": run.offline,
                  "branch": mr.branch, "base": mr.base_branch, "merge_request": mr.status,
                  "merged_sha": mr.merged_sha, "head_sha": mr.head_sha,
                  "plan": run.state.get("plan"), "rounds": run.state.get("round", 0),
                  "review": review.answer if review else None, "error": run.error,
                  "answer": run.answer, "cost_usd": float(run.cost_usd),
                  "tokens": run.total_tokens, "calls": run.calls}
        if opts["json"]:
            command.stdout.write(json.dumps(result, indent=2))
        else:
            command.stdout.write(f"Run {run.pk} ({pattern_label(run.pattern)}): "
                              f"{run.get_status_display()}"
                              + (" (offline model)" if run.offline else ""))
            command.stdout.write(f"Merge request {mr.branch} → {mr.base_branch}: "
                              f"{mr.get_status_display()}")
            waiting = {"awaiting_plan_approval": "The plan waits for approval: open the run page "
                       "or rerun with --auto-approve-plan.",
                       "awaiting_merge_request": "The merge request waits for you: open the run "
                       "page, or rerun with --auto-merge.",
                       "awaiting_escalation": "The agents could not settle the change: open the "
                       "run page to decide."}
            if run.status in waiting:
                command.stdout.write(waiting[run.status] + f" /changes/{run.pk}/")
            if run.answer:
                command.stdout.write("\n" + run.answer)
            if run.error:
                command.stdout.write(command.style.ERROR(run.error))
            command.stdout.write(f"\nCost ${run.cost_usd:.4f}, {run.total_tokens:,} tokens, "
                              f"{run.calls} calls.")
        if run.status in ("failed", "budget_exceeded"):
            raise CommandError(run.error or run.get_status_display())
