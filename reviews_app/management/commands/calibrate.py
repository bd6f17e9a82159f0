"""Calibrate the code review's reviewers on changes with known defects (issue 34).

    python manage.py calibrate --user alice
    python manage.py calibrate --user alice --set my-cases.jsonl --models security=gpt-4o
    python manage.py calibrate --user alice --json

Every case of the set becomes a review of that user, run to its end in this process with the
models given (the built-in offline model for every role unless ``--models`` says otherwise),
listed in their history; then the scorecard of the batch is printed: per reviewer role and
model, recall with its Wilson 95% interval, false positives per clean diff, cost per true
finding and what no other reviewer found, and the precision of the user's own triage.

Exit status: 0 when every case was reviewed, 1 when a case could not start or its review
failed (each is named), 2 when nothing was run because of what was given (an unknown user,
a bad set or case, an unknown role or model, a daily cap that cannot fit the set).
"""

from __future__ import annotations

import json
import sys

from agents_app.cli import CheckedCommand, bad_input, command_owner
from reviews_app import services
from reviews_app.calibration import cases, report, runner

EXIT_OK, EXIT_INCOMPLETE = 0, 1


class Command(CheckedCommand):
    help = ("Run a calibration set (changes with known defects, and clean ones) through the "
            "code review as the user's reviews and print each reviewer's scorecard.")
    requires_system_checks: list[str] = []
    starts_runs = True

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, metavar="NAME",
                            help="Whose reviews the cases become (and whose triage gives "
                                 "the precision).")
        parser.add_argument("--set", default=cases.STARTER_NAME, metavar="starter|PATH",
                            help="The set: 'starter' (the default, shipped with Quorum), a "
                                 "folder of NAME.json + NAME.diff cases, or a .jsonl file.")
        parser.add_argument("--models", nargs="+", action="extend", default=[],
                            metavar="ROLE=MODEL",
                            help="A model for a role (security, architecture, style, checker, "
                                 "verifier, synthesizer); the others use the offline model.")
        parser.add_argument("--json", action="store_true", help="Print the scorecard as JSON.")
        parser.add_argument("--details", action="store_true",
                            help="Also list every case: what was found, missed and not "
                                 "examined.")

    def handle(self, *args, **opts):
        user = command_owner(opts["user"])
        try:
            models = runner.parse_models(opts["models"])
        except runner.BadModels as exc:
            raise bad_input(str(exc)) from None
        try:
            case_set = cases.load(opts["set"])
        except cases.CaseError as exc:
            raise bad_input(str(exc)) from None
        self._check_fits(case_set, models)
        self.stderr.write(f"Calibrating on {len(case_set.cases)} case(s) of "
                          f"{case_set.label!r} as {user.get_username()}…")
        batch = runner.run_set(user, case_set, models, progress=self._progress)
        card = runner.scorecard(user, batch.id)
        errors = [{"case": name, "error": why} for name, why in batch.errors]
        if opts["json"]:
            self.stdout.write(json.dumps({**(card or {}), "not_started": errors}, indent=2,
                                         default=str))
        elif card is not None:
            self.stdout.write("\n".join(report.lines(card, details=opts["details"])))
        for e in errors:
            self.stderr.write(self.style.ERROR(f"Not started: {e['case']}: {e['error']}"))
        if errors or (card and card["failed"]):
            sys.exit(EXIT_INCOMPLETE)

    def _check_fits(self, case_set: cases.CaseSet, models: dict[str, str]) -> None:
        """Every case within this installation's review limits, and the daily caps able to
        take the whole set, before any run is made."""
        for case in case_set.cases:
            try:
                services.prepare(services.from_text(case.diff_text))
            except services.InputError as exc:
                raise bad_input(f"case {case.name}: diff: {_oneline(exc)}") from None
        try:
            services.check_daily_limits(models)
        except services.InputError as exc:
            raise bad_input(_oneline(exc)) from None
        remaining = services.daily_usage()["remaining"]
        if remaining is not None and remaining < len(case_set.cases):
            raise bad_input(f"The daily review limit leaves {remaining} review(s) today; the "
                            f"set has {len(case_set.cases)} cases. Raise "
                            "QUORUM_REVIEW_DAILY_LIMIT or use a smaller set.")

    def _progress(self, i: int, case: cases.Case, run, error: str) -> None:
        what = (f"run {run.pk}, {run.status}" if run is not None else f"not started: {error}")
        self.stderr.write(f"[{i}] {case.name}: {_oneline(what)}")


def _oneline(text: object) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in str(text))
