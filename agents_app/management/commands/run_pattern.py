"""Run a pattern headlessly through the same engine the web app uses."""

from __future__ import annotations

import json
from decimal import Decimal

from django.conf import settings

from agents_app import engine
from agents_app.cli import (
    CheckedCommand,
    bad_input,
    command_owner,
    form_type,
    parse_models,
)
from agents_app.forms import StartRunForm
from agents_app.option_fields import add_flags, option_fields, options_from
from agents_app.patterns import PATTERNS, pattern_label
from agents_app.patterns.registry import part_of

# The start form's own fields: the command line takes what the web form takes.
RUN_FIELDS = StartRunForm.base_fields


def own_commands() -> dict:
    """Patterns started from their own form whose package brings a command-line part
    (``command.py``: ``add_arguments(parser)`` and ``run(command, pattern, owner, task, models,
    opts)``), by key."""
    return {p.name: module for p in PATTERNS.values()
            if (module := part_of(p, "command")) is not None}


def option(name: str, what: str = "a whole number"):
    return form_type(RUN_FIELDS[name], what)


class Command(CheckedCommand):
    help = "Run a pattern on a task in this process and print the result."
    # Nothing here depends on the system checks (URLs, templates, admin): skipping them
    # saves a second at the command line.
    requires_system_checks: list[str] = []
    starts_runs = True

    def add_arguments(self, parser):
        # Patterns that start from something else than a task (a code review) have commands
        # of their own (``manage.py review``).
        self.own = own_commands()
        startable = [n for n, p in PATTERNS.items() if p.starts_from_task or n in self.own]
        parser.add_argument("pattern", choices=startable)
        parser.add_argument("--task", required=True)
        self.option_fields = option_fields()
        add_flags(parser, self.option_fields)
        for module in self.own.values():
            module.add_arguments(parser)
        parser.add_argument("--model", action="append", default=[], metavar="ROLE=NAME",
                            help="Model for a role, e.g. --model planner=gpt-4o. Repeatable.")
        parser.add_argument("--max-cost", type=option("max_cost_usd", "an amount in USD"),
                            default=None, metavar="USD",
                            help=f"Cost budget of the run (default {settings.QUORUM_DEFAULT_MAX_COST_USD}).")
        parser.add_argument("--max-tokens", type=option("max_tokens"), default=None,
                            help=f"Token budget of the run (default {settings.QUORUM_DEFAULT_MAX_TOKENS}).")
        parser.add_argument("--user", default=None, help="Owner of the run (default: first superuser).")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args, **opts):
        pattern = PATTERNS[opts["pattern"]]
        task = opts["task"].strip()
        if not task:
            raise bad_input("--task is empty.")
        if len(task) > settings.QUORUM_MAX_TASK_CHARS:
            raise bad_input(f"--task is longer than {settings.QUORUM_MAX_TASK_CHARS} characters.")
        models = {r: settings.QUORUM_ROLE_MODELS.get(r, settings.QUORUM_DEFAULT_MODEL)
                  for r in pattern.roles}
        models.update(parse_models(opts["model"], pattern.roles))
        owner = command_owner(opts["user"])
        own = (getattr(self, "own", None) or own_commands()).get(pattern.name)
        if own is not None:
            return own.run(self, pattern, owner, task, models, opts)
        fields = getattr(self, "option_fields", None) or option_fields()
        for name, entry in fields.items():  # a flag of another pattern is a mistake, not a no-op
            if pattern.name not in entry.patterns and opts.get(name) not in (None, False, "", []):
                raise bad_input(f"{entry.flag} does not apply to {pattern.name} (it is an "
                                f"option of {', '.join(entry.patterns)}).")
        options, problem = options_from(pattern, fields, opts, headless=True)
        if problem:
            name, message = problem
            flag = fields[name].flag if name in fields else ""
            raise bad_input(f"{flag}: {message}" if flag else message)
        run = engine.create_run(
            owner, pattern.name, task, options=options, models=models,
            max_cost_usd=opts["max_cost"] if opts["max_cost"] is not None else Decimal(str(settings.QUORUM_DEFAULT_MAX_COST_USD)),
            max_tokens=opts["max_tokens"] if opts["max_tokens"] is not None else settings.QUORUM_DEFAULT_MAX_TOKENS,
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
            "items": [{"kind": i.kind, "key": i.key, **i.data} for i in run.items.all()],
        }
        if as_json:
            self.stdout.write(json.dumps(result, indent=2))
            return
        self.stdout.write(f"Run {run.pk} ({pattern_label(run.pattern)}): "
                          f"{run.get_status_display()}"
                          + (" (offline model)" if run.offline else ""))
        if plan:
            self.stdout.write(f"Plan v{plan.version}:")
            for i, s in enumerate(plan.steps, 1):
                self.stdout.write(f"  {i}. {s}")
        if run.is_waiting:
            pattern = PATTERNS.get(run.pattern)
            said = (pattern.gate_message(run.gate) if pattern else None) or "Waiting for you."
            hint = pattern.headless_hint(run.gate) if pattern else ""
            self.stdout.write(f"{said} Open the run page ({run.get_absolute_url()})"
                              + (f", or {hint}." if hint else "."))
        if run.answer:
            self.stdout.write("\n" + run.answer)
        if run.error:
            self.stdout.write(self.style.ERROR(run.error))
        self.stdout.write(f"\nCost ${run.cost_usd:.4f}, {run.total_tokens:,} tokens, {run.calls} calls.")
