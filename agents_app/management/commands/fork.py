"""Fork a run from one of its stages, as the run page's fork form does (issue 33)."""

from __future__ import annotations

import json
import sys

from agents_app.cli import CheckedCommand, bad_input, parse_models
from agents_app.forking import cli
from agents_app.forking.create import GATE_POLICIES, ForkRefused, create_fork
from agents_app.forking.stages import gate_name
from agents_app.management.commands.run_pattern import option
from agents_app.models import ModelCall, Run, Status
from agents_app.patterns import PATTERNS
from agents_app.trace import stage_label

KINDS = ("fork", "again", "continue", "retry")  # a replay has its own command
FAILED = (Status.FAILED, Status.BUDGET_EXCEEDED)


class Command(CheckedCommand):
    help = ("Fork a run from one of its stages: the stages before it are not run again; the "
            "fork may change a role's model, edit what the stage starts from and set how its "
            "gates are decided. Prints the new run's number and page.")
    requires_system_checks: list[str] = []
    starts_runs = True
    stealth_options = ("stdin",)  # call_command(..., stdin=...), as createsuperuser takes it

    def add_arguments(self, parser):
        parser.add_argument("run", metavar="RUN", help="The run to fork (its number).")
        parser.add_argument("--from", dest="stage", metavar="STAGE", default=None,
                            help="The stage the fork starts from: its number, or its name as "
                                 "`manage.py compare` and the trace show it (plan:1, "
                                 "gate:plan_approval, \"Step 2 of plan v1\"). Required for "
                                 "--kind fork and retry.")
        parser.add_argument("--kind", choices=KINDS, default="fork",
                            help="fork (the default): from --from, with the changes given; "
                                 "again: the same task, options and models from the start; "
                                 "continue: a run stopped by its budget or failed at a stage, "
                                 "from where it stopped (raise --max-cost or --max-tokens); "
                                 "retry: from --from, as it was.")
        parser.add_argument("--model", action="append", default=[], metavar="ROLE=MODEL",
                            help="Another model for a role, e.g. --model executor=gpt-4o. "
                                 "Repeatable.")
        parser.add_argument("--edit", metavar="FILE", default=None,
                            help="A JSON object (a file, or - for standard input) that edits "
                                 "what the stage starts from, checked by the pattern before "
                                 "anything is saved; at a Plan-and-Execute plan gate: "
                                 "{\"steps\": [...]}.")
        gates = parser.add_mutually_exclusive_group()
        gates.add_argument("--gates", choices=GATE_POLICIES, default=None,
                           help="How every gate of the fork is decided: ask you again (the "
                                "default), reuse the original decision when what is decided "
                                "is the same, or approve.")
        gates.add_argument("--gate", action="append", default=[], metavar="GATE=POLICY",
                           help="How one gate is decided (ask, reuse or approve). Repeatable.")
        parser.add_argument("--max-cost", type=option("max_cost_usd", "an amount in USD"),
                            default=None, metavar="USD",
                            help="Cost budget of the fork (default: the run's).")
        parser.add_argument("--max-tokens", type=option("max_tokens"), default=None,
                            metavar="N", help="Token budget of the fork (default: the run's).")
        parser.add_argument("--wait", action="store_true",
                            help="Run the fork in this process until it waits for you or ends "
                                 "(exit status 1 if it failed); otherwise the worker runs it.")
        parser.add_argument("--user", default=None,
                            help="Whose run it is (default: first superuser, else 'cli').")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args, **opts):
        user = cli.command_user(opts["user"])
        parent = cli.owned_run(opts["run"], user)
        pattern = cli.pattern_of(parent)
        kind = opts["kind"]
        seq = None
        if kind in ("fork", "retry"):
            if opts["stage"] is None:
                raise bad_input(f"--from is required for --kind {kind}: give a stage number or "
                                "name (`manage.py compare` lists a run's stages).")
            seq = cli.resolve_stage(parent, opts["stage"])
        elif opts["stage"] is not None:
            where = "the start" if kind == "again" else "the stage where the run stopped"
            raise bad_input(f"--from: --kind {kind} starts from {where}; leave --from out.")
        models = parse_models(opts["model"], pattern.roles)
        edits = None
        if opts["edit"] is not None:
            if kind != "fork":
                raise bad_input(f"--edit: --kind {kind} runs the stage as it was; an edit "
                                "makes a fork (--kind fork).")
            edits = cli.read_edit(opts["edit"], opts.get("stdin") or sys.stdin)
            assert seq is not None
            cli.check_edit(parent, seq, edits, user.get_username())
        gates = cli.gate_policies(pattern, opts["gates"], opts["gate"])
        try:
            run = create_fork(parent, user, seq=seq, kind=kind, edits=edits,
                              models=models or None, gates=gates or None,
                              max_cost_usd=opts["max_cost"], max_tokens=opts["max_tokens"],
                              enqueue=not opts["wait"])
        except ForkRefused as exc:
            raise bad_input(cli.one_line(str(exc))) from None
        if opts["wait"]:
            run = cli.drive(run.pk)
        else:
            run.refresh_from_db()
        self._report(parent, run, waited=opts["wait"], as_json=opts["json"])
        if opts["wait"] and run.status in FAILED:
            sys.exit(1)

    def _report(self, parent: Run, run: Run, *, waited: bool, as_json: bool) -> None:
        fork = run.fork or {}
        name = gate_name(fork["gate"]) if fork.get("gate") else fork.get("stage", "")
        label = f"Gate: {fork['gate'].replace('_', ' ')}" if fork.get("gate") else \
            stage_label(run.pattern, fork.get("stage", ""))
        own = ModelCall.objects.filter(run=run)
        replayed = own.filter(replayed_from__isnull=False).count()
        made = own.count() - replayed
        result = {"run": run.pk, "url": run.get_absolute_url(), "kind": fork.get("kind"),
                  "forked_from": parent.pk, "seq": run.fork_seq, "stage": name, "label": label,
                  "status": run.status, "models": fork.get("models", {}),
                  "gates": fork.get("gates", {}), "edited": bool(fork.get("edits")),
                  "waited": waited}
        if waited:
            result.update({"answer": run.answer, "error": run.error,
                           "calls": {"made": made, "replayed": replayed},
                           "cost_usd": float(run.cost_usd), "tokens": run.total_tokens})
        if as_json:
            self.stdout.write(json.dumps(result, indent=2))
            return
        what = {"fork": "a fork", "again": "run again", "continue": "a continuation",
                "retry": "a retry"}.get(fork.get("kind", ""), "a fork")
        head = f"Run {run.pk}: {what} of run {parent.pk} from stage {run.fork_seq} ({label})"
        if not waited:
            state = ("waiting for you" if run.is_waiting else
                     run.get_status_display().lower() if run.is_terminal else
                     "queued for the worker (or add --wait to run it here)")
            self.stdout.write(f"{head}, {state}.")
            self.stdout.write(run.get_absolute_url())
            return
        self.stdout.write(f"{head}: {run.get_status_display()}.")
        self.stdout.write(run.get_absolute_url())
        if run.is_waiting:
            pattern = PATTERNS.get(run.pattern)
            said = (pattern.gate_message(run.gate) if pattern else None) or "Waiting for you."
            self.stdout.write(f"{said} Open the run page to decide.")
        if run.answer:
            self.stdout.write("\n" + run.answer)
        if run.error:
            self.stdout.write(self.style.ERROR(run.error))
        self.stdout.write(f"\nModel calls: {made} made, {replayed} served from the journal; "
                          f"${run.cost_usd:.4f}, {run.total_tokens:,} tokens.")
