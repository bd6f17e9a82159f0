"""Experiments on the database (issue 34): saving datasets, checking a grid against the app
(patterns, options, models, evaluators), forecasting its cost from the history, launching it,
starting its runs a few at a time as earlier ones end, scoring each run when it ends, and
stopping it (done, cancelled, or over its budget).

Durability: an experiment's runs are ordinary runs, one per (cell, item, repetition) — a
unique constraint — so a top-up that is redelivered, raced by another worker or repeated by
the sweeper after a restart adds nothing twice, and a run lost with its worker is recovered
by the engine's own sweeper like any other. A top-up holds the experiment's row lock for a few
inserts only; scoring (a model judge may call a provider) happens outside any transaction."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Avg, Count, Sum
from django.utils import timezone

from ..llm.gateway import check_model_name
from ..models import (
    RUNNABLE,
    TERMINAL,
    Cell,
    Dataset,
    DatasetItem,
    Evaluation,
    Experiment,
    ExperimentStatus,
    Run,
    Status,
)
from ..patterns import PATTERNS, task_patterns
from .datasets import Row
from .spec import GridSpec, SpecError

log = logging.getLogger("quorum.experiments")


# --- datasets ------------------------------------------------------------------------------
def save_dataset(owner, name: str, rows: list[Row], *, source: str = "upload",
                 description: str = "") -> Dataset:
    with transaction.atomic():
        dataset = Dataset.objects.create(owner=owner, name=name.strip()[:200], source=source,
                                         description=description)
        DatasetItem.objects.bulk_create([
            DatasetItem(dataset=dataset, position=i, key=r.key, task=r.task,
                        reference=r.reference, expected_findings=r.expected_findings,
                        checks=r.checks) for i, r in enumerate(rows)])
    return dataset


def dataset_from_runs(owner, name: str, run_ids: list[int]) -> Dataset:
    """A dataset of the tasks of runs picked in the history (their answers as references)."""
    runs = list(Run.objects.filter(owner=owner, pk__in=run_ids).order_by("id"))
    if len(runs) != len(set(run_ids)):
        raise SpecError("Some of those runs are not yours or do not exist.")
    rows = [Row(key=f"run-{r.pk}", task=r.task, reference=r.answer or "") for r in runs]
    if not rows:
        raise SpecError("Pick at least one run.")
    return save_dataset(owner, name, rows, source="history")


# --- the grid ------------------------------------------------------------------------------
@dataclass
class PlannedCell:
    index: int
    pattern: str
    options: dict[str, Any]
    models: dict[str, str]
    label: str


def plan_cells(spec: GridSpec, skipped: list[str] | None = None) -> list[PlannedCell]:
    """The grid's cells, each checked: a pattern one can start from a task, options its own
    model accepts, a model for every role it calls, every model a name the gateway knows. A
    cell identical to an earlier one is left out and described in ``skipped``."""
    known = {p.name: p for p in task_patterns()}
    cells: list[PlannedCell] = []
    skipped = [] if skipped is None else skipped
    for p in spec.patterns:
        pattern = known.get(p.name)
        if pattern is None:
            other = " (it is not started from a task)" if p.name in PATTERNS else ""
            raise SpecError(f"Unknown pattern {p.name!r}{other}. Patterns: "
                            f"{', '.join(sorted(known))}.")
        unknown = sorted(set(p.options) - set(pattern.options.model_fields))
        if unknown:  # a pattern ignores keys it does not know; a grid says so instead
            raise SpecError(f"{p.name} has no option {', '.join(map(repr, unknown))}. Its "
                            f"options: {', '.join(sorted(pattern.options.model_fields)) or 'none'}.")
        try:
            options = pattern.check_options(p.options, headless=True)
        except Exception as exc:  # pydantic's ValidationError, in words
            from pydantic import ValidationError

            from ..patterns.options import first_error

            if not isinstance(exc, ValidationError):
                raise
            field, message = first_error(exc)
            raise SpecError(f"{p.name} option {field or '?'}: {message}") from None
        roles = pattern.roles_used(options)
        for a in spec.assignments:
            models = a.for_roles(roles)
            missing = [r for r in roles if r not in models]
            if missing:
                raise SpecError(f"Assignment {a.name()!r} has no model for {p.name}'s "
                                f"{', '.join(missing)} (name it, or give \"*\").")
            for model in set(models.values()):
                if problem := check_model_name(model):
                    raise SpecError(f"Assignment {a.name()!r}: {problem}")
            label = f"{p.label or pattern.label} · {a.name()}"
            same = next((c for c in cells if (c.pattern, c.options, c.models)
                         == (pattern.name, options, models)), None)
            if same is not None:
                # An assignment that changes only roles this pattern does not have: the same
                # cell twice would be the same runs twice. Left out, and said.
                skipped.append(f"{label} (the same models as {same.label}: {pattern.label} "
                               f"has none of the roles it changes)")
                continue
            cells.append(PlannedCell(len(cells), pattern.name, options, models, label))
    return cells


def check_evaluators(spec: GridSpec, items: list[DatasetItem] | list[Row]) -> None:
    if not spec.evaluators and not any(item.checks for item in items):
        return
    from .evaluators import EvaluatorError, parse_specs

    try:
        parse_specs(spec.evaluators)
    except EvaluatorError as exc:
        raise SpecError(f"Evaluators: {exc}") from None
    for item in items:
        if item.checks:
            try:
                parse_specs(item.checks)
            except EvaluatorError as exc:
                raise SpecError(f"Task {item.key}'s checks: {exc}") from None


def forecast(owner, cells: list[PlannedCell], runs_per_cell: int) -> tuple[Decimal | None, list]:
    """The cost to expect, from the owner's finished runs of the same pattern and models: per
    cell the mean cost of those runs × its runs; a cell with no such history is "unknown"
    (offline models cost nothing and need no history)."""
    from ..llm.runtime import OFFLINE_MODELS

    total, rows, unknown = Decimal(0), [], False
    for c in cells:
        if all(m in OFFLINE_MODELS for m in c.models.values()):
            rows.append((c.label, Decimal(0), 0))
            continue
        history = Run.objects.filter(owner=owner, pattern=c.pattern, models_used=c.models,
                                     status=Status.COMPLETED)
        seen = history.aggregate(n=Count("id"), mean=Avg("cost_usd"))
        if not seen["n"]:
            rows.append((c.label, None, 0))
            unknown = True
            continue
        each = Decimal(str(seen["mean"]))
        rows.append((c.label, each * runs_per_cell, seen["n"]))
        total += each * runs_per_cell
    return (None if unknown else total), rows


def launch(owner, dataset: Dataset, spec: GridSpec, *, enqueue: bool = True,
           nonce: str = "", team=None) -> Experiment:
    items = list(dataset.items.all())
    skipped: list[str] = []
    cells = plan_cells(spec, skipped)
    spec.check_size(len(items), cells=len(cells))
    check_evaluators(spec, items)
    if spec.pairwise is not None:
        if max(spec.pairwise.cells) > len(cells):
            raise SpecError(f"pairwise.cells: the grid has {len(cells)} cells, numbered from 1.")
        if problem := check_model_name(spec.pairwise.model):
            raise SpecError(f"pairwise.model: {problem}")
    baseline = None
    if spec.baseline is not None:
        baseline = Experiment.objects.filter(owner=owner, pk=spec.baseline).first()
        if baseline is None:
            raise SpecError(f"No experiment {spec.baseline} of yours to compare with.")
        if baseline.spec.get("evaluators", []) != spec.model_dump(mode="json")["evaluators"]:
            raise SpecError(f"baseline: experiment {baseline.pk} was scored by other "
                            "evaluators; a difference would measure the yardstick, not the "
                            "runs. Use the same evaluators.")
    runs_per_cell = len(items) * spec.repetitions
    total, _ = forecast(owner, cells, runs_per_cell)
    try:
        with transaction.atomic():
            experiment = _create(owner, dataset, spec, nonce, skipped, total, baseline, cells,
                                 runs_per_cell, team)
    except IntegrityError:  # the same form, sent twice at once: the one the other made
        made = Experiment.objects.filter(owner=owner, nonce=nonce[:64]).first()
        if made is None or not nonce:
            raise
        return made
    top_up(experiment.pk, enqueue=enqueue)
    return experiment


def _create(owner, dataset: Dataset, spec: GridSpec, nonce: str, skipped: list[str],
            total: Decimal | None, baseline: Experiment | None, cells: list[PlannedCell],
            runs_per_cell: int, team=None) -> Experiment:
    experiment = Experiment.objects.create(
        owner=owner, team=team, name=spec.name, dataset=dataset, nonce=nonce[:64],
        spec={**spec.model_dump(mode="json"), "skipped_cells": skipped},
        repetitions=spec.repetitions, budget_usd=spec.budget_usd, forecast_usd=total,
        baseline=baseline, planned_runs=len(cells) * runs_per_cell)
    Cell.objects.bulk_create([
        Cell(experiment=experiment, index=c.index, pattern=c.pattern, options=c.options,
             models_used=c.models, label=c.label[:300]) for c in cells])
    return experiment


def spent(experiment: Experiment) -> Decimal:
    return experiment.runs.aggregate(s=Sum("cost_usd"))["s"] or Decimal(0)


def top_up(experiment_id: int, *, enqueue: bool = True) -> int:
    """Start runs until ``concurrency`` are in flight (or every slot has its run); end the
    experiment when every run has ended, or stop it when its spending reached its budget.
    Returns how many runs it started."""

    started = 0
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().filter(pk=experiment_id).first()
        if experiment is None or experiment.is_finished:
            return 0
        spec = experiment.spec
        so_far = spent(experiment)
        if experiment.budget_usd is not None and so_far > 0 and so_far >= experiment.budget_usd:
            _stop(experiment, ExperimentStatus.BUDGET_STOPPED,
                  f"It spent its budget of ${experiment.budget_usd}; the runs not yet "
                  "started were not started.")
            return 0
        in_flight = experiment.runs.exclude(status__in=TERMINAL).count()
        room = int(spec.get("concurrency", 8)) - in_flight
        taken = {(c, i, r): (pk, status) for c, i, r, pk, status in experiment.runs.values_list(
            "cell_id", "item_id", "repetition", "id", "status")}
        missing = 0
        if room > 0 or in_flight == 0:
            cells = list(experiment.cells.all())
            leads = lead_cells(cells) if spec.get("share_stages", True) else {}
            items = list(experiment.dataset.items.all())
            for rep in range(1, experiment.repetitions + 1):
                for item in items:
                    for cell in cells:
                        if (cell.pk, item.pk, rep) in taken:
                            continue
                        missing += 1
                        if started >= room:
                            continue
                        lead = leads.get(cell.pk)
                        source = taken.get((lead.pk, item.pk, rep)) if lead else None
                        if lead is not None and (source is None or source[1] not in TERMINAL):
                            continue  # its shared stages are still being run by the lead
                        if _start(experiment, cell, item, rep, lead, source, enqueue):
                            started += 1
        if missing == 0 and in_flight == 0:
            finished = experiment.runs.filter(status__in=TERMINAL).count()
            _stop(experiment, ExperimentStatus.COMPLETED,
                  f"All {finished} runs ended.")
    return started


def lead_cells(cells: list[Cell]) -> dict[int, Cell]:
    """cell id → the cell whose runs it forks: the first cell of the same pattern and options
    whose models differ from its own in some role (a cell identical to another runs on its
    own: sharing everything would measure nothing)."""
    out: dict[int, Cell] = {}
    first: dict[str, Cell] = {}
    for cell in cells:
        key = f"{cell.pattern}:{json.dumps(cell.options, sort_keys=True)}"
        lead = first.setdefault(key, cell)
        if lead is not cell and differing_roles(lead, cell):
            out[cell.pk] = lead
    return out


def differing_roles(a: Cell, b: Cell) -> set[str]:
    roles = set(a.models_used) | set(b.models_used)
    return {r for r in roles if a.models_used.get(r) != b.models_used.get(r)}


def _start(experiment: Experiment, cell: Cell, item: DatasetItem, rep: int,
           lead: Cell | None, source: tuple[int, str] | None, enqueue: bool) -> bool:
    """Start the run of one slot: a fork of the lead cell's run of the same task and
    repetition from the first stage a differing role called (the stages before it are not
    run again), else a run of its own. False when another top-up made it meanwhile."""
    from .. import engine
    from ..forking.create import ForkRefused, create_fork

    labels = {"experiment": experiment, "cell": cell, "item": item, "repetition": rep}
    try:
        with transaction.atomic():
            point = None
            if lead is not None and source is not None and source[1] == Status.COMPLETED:
                lead_run = Run.objects.get(pk=source[0])
                point = shared_until(lead_run, differing_roles(lead, cell))
            if point is not None:
                seq, shared = point
                try:
                    create_fork(lead_run, experiment.owner, seq=seq, enqueue=enqueue,
                                models={r: m for r, m in cell.models_used.items()
                                        if lead.models_used.get(r) != m},
                                note=f"Experiment {experiment.pk}: the stages before stage "
                                     f"{seq} are those of cell {lead.index + 1}'s run.",
                                extra={"shared": shared}, **labels)
                    return True
                except ForkRefused as exc:
                    log.info("experiment %s: cell %s runs on its own (%s)", experiment.pk,
                             cell.index, exc)
            engine.create_run(experiment.owner, cell.pattern, item.task, options=cell.options,
                              models=cell.models_used, enqueue=enqueue,
                              team=experiment.team, **labels)
            return True
    except IntegrityError:  # another top-up made it meanwhile
        return False


def shared_until(run: Run, roles: set[str]) -> tuple[int, dict[str, Any]] | None:
    """Where a fork of ``run`` for other models of ``roles`` starts — the checkpoint of the
    first stage that called one of them — and what the stages before it cost (counted in the
    fork's figures, so cells compare whole runs). None when none of them was called."""
    from ..models import Checkpoint, ModelCall

    first = ModelCall.objects.filter(run=run, role__in=roles).order_by("id").first()
    if first is None:
        return None
    cp = Checkpoint.objects.filter(run=run, stage=first.stage, gate="").order_by("seq").first()
    if cp is None or cp.seq == 0:
        return None
    before = ModelCall.objects.filter(run=run, id__lt=first.pk).aggregate(
        n=Count("id"), cost=Sum("cost_usd"), p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    return cp.seq, {"calls": before["n"] or 0, "cost": str(before["cost"] or 0),
                    "tokens": (before["p"] or 0) + (before["c"] or 0)}


def _stop(experiment: Experiment, status: str, note: str) -> None:
    Experiment.objects.filter(pk=experiment.pk).update(status=status, note=note,
                                                       finished_at=timezone.now())
    if status != ExperimentStatus.COMPLETED:
        # Its runs still going stop at their next stage (the engine's own cancel).
        from ..engine import cancels

        going = experiment.runs.exclude(status__in=TERMINAL)
        cancels.told(going.values_list("pk", flat=True))
        going.update(cancel_requested=True)


def cancel(experiment: Experiment) -> bool:
    with transaction.atomic():
        locked = Experiment.objects.select_for_update().get(pk=experiment.pk)
        if locked.is_finished:
            return False
        _stop(locked, ExperimentStatus.CANCELLED, "Cancelled by its owner.")
    from .. import engine

    for run in experiment.runs.filter(status__in=[*RUNNABLE, *waiting_statuses()]):
        engine.cancel(run, experiment.owner)
    return True


def waiting_statuses() -> list[str]:
    return [s for s in Status.values if s.startswith("awaiting_")]


# --- the end of a run -----------------------------------------------------------------------
def run_ended(run_id: int, *, enqueue: bool = True) -> None:
    """A run of an experiment ended: score it (outside any transaction: a judge may call a
    model), then start the next runs."""
    run = Run.objects.filter(pk=run_id, experiment__isnull=False).select_related(
        "item", "experiment").first()
    if run is None:
        return
    score_run(run)
    top_up(run.experiment_id, enqueue=enqueue)
    from . import pairwise

    pairwise.judge(run.experiment_id)  # once the grid has ended, when it asks for one


def evaluators_for(run: Run) -> list[dict[str, Any]]:
    own = list(run.experiment.spec.get("evaluators", []))
    return own + list(run.item.checks if run.item else [])


def score_run(run: Run) -> list[Evaluation]:
    """Each evaluator's score of ``run`` (once: a redelivered end scores nothing twice). A run
    that did not complete is not scored — it is counted as failed where the results are."""
    raw = evaluators_for(run)
    if run.status != Status.COMPLETED or not raw:
        return []
    from .evaluators import EvaluatorError, evaluate, parse_specs

    done = set(run.evaluations.values_list("evaluator", flat=True))
    try:
        specs = parse_specs(raw)
    except EvaluatorError as exc:  # checked at launch; a spec that broke since is named
        return [Evaluation.objects.get_or_create(run=run, evaluator=0, defaults={
            "kind": "invalid", "error": str(exc)})[0]]
    item = {"task": run.task, "reference": run.item.reference if run.item else "",
            "expected_findings": run.item.expected_findings if run.item else []}
    out = []
    for index, spec in enumerate(specs):
        if index in done:
            continue
        client = judge_client(run, spec) if spec.kind == "judge" else None
        try:
            score = evaluate(spec, output=run.answer or "", item=item, client=client)
        except Exception as exc:  # an evaluator's own failure is named, never a zero
            log.exception("run %s: evaluator %s failed", run.pk, index)
            score = None
            error = f"{type(exc).__name__}: {exc}"
        else:
            error = score.error
        try:
            with transaction.atomic():
                out.append(Evaluation.objects.create(
                    run=run, evaluator=index, kind=spec.kind,
                    value=score.value if score else None,
                    passed=bool(score and score.passed),
                    detail=(score.detail if score else "")[:20_000], error=error[:2000],
                    calls=score.calls if score else 0))
        except IntegrityError:
            continue  # scored by another delivery meanwhile
    return out


def judge_client(run: Run, spec) -> Any:
    """The model client a judge evaluator calls: the engine's gateway with the judge's model
    (the spec's, else the experiment's "judge" model, else the offline model), its calls
    logged like every other call."""
    from ..engine.journal import gateway_config
    from ..llm.gateway import Gateway

    model = getattr(spec, "model", "") or run.experiment.spec.get("judge_model") or \
        "offline/default"
    return Gateway(gateway_config({getattr(spec, "role", "judge"): model}))


def sweep_experiments() -> int:
    """Top up every running experiment (the beat, every minute): a run's end whose message
    was lost, or a worker restarted mid-grid, delays the grid by a minute at most."""
    started = 0
    for pk in Experiment.objects.filter(status=ExperimentStatus.RUNNING).values_list(
            "pk", flat=True):
        # Runs that ended without being scored (their end's task was lost) are scored first.
        for run in Run.objects.filter(experiment_id=pk, status=Status.COMPLETED,
                                      evaluations__isnull=True).select_related(
                                          "item", "experiment")[:200]:
            score_run(run)
        started += top_up(pk)
    from . import pairwise

    for pk in Experiment.objects.filter(status=ExperimentStatus.COMPLETED, pairwise={}
                                        ).values_list("pk", flat=True):
        pairwise.judge(pk)  # only those that ask for a pairwise judge
    return started


def run_here(experiment: Experiment) -> bool:
    """Run every run of ``experiment`` in this process, one at a time, the way a worker would:
    each run's end scores it and starts the next (``manage.py experiment run --here``, the
    benchmark). True when the grid ended; False when what is left waits for a person."""
    from ..engine import experiment_hooks
    from ..forking.cli import drive

    experiment_hooks.ANNOUNCE = False  # this loop scores and tops up itself
    while True:
        pending = list(experiment.runs.filter(status__in=RUNNABLE).values_list("pk",
                                                                              flat=True))
        if not pending:
            started = top_up(experiment.pk, enqueue=False)
            experiment.refresh_from_db()
            if experiment.is_finished:
                return True
            if not started:
                return False
            continue
        for pk in pending:
            if drive(pk).is_terminal:
                run_ended(pk, enqueue=False)
