"""An experiment's results, read from its runs and their evaluations (issue 34): per cell the
mean ± sd and 95% bootstrap interval of score, cost, tokens and latency, with every run that
failed or could not be scored counted and named (never averaged in as a zero); per task the
pass rate over the repetitions and whether all passed, flaky tasks listed; and, against a
baseline experiment, the paired difference per cell with a regression only where its interval
excludes zero. Computed on read: a 900-run grid is a few thousand rows."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..models import TERMINAL, Evaluation, Experiment, Status
from . import stats


@dataclass
class RunRow:
    id: int
    cell: int
    item: int | None
    repetition: int
    status: str
    cost: float
    tokens: int
    seconds: float | None
    error: str
    score: float | None = None  # the mean of its evaluators' values
    passed: bool | None = None  # every evaluator passed (None: not scored)
    unscored: list[str] = field(default_factory=list)  # evaluators that could not score
    shared_calls: int = 0  # calls of the stages it shares with another cell's run


@dataclass
class CellResult:
    id: int
    index: int
    label: str
    pattern: str
    models: dict[str, str]
    planned: int
    runs: list[RunRow]
    score: stats.Summary
    cost: stats.Summary
    tokens: stats.Summary
    latency: stats.Summary
    failed: list[RunRow]
    unscored: list[RunRow]
    running: int
    pass_rate: float | None
    shared_calls: int = 0
    difference: stats.Difference | None = None

    @property
    def ended(self) -> int:
        return sum(1 for r in self.runs if r.status in TERMINAL)

    @property
    def regression(self) -> bool:
        d = self.difference
        return bool(d and d.excludes_zero and d.high is not None and d.high < 0)

    @property
    def improvement(self) -> bool:
        d = self.difference
        return bool(d and d.excludes_zero and d.low is not None and d.low > 0)


@dataclass
class TaskResult:
    id: int
    key: str
    task: str
    rates: list[float | None]  # per cell: passed ÷ scored repetitions
    all_passed: list[bool | None]
    flaky: bool

    @property
    def pairs(self) -> list[tuple[float | None, bool | None]]:
        return list(zip(self.rates, self.all_passed, strict=True))


@dataclass
class Results:
    experiment: Experiment
    cells: list[CellResult]
    tasks: list[TaskResult]
    total_runs: int
    ended: int
    cost: float
    baseline: Experiment | None = None

    @property
    def flaky(self) -> list[TaskResult]:
        return [t for t in self.tasks if t.flaky]

    @property
    def regressions(self) -> list[CellResult]:
        return [c for c in self.cells if c.regression]


def run_rows(experiment: Experiment) -> list[RunRow]:
    rows = {}
    for r in experiment.runs.values("id", "cell_id", "item_id", "repetition", "status",
                                    "cost_usd", "prompt_tokens", "completion_tokens",
                                    "created_at", "finished_at", "error", "fork"):
        seconds = ((r["finished_at"] - r["created_at"]).total_seconds()
                   if r["finished_at"] else None)
        # A run that forked another cell's run counts the stages it shares (their cost and
        # tokens), so cells compare whole runs; its time is its own stages' only.
        shared = (r["fork"] or {}).get("shared") or {}
        rows[r["id"]] = RunRow(r["id"], r["cell_id"], r["item_id"], r["repetition"] or 0,
                               r["status"],
                               float(r["cost_usd"] or 0) + float(shared.get("cost") or 0),
                               (r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)
                               + int(shared.get("tokens") or 0),
                               seconds, r["error"] or "", shared_calls=int(shared.get("calls")
                                                                           or 0))
    values: dict[int, list[float]] = defaultdict(list)
    passes: dict[int, list[bool]] = defaultdict(list)
    for e in Evaluation.objects.filter(run__experiment=experiment).values(
            "run_id", "evaluator", "kind", "value", "passed", "error"):
        row = rows.get(e["run_id"])
        if row is None:
            continue
        if e["value"] is None:
            row.unscored.append(f"{e['kind']} #{e['evaluator'] + 1}: {e['error'] or 'no score'}")
            continue
        values[row.id].append(e["value"])
        passes[row.id].append(bool(e["passed"]))
    for row in rows.values():
        if values[row.id]:
            row.score = statistics.fmean(values[row.id])
            row.passed = all(passes[row.id]) and not row.unscored
    return sorted(rows.values(), key=lambda r: r.id)


def compute(experiment: Experiment, *, with_baseline: bool = True) -> Results:
    cells = list(experiment.cells.all())
    items = list(experiment.dataset.items.values("id", "key", "task"))
    rows = run_rows(experiment)
    by_cell: dict[int, list[RunRow]] = defaultdict(list)
    for r in rows:
        by_cell[r.cell].append(r)
    per_cell_runs = len(items) * experiment.repetitions
    out_cells = []
    for c in cells:
        runs = by_cell[c.pk]
        ended = [r for r in runs if r.status in TERMINAL]
        completed = [r for r in ended if r.status == Status.COMPLETED]
        scored = [r for r in completed if r.score is not None]
        judged = [r for r in scored if r.passed is not None]
        out_cells.append(CellResult(
            id=c.pk, index=c.index, label=c.label, pattern=c.pattern, models=c.models_used,
            planned=per_cell_runs, runs=runs,
            score=stats.summarize([r.score for r in scored if r.score is not None]),
            cost=stats.summarize([r.cost for r in ended]),
            tokens=stats.summarize([r.tokens for r in ended]),
            latency=stats.summarize([r.seconds for r in completed if r.seconds is not None]),
            failed=[r for r in ended if r.status != Status.COMPLETED],
            unscored=[r for r in completed if r.score is None or r.unscored],
            running=len(runs) - len(ended),
            pass_rate=(sum(1 for r in judged if r.passed) / len(judged)) if judged else None,
            shared_calls=sum(r.shared_calls for r in runs)))
    tasks = []
    index = {c.pk: i for i, c in enumerate(cells)}
    grid: dict[int, list[list[RunRow]]] = {i["id"]: [[] for _ in cells] for i in items}
    for r in rows:
        if r.item in grid and r.cell in index:
            grid[r.item][index[r.cell]].append(r)
    for i in items:
        rates, alls, flaky = [], [], False
        for runs in grid[i["id"]]:
            judged = [r for r in runs if r.passed is not None]
            if not judged:
                rates.append(None)
                alls.append(None)
                continue
            n = sum(1 for r in judged if r.passed)
            rates.append(n / len(judged))
            alls.append(n == len(judged) == experiment.repetitions)
            flaky = flaky or 0 < n < len(judged)
        tasks.append(TaskResult(i["id"], i["key"], i["task"], rates, alls, flaky))
    result = Results(experiment, out_cells, tasks, total_runs=experiment.planned_runs,
                     ended=sum(c.ended for c in out_cells),
                     cost=sum(r.cost for r in rows))
    if with_baseline and experiment.baseline_id:
        baseline = Experiment.objects.filter(pk=experiment.baseline_id,
                                             owner_id=experiment.owner_id).first()
        if baseline is not None:
            compare_with(result, baseline)
    return result


def _scores_by_task(experiment: Experiment) -> dict[str, dict[str, list[float]]]:
    """cell label → task key → the scores of its runs of that task."""
    keys = dict(experiment.dataset.items.values_list("id", "key"))
    labels = dict(experiment.cells.values_list("id", "label"))
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in run_rows(experiment):
        if r.score is not None and r.item in keys:
            out[labels[r.cell]][keys[r.item]].append(r.score)
    return out


def compare_with(result: Results, baseline: Experiment) -> None:
    """Each cell against the baseline's cell of the same label, paired by task key."""
    result.baseline = baseline
    ours = _scores_by_task(result.experiment)
    theirs = _scores_by_task(baseline)
    for cell in result.cells:
        if cell.label in theirs:
            cell.difference = stats.paired_difference(ours.get(cell.label, {}),
                                                      theirs[cell.label])


def as_dict(result: Results) -> dict[str, Any]:
    """Everything the page shows, for the JSON export and ``manage.py experiment``."""
    e = result.experiment
    return {
        "experiment": {"id": e.pk, "name": e.name, "status": e.status, "note": e.note,
                       "dataset": e.dataset_id, "repetitions": e.repetitions,
                       "planned_runs": result.total_runs, "ended_runs": result.ended,
                       "cost_usd": round(result.cost, 8),
                       "baseline": result.baseline.pk if result.baseline else None},
        "cells": [{
            "index": c.index, "label": c.label, "pattern": c.pattern, "models": c.models,
            "planned": c.planned, "ended": c.ended, "running": c.running,
            "pass_rate": c.pass_rate, "score": c.score.as_dict(), "cost_usd": c.cost.as_dict(),
            "tokens": c.tokens.as_dict(), "latency_s": c.latency.as_dict(),
            "failed": [{"run": r.id, "status": r.status, "error": r.error[:500]}
                       for r in c.failed],
            "unscored": [{"run": r.id, "why": r.unscored or ["no evaluator scored it"]}
                         for r in c.unscored],
            "shared_calls": c.shared_calls,
            "against_baseline": c.difference.as_dict() if c.difference else None,
            "regression": c.regression,
        } for c in result.cells],
        "tasks": [{"key": t.key, "task": t.task, "pass_rates": t.rates,
                   "all_passed": t.all_passed, "flaky": t.flaky} for t in result.tasks],
        "flaky_tasks": [t.key for t in result.flaky],
        "pairwise": _pairwise(e),
        "regressions": [c.label for c in result.regressions],
    }


CSV_HEADER = ["run", "cell", "label", "pattern", "task_key", "repetition", "status", "score",
              "passed", "cost_usd", "tokens", "seconds", "unscored", "error"]


def csv_rows(experiment: Experiment):
    """One line per run: the export of everything the tables summarise."""
    labels = {c.pk: (c.index, c.label, c.pattern) for c in experiment.cells.all()}
    keys = dict(experiment.dataset.items.values_list("id", "key"))
    yield CSV_HEADER
    for r in run_rows(experiment):
        index, label, pattern = labels.get(r.cell, (None, "", ""))
        yield [r.id, index, label, pattern, keys.get(r.item, ""), r.repetition, r.status,
               "" if r.score is None else f"{r.score:.6f}",
               "" if r.passed is None else str(r.passed).lower(), f"{r.cost:.8f}", r.tokens,
               "" if r.seconds is None else f"{r.seconds:.3f}", " | ".join(r.unscored),
               r.error[:500]]


def _pairwise(experiment: Experiment) -> dict[str, Any] | None:
    from .pairwise import summary

    return summary(experiment)
