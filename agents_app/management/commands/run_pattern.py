"""Run a pattern headlessly through the same engine the web app uses."""

from __future__ import annotations

import json
from decimal import Decimal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents_app import engine
from agents_app.cli import command_owner, parse_models
from agents_app.patterns import PATTERNS


class Command(BaseCommand):
    help = "Run a pattern on a task in this process and print the result."

    def add_arguments(self, parser):
        # Patterns that start from something else than a task (a code review) have commands
        # of their own (``manage.py review``).
        startable = sorted(n for n, p in PATTERNS.items() if p.starts_from_task)
        parser.add_argument("pattern", choices=startable)
        parser.add_argument("--task", required=True)
        parser.add_argument("--auto-approve", action="store_true",
                            help="Approve the plan without asking (recorded as auto-approved).")
        parser.add_argument("--model", action="append", default=[], metavar="ROLE=NAME",
                            help="Model for a role, e.g. --model planner=gpt-4o. Repeatable.")
        parser.add_argument("--max-cost", type=Decimal, default=None)
        parser.add_argument("--max-tokens", type=int, default=None)
        parser.add_argument("--user", default=None, help="Owner of the run (default: first superuser).")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args, **opts):
        pattern = PATTERNS[opts["pattern"]]
        task = opts["task"].strip()
        if not task:
            raise CommandError("--task is empty.")
        if len(task) > settings.QUORUM_MAX_TASK_CHARS:
            raise CommandError(f"--task is longer than {settings.QUORUM_MAX_TASK_CHARS} characters.")
        models = {r: settings.QUORUM_ROLE_MODELS.get(r, settings.QUORUM_DEFAULT_MODEL)
                  for r in pattern.roles}
        models.update(parse_models(opts["model"], pattern.roles))
        owner = command_owner(opts["user"])
        run = engine.create_run(
            owner, pattern.name, task,
            options={"auto_approve": opts["auto_approve"], "max_steps": settings.QUORUM_MAX_STEPS,
                     "max_replans": settings.QUORUM_MAX_REPLANS},
            models=models,
            max_cost_usd=opts["max_cost"] or Decimal(str(settings.QUORUM_DEFAULT_MAX_COST_USD)),
            max_tokens=opts["max_tokens"] or settings.QUORUM_DEFAULT_MAX_TOKENS,
            enqueue=False)
        run = engine.run_inline(run.pk)
        self._report(run, opts["json"])

    def _report(self, run, as_json: bool):
        plan = run.plan_versions.last()
        steps = [{"index": s.index, "plan_version": s.plan_version, "description": s.description,
                  "status": s.status, "output": s.output, "problem": s.problem}
                 for s in run.step_results.all()]
        result = {
            "run": run.pk, "status": run.status, "offline": run.offline,
            "plan": plan.steps if plan else [], "plan_version": plan.version if plan else None,
            "steps": steps, "answer": run.answer, "error": run.error,
            "cost_usd": float(run.cost_usd), "tokens": run.total_tokens, "calls": run.calls,
        }
        if as_json:
            self.stdout.write(json.dumps(result, indent=2))
            return
        self.stdout.write(f"Run {run.pk}: {run.get_status_display()}"
                          + (" (offline model)" if run.offline else ""))
        if plan:
            self.stdout.write(f"Plan v{plan.version}:")
            for i, s in enumerate(plan.steps, 1):
                self.stdout.write(f"  {i}. {s}")
        if run.status == "awaiting_plan_approval":
            self.stdout.write("The plan waits for approval: open the run page, or rerun with --auto-approve.")
        if run.answer:
            self.stdout.write("\n" + run.answer)
        if run.error:
            self.stdout.write(self.style.ERROR(run.error))
        self.stdout.write(f"\nCost ${run.cost_usd:.4f}, {run.total_tokens:,} tokens, {run.calls} calls.")
