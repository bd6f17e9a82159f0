"""Compare runs stage by stage (issue 33): two runs' diff, or three to six side by side."""

from __future__ import annotations

import json

from agents_app.cli import CheckedCommand, bad_input
from agents_app.forking import cli
from agents_app.forking.diff import compare, side_by_side
from agents_app.forking.report import columns_dict, columns_lines, diff_dict, diff_lines
from agents_app.forking.stages import stages

MOST = 6


class Command(CheckedCommand):
    help = ("Compare runs stage by stage. Two runs: each stage same or different, with its "
            "prompt, reply, output and decision diffs and the token, cost and latency deltas, "
            "the first divergence marked. Three to six: side by side on the first run's "
            "stages.")
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("runs", nargs="+", metavar="RUN",
                            help="Two to six runs (their numbers).")
        parser.add_argument("--user", default=None,
                            help="Whose runs they are (default: first superuser, else 'cli').")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args, **opts):
        given = opts["runs"]
        if not 2 <= len(given) <= MOST:
            raise bad_input(f"compare takes two to six runs; {len(given)} given.")
        ids = [cli.run_id(text) for text in given]
        twice = next((pk for i, pk in enumerate(ids) if pk in ids[:i]), None)
        if twice is not None:
            raise bad_input(f"Run {twice} is given twice.")
        user = cli.command_user(opts["user"])
        runs = [cli.owned_run(text, user) for text in given]
        records = []
        for run in runs:
            recs = stages(run)
            if not recs:
                raise bad_input(f"Run {run.pk} has no recorded stages to compare (it was made "
                                "before forks existed).")
            records.append(recs)
        if len(runs) == 2:
            a, b = runs
            diff = compare(records[0], records[1], (f"run {a.pk}", f"run {b.pk}"))
            if opts["json"]:
                self.stdout.write(json.dumps(diff_dict(diff, a, b), indent=2, default=str))
            else:
                self.stdout.write("\n".join(diff_lines(diff, a, b)))
            return
        columns, first = side_by_side(records)
        if opts["json"]:
            self.stdout.write(json.dumps(columns_dict(columns, first, runs), indent=2,
                                         default=str))
        else:
            self.stdout.write("\n".join(columns_lines(columns, first, runs)))
