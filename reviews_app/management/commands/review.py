"""Review a change headlessly, for CI: the same pipeline as the web app, in this process.

    python manage.py review change.diff
    python manage.py review --git /repos/app main..feature --format sarif
    python manage.py review --github https://github.com/o/r/pull/7 --model style=gpt-4o-mini

Prints the export on stdout (progress, the commits of a git range and the files left
unexamined go to stderr). Exit status: 0 when the verdict is approve and every file was
examined, 1 when the verdict is request_changes or needs_discussion or part of the change was
left unexamined, 2 when the review could not be made (bad input, limit reached, every
reviewer failed).
"""

from __future__ import annotations

import sys
from pathlib import Path

from agents_app import engine
from agents_app.cli import (
    CheckedCommand,
    command_owner,
    form_type,
    parse_models,
)
from agents_app.patterns.base import Decision
from common.analyzers import runner as analyzers
from reviews_app import services
from reviews_app.forms import NewReviewForm
from reviews_app.models import Review
from reviews_app.pipeline import coverage, export
from reviews_app.pipeline.pattern import analyze

EXIT_APPROVE, EXIT_NOT_APPROVED, EXIT_ERROR = 0, 1, 2


class Command(CheckedCommand):
    help = "Review a diff, a local git range or a GitHub pull request and print the result."
    # Nothing here depends on the system checks (URLs, templates, admin): skipping them
    # saves a second at the command line.
    requires_system_checks: list[str] = []
    starts_runs = True

    def add_arguments(self, parser):
        src = parser.add_mutually_exclusive_group(required=True)
        src.add_argument("path", nargs="?", help="A .diff/.patch file, or - for stdin.")
        src.add_argument("--git", nargs=2, metavar=("REPO", "BASE..HEAD"),
                         help="A repository under QUORUM_REPO_ROOTS and a range.")
        src.add_argument("--github", metavar="URL", help="A GitHub pull request URL.")
        parser.add_argument("--format", choices=sorted(export.EXPORT_FORMATS),
                            default="markdown")
        parser.add_argument("--model", action="append", default=[], metavar="ROLE=NAME",
                            help="Model for a role (security, architecture, style, "
                                 "synthesizer). Repeatable.")
        parser.add_argument("--min-confidence", default=None, type=form_type(
            NewReviewForm.base_fields["min_confidence"], "a number from 0 to 1"),
            help="Drop findings below this confidence (0 to 1).")
        parser.add_argument("--sarif", action="append", default=[], metavar="FILE",
                            help="Another analyzer's results (SARIF 2.1.0: CodeQL, ESLint, "
                                 "gitleaks, Semgrep...) to use as evidence. Repeatable.")
        parser.add_argument("--no-rules", action="store_true",
                            help="Check no review rule (by default the owner's active rules "
                                 "are checked).")
        parser.add_argument("--user", default=None,
                            help="Owner of the review (default: first superuser, else 'cli').")

    def execute(self, *args, **options):
        self._ahead: analyzers.Ahead | None = None
        try:
            return super().execute(*args, **options)
        finally:
            if self._ahead is not None:
                self._ahead.close()

    def handle(self, *args, **opts):
        models = parse_models(opts["model"], services.ROLES, returncode=EXIT_ERROR)
        try:
            extra = self._imported(opts["sarif"])
            if opts["no_rules"]:
                extra = {**extra, "review_rules": []}
            inp = self._load(opts)
            prepared = services.prepare(inp)
            # The analyzers (the review's first stage) start now and run while the run is
            # created; the stage takes their report (``execute`` waits for them in any case).
            self._ahead = analyzers.start_ahead(analyze.inputs_of(prepared.files))
            run = services.start_review(command_owner(opts["user"]), inp, prepared,
                                        models=models, min_confidence=opts["min_confidence"],
                                        options=extra, enqueue=False)
        except services.InputError as exc:
            self.stderr.write(self.style.ERROR(str(exc)))
            sys.exit(EXIT_ERROR)
        self.stderr.write(f"Review {run.pk}: {len(prepared.files)} of {prepared.total_files} "
                          "file(s) to review.")
        self._commits(inp.meta)
        run = engine.run_inline(run.pk)
        if run.status == "awaiting_triage":
            # Headless: the verdict the pipeline proposes is the one reported.
            run = engine.decide(run, run.owner, run.stage_seq,
                                Decision(action="accept", author="manage.py review",
                                         feedback="Accepted automatically by manage.py "
                                                  "review (headless, no person triaged it)."),
                                enqueue=False)
            run = engine.run_inline(run.pk)
        review = Review.objects.select_related("run").get(run=run)
        if review.proposed_verdict:
            self.stdout.write(export.render(services.export_dict(review), opts["format"]))
        for name, r in (review.reviewers or {}).items():
            if r.get("error"):
                self.stderr.write(self.style.WARNING(f"{name} reviewer: {r['error']}"))
        if run.status != "completed":
            self.stderr.write(self.style.ERROR(f"The review ended as {run.status}: "
                                               f"{run.error or 'no verdict'}"))
            sys.exit(EXIT_ERROR)
        verdict = review.verdict
        left = coverage.unexamined(review.coverage)
        for c in left:
            detail = str(c.get("detail") or c["reason"]).removeprefix("Not reviewed: ")
            # Clipped lines and replaced bytes: the rest of that part was reviewed.
            said = "Reviewed in part" if c.get("reviewed") else "Not reviewed"
            self.stderr.write(self.style.WARNING(f"{said}: {_oneline(c['path'])}: "
                                                 f"{_oneline(detail)}"))
        self.stderr.write(f"Verdict: {verdict}. Cost ${run.cost_usd:.4f}, "
                          f"{run.total_tokens:,} tokens.")
        if left:
            self.stderr.write(self.style.ERROR(
                f"Incomplete review: {len(left)} part(s) of the change left unexamined."))
        sys.exit(EXIT_APPROVE if verdict == "approve" and not left else EXIT_NOT_APPROVED)

    def _commits(self, meta: dict) -> None:
        """The commits a git range covers, oldest first, as a pull request lists them."""
        commits = meta.get("commits") or []
        if not commits:
            return
        total = meta.get("commits_total") or len(commits)
        shown = f"{len(commits)} newest of {total}" if total > len(commits) else str(total)
        self.stderr.write(f"Commits in {meta.get('range', 'the range')} ({shown}):")
        for c in commits:
            self.stderr.write(f"  {c['short']} {_oneline(c['subject'])} "
                              f"({_oneline(c['author'])})")

    def _imported(self, paths: list[str]) -> dict:
        """``options`` carrying the imported SARIF evidence (none: no option)."""
        if not paths:
            return {}
        named = []
        for p in paths:
            path = Path(p)
            if not path.is_file():
                raise services.InputError(f"No such SARIF file: {_oneline(p)}")
            if error := services.too_big(_oneline(path.name), path.stat().st_size):
                raise error
            try:
                named.append((_oneline(path.name), path.read_bytes()))
            except OSError as exc:
                raise services.InputError(f"Cannot read {_oneline(p)}: "
                                          f"{_oneline(exc.strerror or exc)}") from None
        evidence, notes = services.imported_evidence(named)
        for note in notes:
            self.stderr.write(self.style.WARNING(_oneline(note)))
        return {"imported": evidence, "imported_notes": notes}

    def _load(self, opts) -> services.ReviewInput:
        if opts["git"]:
            return services.from_git(*opts["git"])
        if opts["github"]:
            return services.from_github(opts["github"])
        if opts["path"] == "-":
            return services.from_bytes(sys.stdin.buffer.read(), name="stdin")
        path = Path(opts["path"])
        if not path.is_file():
            raise services.InputError(f"No such file: {path}")
        if error := services.too_big(path.name, path.stat().st_size):
            raise error
        return services.from_bytes(path.read_bytes(), name=path.name)


def _oneline(text: str) -> str:
    """Untrusted text on one terminal line: control characters (escapes too) become spaces."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text))
