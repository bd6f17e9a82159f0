"""Run a pattern headlessly through the same engine the web app uses."""

from __future__ import annotations

import json
from decimal import Decimal

from django import forms
from django.conf import settings
from django.core.management.base import CommandError

from agents_app import engine
from agents_app.changes import ChangeError, family_warning, start_change
from agents_app.cli import (
    CheckedCommand,
    bad_input,
    check_with,
    command_owner,
    form_type,
    parse_models,
)
from agents_app.forms import StartChangeForm, StartRunForm
from agents_app.models import MergeRequest
from agents_app.patterns import PATTERNS, pattern_label
from agents_app.patterns.base import InvalidDecision
from agents_app.patterns.debate import DEFAULT_POSITIONS, parse_positions

CHANGE = "plan_execute_review"


# The start forms' own fields: the command line takes what the web form takes.
RUN_FIELDS = StartRunForm.base_fields
CHANGE_FIELDS = StartChangeForm.base_fields


def option(name: str, what: str = "a whole number"):
    return form_type(RUN_FIELDS[name], what)


class Command(CheckedCommand):
    help = "Run a pattern on a task in this process and print the result."

    def add_arguments(self, parser):
        # Patterns that start from something else than a task (a code review) have commands
        # of their own (``manage.py review``).
        startable = sorted(n for n, p in PATTERNS.items() if p.starts_from_task)
        parser.add_argument("pattern", choices=[*startable, CHANGE])
        parser.add_argument("--task", required=True)
        parser.add_argument("--auto-approve", action="store_true",
                            help="Approve the plan without asking (recorded as auto-approved).")
        change = parser.add_argument_group(f"{CHANGE} (changes a git repository)")
        change.add_argument("--repo", help="Repository under QUORUM_REPO_ROOTS.")
        change.add_argument("--base", default="", help="Base branch (default: the current one).")
        change.add_argument("--auto-approve-plan", action="store_true",
                            help="Approve the plan without asking (recorded as auto-approved).")
        change.add_argument("--auto-merge", action="store_true",
                            help="Merge when the reviewer approves, without asking.")
        change.add_argument("--test-command", default="",
                            help="One of QUORUM_TEST_COMMANDS, run after each change.")
        change.add_argument("--max-rounds", type=form_type(forms.IntegerField(min_value=1),
                                                           "a whole number"), default=None,
                            help="plan_execute_review: execute/review rounds before escalating "
                                 "(default QUORUM_CHANGE_MAX_ROUNDS); debate: rounds (default 2).")
        others = parser.add_argument_group("reflective, debate, team_lead, react, rewoo")
        others.add_argument("--max-reflections", type=option("max_reflections"), default=None,
                            help="reflective: most actor/critic rounds (default 3).")
        others.add_argument("--strategy", default="dynamic",
                            help="team_lead: sequential, parallel or dynamic (default).")
        others.add_argument("--team", default="",
                            help="team_lead: members, one per line, 'name: what they do'.")
        others.add_argument("--max-iterations", type=option("max_iterations"), default=None,
                            help="react: most think-act-observe iterations (default 10).")
        others.add_argument("--max-tool-calls", type=option("max_tool_calls"), default=None,
                            help="react: most tool calls (default 20).")
        others.add_argument("--max-verify-passes", type=option("max_verify_passes"),
                            default=None,
                            help="rewoo: verify passes (default 1).")
        others.add_argument("--max-reassignments", type=option("max_reassignments"),
                            default=None,
                            help="team_lead (dynamic): reassignment rounds (default 2).")
        others.add_argument("--tools", default="",
                            help="react, rewoo: comma-separated tool names (default: all).")
        others.add_argument("--positions", default="",
                            help="debate: positions, one per line, 'name: stance' "
                                 "(default For / Against).")
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
        if pattern.name == CHANGE:
            return self._change(owner, task, models, opts)
        run = engine.create_run(
            owner, pattern.name, task, options=self._options(pattern.name, opts),
            models=models,
            max_cost_usd=opts["max_cost"] if opts["max_cost"] is not None else Decimal(str(settings.QUORUM_DEFAULT_MAX_COST_USD)),
            max_tokens=opts["max_tokens"] if opts["max_tokens"] is not None else settings.QUORUM_DEFAULT_MAX_TOKENS,
            enqueue=False)
        run = engine.run_inline(run.pk)
        self._report(run, opts["json"])

    @staticmethod
    def _options(name: str, opts) -> dict:
        def ranged(option: str, default: int) -> int:
            value = opts[option.replace("-", "_")]
            return default if value is None else value

        if name == "reflective":
            return {"max_reflections": ranged("max-reflections", 3)}
        if name == "debate":
            rounds = ranged("max-rounds", 2)
            check_with(RUN_FIELDS["max_rounds"], rounds, "--max-rounds")
            try:
                positions = parse_positions(opts["positions"]) if opts["positions"].strip() \
                    else DEFAULT_POSITIONS
            except InvalidDecision as exc:
                raise bad_input(f"--positions: {exc}") from None
            return {"max_rounds": rounds, "positions": positions}
        if name == "team_lead":
            from agents_app.patterns.team_lead import DEFAULT_TEAM, STRATEGIES, parse_team

            if opts["strategy"] not in STRATEGIES:
                raise bad_input(f"--strategy takes {', '.join(STRATEGIES)}.")
            try:
                team = parse_team(opts["team"]) if opts["team"].strip() else DEFAULT_TEAM
            except InvalidDecision as exc:
                raise bad_input(f"--team: {exc}") from None
            return {"strategy": opts["strategy"], "team": team,
                    "max_reassignments": ranged("max-reassignments", 2)}
        if name in ("react", "rewoo"):
            from agents_app.patterns.toolbox import registry

            tools = [t.strip() for t in opts["tools"].split(",") if t.strip()]
            unknown = sorted(set(tools) - set(registry([])))
            if unknown:
                raise bad_input(f"--tools: unknown {', '.join(unknown)}; choose from "
                                   f"{', '.join(registry([]))}.")
            # No one can answer a question at a terminal: ask_person only when named.
            tools = tools or [n for n, t in registry([]).items() if t.kind != "person"]
            base = {"tools": tools, "repo_roots": list(settings.QUORUM_REPO_ROOTS)}
            if name == "react":
                if "ask_person" in tools:
                    raise bad_input("--tools: ask_person needs the web page to answer; "
                                       "leave it out on the command line.")
                return {**base, "max_iterations": ranged("max-iterations", 10),
                        "max_tool_calls": ranged("max-tool-calls", 20)}
            if "ask_person" in tools:
                raise bad_input("--tools: ReWOO cannot ask a person.")
            return {**base, "max_verify_passes": ranged("max-verify-passes", 1)}
        return {"auto_approve": opts["auto_approve"], "max_steps": settings.QUORUM_MAX_STEPS,
                "max_replans": settings.QUORUM_MAX_REPLANS}

    def _change(self, owner, task, models, opts):
        if not opts["repo"]:
            raise bad_input(f"{CHANGE} needs --repo PATH.")
        if opts["max_rounds"] is not None:
            check_with(CHANGE_FIELDS["max_rounds"], opts["max_rounds"], "--max-rounds")
        if warning := family_warning(models):
            self.stderr.write(self.style.WARNING(warning))
        try:
            run = start_change(owner, repo=opts["repo"], base=opts["base"], task=task,
                               models=models, max_rounds=opts["max_rounds"],
                               test_command=opts["test_command"],
                               auto_approve_plan=opts["auto_approve_plan"] or opts["auto_approve"],
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
            self.stdout.write(json.dumps(result, indent=2))
        else:
            self.stdout.write(f"Run {run.pk} ({pattern_label(run.pattern)}): "
                              f"{run.get_status_display()}"
                              + (" (offline model)" if run.offline else ""))
            self.stdout.write(f"Merge request {mr.branch} → {mr.base_branch}: "
                              f"{mr.get_status_display()}")
            waiting = {"awaiting_plan_approval": "The plan waits for approval: open the run page "
                       "or rerun with --auto-approve-plan.",
                       "awaiting_merge_request": "The merge request waits for you: open the run "
                       "page, or rerun with --auto-merge.",
                       "awaiting_escalation": "The agents could not settle the change: open the "
                       "run page to decide."}
            if run.status in waiting:
                self.stdout.write(waiting[run.status] + f" /changes/{run.pk}/")
            if run.answer:
                self.stdout.write("\n" + run.answer)
            if run.error:
                self.stdout.write(self.style.ERROR(run.error))
            self.stdout.write(f"\nCost ${run.cost_usd:.4f}, {run.total_tokens:,} tokens, "
                              f"{run.calls} calls.")
        if run.status in ("failed", "budget_exceeded"):
            raise CommandError(run.error or run.get_status_display())

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
        if run.status == "awaiting_plan_approval":
            self.stdout.write("The plan waits for approval: open the run page, or rerun with --auto-approve.")
        if run.answer:
            self.stdout.write("\n" + run.answer)
        if run.error:
            self.stdout.write(self.style.ERROR(run.error))
        self.stdout.write(f"\nCost ${run.cost_usd:.4f}, {run.total_tokens:,} tokens, {run.calls} calls.")
