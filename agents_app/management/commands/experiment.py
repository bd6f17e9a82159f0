"""Run an experiment from a TOML specification, or show one (issue 34). The exit status
gates CI: 1 when a cell is worse than its baseline beyond noise (the 95% interval of the
paired difference is below zero), 2 on bad input, 0 otherwise."""

from __future__ import annotations

import json
import logging
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.db import transaction

from agents_app.cli import CheckedCommand, bad_input, command_owner
from agents_app.converters import MAX_ID
from agents_app.experiments import results as res
from agents_app.experiments import service
from agents_app.experiments.datasets import MAX_BYTES, DatasetError, parse
from agents_app.experiments.spec import SpecError, parse_spec
from agents_app.models import Dataset, Experiment, ExperimentStatus
from agents_app.patterns import PATTERNS


def example() -> str:
    """A specification to start from, with the first two patterns one starts from a task."""
    from agents_app.patterns import task_patterns

    first, second = (p.name for p in task_patterns()[:2])
    return f"""\
name = "two patterns, two assignments"
dataset = "tasks.jsonl"          # a file next to this one (JSONL or CSV), or dataset_id = 3
repetitions = 5
# baseline = 12                  # an earlier experiment to compare with (exit 1: worse)
evaluators = [{{ kind = "regex", pattern = "\\\\w+" }}, {{ kind = "exact" }}]
gates = {{ plan_approval = "approve" }}
concurrency = 8
# budget_usd = 5
# pairwise = {{ cells = [1, 2], rubric = "Which answer is more correct and complete?" }}

[[patterns]]
name = "{first}"
[[patterns]]
name = "{second}"
# options = {{ max_rounds = 2 }}

[[assignments]]
models = {{ "*" = "offline/default" }}
[[assignments]]
label = "brief"
models = {{ "*" = "offline/default", executor = "offline/brief" }}
"""


class Command(CheckedCommand):
    help = ("Run an experiment from a TOML specification (`run SPEC`), or show one (`show "
            "ID`). Prints the table of cells with 95% intervals; exits 1 when a cell is worse "
            "than the baseline's beyond noise, 2 on bad input.")
    requires_system_checks: list[str] = []
    starts_runs = True

    def add_arguments(self, parser):
        parser.add_argument("action", choices=("run", "show", "example"),
                            help="run SPEC: launch it; show ID: its results; example: print a "
                                 "specification to start from")
        parser.add_argument("target", nargs="?", default=None, metavar="SPEC|ID")
        parser.add_argument("--user", default=None,
                            help="Whose experiment it is (default: the first superuser, as "
                                 "for run_pattern).")
        parser.add_argument("--here", action="store_true",
                            help="Run every run in this process instead of the workers (no "
                                 "worker needed; one run at a time).")
        parser.add_argument("--no-wait", action="store_true",
                            help="Launch and return at once (the workers run it).")
        parser.add_argument("--timeout", type=float, default=3600.0,
                            help="Seconds to wait for the workers (default 3600).")
        parser.add_argument("--json", action="store_true", help="Print JSON, not a table.")

    def handle(self, *args, **opts):
        self.verbosity = int(opts.get("verbosity", 1))
        if opts["action"] == "example":
            self.stdout.write(example())
            return
        if not opts["target"]:
            needs = "a SPEC file" if opts["action"] == "run" else "an ID"
            raise bad_input(f"{opts['action']} needs {needs}.")
        if opts["user"] is not None and not opts["user"].strip():
            raise bad_input("--user: a username.")
        owner = command_owner(opts["user"])
        if not (opts["timeout"] > 0 and opts["timeout"] <= 7 * 24 * 3600):  # NaN too
            raise bad_input("--timeout: seconds, more than 0 and at most a week.")
        if opts["action"] == "show":
            if not (opts["target"].isascii() and opts["target"].isdigit()
                    and len(opts["target"]) <= 19):
                raise bad_input(f"{opts['target']!r} is not an experiment number.")
            experiment = Experiment.objects.filter(pk=int(opts["target"]), owner=owner).first()
            if experiment is None:
                raise bad_input(f"No experiment {opts['target']} of {owner}.")
        else:
            experiment = self._launch(owner, Path(opts["target"]), here=opts["here"])
            if opts["here"]:
                self._run_here(experiment)
            elif not opts["no_wait"]:
                self._wait(experiment, opts["timeout"])
        experiment.refresh_from_db()
        result = res.compute(experiment)
        if opts["json"]:
            self.stdout.write(json.dumps(res.as_dict(result), indent=2))
        else:
            self.stdout.write(table(result))
        if result.regressions:
            sys.exit(1)

    def _launch(self, owner, path: Path, *, here: bool) -> Experiment:
        raw = read_file(path, MAX_SPEC_BYTES, "the specification")
        try:
            data: dict[str, Any] = tomllib.loads(raw.decode("utf-8-sig"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise bad_input(f"{path} is not TOML: {exc}.") from None
        except RecursionError:
            raise bad_input(f"{path} nests too deeply.") from None
        dataset_path = data.pop("dataset", None)
        dataset_id = data.pop("dataset_id", None)
        if dataset_path is not None and dataset_id is not None:
            raise bad_input("Give dataset (a file) or dataset_id, not both.")
        if dataset_path is not None and (not isinstance(dataset_path, str) or "\x00" in
                                         dataset_path):
            raise bad_input("dataset: a file's path, as text.")
        if dataset_id is not None and (isinstance(dataset_id, bool)
                                       or not isinstance(dataset_id, int)
                                       or not 1 <= dataset_id <= MAX_ID):
            raise bad_input("dataset_id: a dataset's number.")
        if here:
            data["concurrency"] = 1
        try:
            spec = parse_spec(data)
            if here:
                waiting = sorted({g for p in spec.patterns if p.name in PATTERNS
                                  for g in PATTERNS[p.name].gates
                                  if spec.gates.get(g, "wait") == "wait"})
                if waiting:
                    raise SpecError("--here runs every run in this command, so nobody can "
                                    "decide a gate: set gates = { " + ", ".join(
                                        f'{g} = "approve"' for g in waiting) + " } (or "
                                    "\"reject\"), or leave out --here and decide them on "
                                    "their pages.")
            # A new dataset and its experiment are saved together, or neither is.
            with transaction.atomic():
                if dataset_path is not None:
                    file = (path.parent / str(dataset_path))
                    raw_rows = read_file(file, MAX_BYTES, "dataset")
                    rows = parse(raw_rows, file.name, max_task=settings.QUORUM_MAX_TASK_CHARS)
                    dataset = service.save_dataset(owner, f"{spec.name} ({file.name})", rows)
                elif dataset_id is not None:
                    dataset = Dataset.objects.filter(pk=dataset_id, owner=owner).first()
                    if dataset is None:
                        raise SpecError(f"dataset_id: no dataset {dataset_id} of {owner}.")
                else:
                    raise SpecError("dataset: give a file (dataset = \"tasks.jsonl\") or "
                                    "dataset_id = N.")
                return service.launch(owner, dataset, spec, enqueue=not here)
        except (SpecError, DatasetError) as exc:
            raise bad_input(str(exc)) from None
        except OSError as exc:
            raise bad_input(f"dataset: {exc.strerror or exc}.") from None

    def _run_here(self, experiment: Experiment) -> None:
        if self.verbosity < 2:  # a line per model call would bury the table
            logging.getLogger("quorum").setLevel(logging.WARNING)
        if not service.run_here(experiment):
            self.stderr.write("Some runs wait for a person at a gate: decide them on their "
                              "pages, or set gates = { <gate> = \"approve\" }.")

    def _wait(self, experiment: Experiment, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            experiment.refresh_from_db()
            if experiment.status != ExperimentStatus.RUNNING:
                return
            time.sleep(1.0)
        raise CommandError(f"Experiment {experiment.pk} did not finish in {timeout:.0f} s; "
                           f"see `manage.py experiment show {experiment.pk}`.", returncode=2)


MAX_SPEC_BYTES = 1024 * 1024


def read_file(path: Path, limit: int, what: str) -> bytes:
    """A regular file's bytes, at most ``limit`` of them; bad input (exit 2) otherwise — a
    folder, a pipe or a device is never read (a FIFO would wait for ever, /dev/zero fill
    memory)."""
    try:
        if not path.exists():
            raise bad_input(f"{what}: {path}: No such file or directory.")
        if not path.is_file():
            raise bad_input(f"{what}: {path} is not a file.")
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise bad_input(f"{what}: {path}: {getattr(exc, 'strerror', None) or exc}.") from None
    if len(data) > limit:
        raise bad_input(f"{what}: {path} is over {limit:,} bytes.")
    return data


def plain(text: object) -> str:
    """Text for a terminal: a control character (an escape sequence's start) is a space."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text))


def fmt(s, digits: int) -> str:
    if s.mean is None:
        return "—"
    text = f"{s.mean:.{digits}f}"
    if s.low is not None:
        text += f" [{s.low:.{digits}f}, {s.high:.{digits}f}]"
    return text


def table(result: res.Results) -> str:
    e = result.experiment
    lines = [f"Experiment {e.pk} · {plain(e.name)} · {e.get_status_display()} · "
             f"{result.ended} of {result.total_runs} runs ended · ${result.cost:.4f}"]
    if e.note:
        lines.append(plain(e.note))
    head = ["cell", "runs", "score [95%]", "pass", "cost/run [95%]", "latency s", "failed"]
    if result.baseline:
        head.append(f"vs experiment {result.baseline.pk}")
    rows = [head]
    for c in result.cells:
        row = [plain(c.label), f"{c.ended}/{c.planned}", fmt(c.score, 3),
               "—" if c.pass_rate is None else f"{c.pass_rate:.2f}", fmt(c.cost, 5),
               fmt(c.latency, 1), str(len(c.failed) + len(c.unscored))]
        if result.baseline:
            d = c.difference
            if d is None:
                row.append("no such cell")
            elif d.low is None:
                row.append(f"{d.pairs} shared task(s): too few")
            else:
                verdict = ("REGRESSION" if c.regression else "better" if c.improvement
                           else "no difference beyond noise")
                row.append(f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}] {verdict}")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if result.flaky:
        lines.append("Flaky tasks (passed in some repetitions only): "
                     + ", ".join(plain(t.key) for t in result.flaky))
    from agents_app.experiments.pairwise import summary

    if (p := summary(e)) and p["state"] == "done":
        bias = "—" if p["position_bias"] is None else f"{p['position_bias']:.2f}"
        lines.append(f"Pairwise judge, {plain(p['a'])} (A) against {plain(p['b'])} (B): "
                     f"A {p['a_wins']}, B {p['b_wins']}, ties {p['ties']}, not judged "
                     f"{p['failed']}; position bias {bias}")
    if result.regressions:
        lines.append(f"{len(result.regressions)} cell(s) worse than the baseline beyond noise.")
    return "\n".join(lines) + "\n"
