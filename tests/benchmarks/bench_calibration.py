"""Reviewer calibration: the starter set (or another) through the code review, scored per
reviewer role and model, as ``manage.py calibrate`` does (issue 34).

Each case becomes a review of a benchmark user on a temporary SQLite database (DEBUG=false),
made the way a pasted diff is and run to its end in this process
(``reviews_app.calibration.runner``); the scorecard is then read back from those runs and
printed as Markdown, with the wall time per case. Offline (the default), every role is the
built-in offline model, which restates the analyzers' results: the figures are those of the
analyzers as each reviewer lens presents them.

    .venv/bin/python tests/benchmarks/bench_calibration.py [--set starter|PATH]
        [--models ROLE=MODEL ...] [--json OUT] [--details]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EXIT_BAD_INPUT = 2


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="starter", metavar="starter|PATH",
                    help="The calibration set (default: the starter set).")
    ap.add_argument("--models", nargs="+", action="extend", default=[], metavar="ROLE=MODEL",
                    help="A model for a role; the others use the offline model.")
    ap.add_argument("--json", default=None, metavar="OUT", help="Also write the scorecard here.")
    ap.add_argument("--details", action="store_true", help="Also list every case.")

    def error(message):
        ap.exit(EXIT_BAD_INPUT, f"{ap.prog}: error: {message} (see --help)\n")

    ap.error = error
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from reviews_app.calibration import cases

    try:
        case_set = cases.load(args.set)
    except cases.CaseError as exc:
        print(f"bench_calibration: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = Path(args.json) if args.json else None
    if out is not None and not out.parent.is_dir():
        print(f"bench_calibration: error: --json: no folder {out.parent}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from tests.benchmarks.common import setup_django

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="quorum-bench-calibration-") as tmp:
        setup_django(Path(tmp), 6393, QUORUM_LOG_LEVEL="ERROR")
        from django.conf import settings

        # Nobody watches these runs live: events stay in the database, no Redis needed.
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
        import reviews_app
        from agents_app.models import Run
        from reviews_app.calibration import report, runner
        from tests.benchmarks.common import make_user

        try:
            models = runner.parse_models(args.models)
        except runner.BadModels as exc:
            print(f"bench_calibration: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        user = make_user()
        began = time.perf_counter()
        batch = runner.run_set(user, case_set, models)
        seconds = time.perf_counter() - began
        card = runner.scorecard(user, batch.id)
        tools: dict[str, str] = {}
        for state in Run.objects.filter(pk__in=batch.runs).values_list("state", flat=True):
            tools.update(((state or {}).get("analysis") or {}).get("tools") or {})
    print(f"# Reviewer calibration — {started}, {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, Quorum {reviews_app.__version__}")
    print(f"# {len(case_set.cases)} cases from {case_set.source} in {seconds:.1f} s "
          f"({seconds / max(len(case_set.cases), 1):.2f} s a case, each run to its end)")
    print("# analyzers that ran: " + (", ".join(f"{t} {v}" for t, v in sorted(tools.items()))
                                      or "none"))
    for name, why in batch.errors:
        print(f"# not started: {name}: {why}")
    if card is None:
        print("No case could be reviewed.")
        return 1
    print("\n".join(report.lines(card, details=args.details)))
    if out is not None:
        out.write_text(json.dumps({"date": started, "seconds": round(seconds, 2),
                                   "tools": tools, "scorecard": card}, indent=2, default=str)
                       + "\n", encoding="utf-8")
    return 0 if not batch.errors and not card["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
