"""Replay a run from its journal and say whether it did the same (issue 33)."""

from __future__ import annotations

import json
import sys

from agents_app.cli import CheckedCommand, bad_input
from agents_app.forking import cli
from agents_app.forking.create import ForkRefused, create_fork
from agents_app.forking.report import replay_lines, replay_outcome, run_brief


class Command(CheckedCommand):
    help = ("Replay a finished run in this process: every model call is served from its "
            "journal (no provider call), and the replay stops at the first request that "
            "differs. Says how many calls were replayed and made, and whether it ended in the "
            "same state as the run or where it diverged (exit status 1).")
    requires_system_checks: list[str] = []
    starts_runs = True

    def add_arguments(self, parser):
        parser.add_argument("run", metavar="RUN", help="The run to replay (its number).")
        parser.add_argument("--user", default=None,
                            help="Whose run it is (default: first superuser, else 'cli').")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args, **opts):
        user = cli.command_user(opts["user"])
        original = cli.owned_run(opts["run"], user)
        cli.pattern_of(original)
        if not original.is_terminal:
            raise bad_input(f"Run {original.pk} has not ended "
                            f"({original.get_status_display().lower()}): a replay repeats a "
                            "finished run; fork it instead (manage.py fork).")
        try:
            replay = create_fork(original, user, kind="replay", enqueue=False)
        except ForkRefused as exc:
            raise bad_input(cli.one_line(str(exc))) from None
        replay = cli.drive(replay.pk)
        outcome = replay_outcome(original, replay)
        if opts["json"]:
            self.stdout.write(json.dumps({"run": replay.pk, "url": replay.get_absolute_url(),
                                          "original": run_brief(original),
                                          "status": replay.status, "error": replay.error,
                                          **outcome.as_dict()}, indent=2))
        else:
            for line in replay_lines(original, replay, outcome):
                self.stdout.write(line)
        if not outcome.same:
            sys.exit(1)
