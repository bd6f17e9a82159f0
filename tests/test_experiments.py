"""Experiments on the database (issue 34): a grid launched over a dataset makes one run per
(cell, task, repetition) — never two, whatever is redelivered — a few at a time; each run's
end scores it and starts the next; the gate policy decides gates and the decision records it;
the budget stops it; cancel stops it; results count every failure and are paired with a
baseline. Runs go through the real engine with the offline models."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents_app import engine
from agents_app.engine import experiment_hooks as hooks
from agents_app.experiments import results as res
from agents_app.experiments import service
from agents_app.experiments.datasets import Row
from agents_app.experiments.spec import SpecError, parse_spec
from agents_app.forking.cli import drive
from agents_app.models import RUNNABLE, Checkpoint, Experiment, Run

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = ["Collect the logs, then find the error.", "List three uses of a queue.",
         "Explain what a lease is, then give an example."]


@pytest.fixture(autouse=True)
def here(monkeypatch):
    """Runs stay off the broker: the test drives them and scores them itself."""
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)
    monkeypatch.setattr(hooks, "ANNOUNCE", False)


def dataset(user, n=3):
    return service.save_dataset(user, "tasks", [Row(key=f"t{i}", task=TASKS[i % 3],
                                                    reference="x") for i in range(n)])


def spec(**over):
    data = {"name": "grid", "patterns": [{"name": "plan_execute"}],
            "assignments": [{"models": {"*": "offline/default"}}], "repetitions": 2,
            "gates": {"plan_approval": "approve"}, "concurrency": 4}
    data.update(over)
    return parse_spec(data)


def finish(experiment: Experiment) -> Experiment:
    """Drive every run as a worker would: run it, then its end scores it and tops up."""
    service.run_here(experiment)
    experiment.refresh_from_db()
    return experiment

def test_a_grid_makes_one_run_per_slot_a_few_at_a_time_and_completes(alice):
    ds = dataset(alice)
    s = spec(assignments=[{"models": {"*": "offline/default"}},
                          {"label": "brief", "models": {"*": "offline/default",
                                                        "executor": "offline/brief"}}])
    experiment = service.launch(alice, ds, s, enqueue=False)
    assert experiment.planned_runs == 2 * 3 * 2 == 12
    assert experiment.cells.count() == 2 and experiment.runs.count() == 4  # concurrency 4
    # A top-up repeated (a redelivered message, the sweeper) adds nothing while 4 are going.
    assert service.top_up(experiment.pk, enqueue=False) == 0
    experiment = finish(experiment)
    assert experiment.status == "completed" and "All 12 runs ended" in experiment.note
    runs = list(experiment.runs.all())
    assert len(runs) == 12 and all(r.status == "completed" for r in runs)
    slots = {(r.cell_id, r.item_id, r.repetition) for r in runs}
    assert len(slots) == 12
    brief = experiment.cells.get(label__endswith="brief")
    assert {r.models_used["executor"] for r in runs if r.cell_id == brief.pk} == \
        {"offline/brief"}
    # Every plan gate was approved by the experiment's policy, and says so. The brief cell
    # differs only in the executor: its runs are forks of the first cell's run of the same
    # task and repetition from the first step, sharing the plan and its approval.
    decisions = Checkpoint.objects.filter(run__experiment=experiment,
                                          decision__isnull=False)
    assert decisions.count() == 6
    assert {d.decision["how"] for d in decisions} == {"experiment:approve"}
    lead = experiment.cells.exclude(pk=brief.pk).get()
    forks = [r for r in runs if r.cell_id == brief.pk]
    assert all(r.forked_from.cell_id == lead.pk and r.forked_from.item_id == r.item_id
               and r.forked_from.repetition == r.repetition for r in forks)
    from agents_app.models import ModelCall

    calls = ModelCall.objects.filter(run__experiment=experiment)
    assert calls.filter(role="planner").count() == 6  # once per task and repetition, not 12
    assert calls.filter(role="executor", run__cell=brief).count() == \
        calls.filter(role="executor", run__cell=lead).count()
    cell = {c.label: c for c in res.compute(experiment).cells}[brief.label]
    assert cell.shared_calls == 6  # the shared planner calls, counted in its figures
    assert service.top_up(experiment.pk, enqueue=False) == 0  # finished: nothing more


def test_a_slot_cannot_get_a_second_run(alice):
    from django.db import IntegrityError, transaction

    experiment = service.launch(alice, dataset(alice, 1), spec(repetitions=1), enqueue=False)
    run = experiment.runs.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        engine.create_run(alice, "plan_execute", "again", options={},
                          models={"planner": "offline/default"}, enqueue=False,
                          experiment=experiment, cell=run.cell, item=run.item,
                          repetition=run.repetition)


def test_wait_leaves_the_gate_to_a_person_and_reject_sends_the_note(alice):
    experiment = service.launch(alice, dataset(alice, 1),
                                spec(repetitions=1, gates={"plan_approval": "wait"}),
                                enqueue=False)
    run = drive(experiment.runs.get().pk)
    assert run.status == "awaiting_plan_approval"
    rejecting = service.launch(alice, dataset(alice, 1),
                               spec(repetitions=1, gates={"plan_approval": "reject"},
                                    reject_note="Add a step that checks the disk."),
                               enqueue=False)
    run = drive(rejecting.runs.get().pk)
    # Rejected once with the note; the revised plan is then approved (rejecting every
    # revision would loop for ever: found by hand, 127,594 plans in ten minutes).
    assert run.status == "completed", run.error
    first, second = (c.decision for c in Checkpoint.objects.filter(
        run=run, decision__isnull=False).order_by("seq"))
    assert (first["action"], first["how"]) == ("reject", "experiment:reject")
    assert first["feedback"] == "Add a step that checks the disk."
    assert (second["action"], second["how"]) == ("approve", "experiment:approve-after-reject")
    assert run.plan_versions.count() == 2


def test_the_budget_stops_the_grid_and_cancel_stops_it_too(alice):
    experiment = service.launch(alice, dataset(alice), spec(budget_usd=Decimal("0.01"),
                                                            concurrency=1), enqueue=False)
    Run.objects.filter(experiment=experiment).update(cost_usd=Decimal("0.02"))
    assert service.top_up(experiment.pk, enqueue=False) == 0
    experiment.refresh_from_db()
    assert experiment.status == "budget_stopped" and "budget" in experiment.note
    assert experiment.runs.count() == 1
    other = service.launch(alice, dataset(alice), spec(), enqueue=False)
    assert service.cancel(other) is True and service.cancel(other) is False
    other.refresh_from_db()
    assert other.status == "cancelled"
    assert not other.runs.filter(status__in=RUNNABLE).exclude(cancel_requested=True).exists()


@pytest.mark.parametrize("over,message", [
    ({"patterns": [{"name": "nope"}]}, "Unknown pattern 'nope'"),
    ({"patterns": [{"name": "plan_execute_review"}]}, "not started from a task"),
    ({"patterns": [{"name": "debate", "options": {"max_rounds": 999}}]}, "debate option"),
    ({"assignments": [{"models": {"planner": "offline/default"}}]}, "has no model for"),
    ({"assignments": [{"models": {"*": "no-such-provider/x"}}]}, "Assignment"),
    ({"repetitions": 0}, "repetitions"),
    ({"patterns": [{"name": "plan_execute"}] * 61}, "at most 60 items"),
    ({"patterns": [{"name": "debate", "options": {"max_round": 2}}]},
     "debate has no option 'max_round'"),
])
def test_a_grid_that_cannot_run_is_refused_and_nothing_is_saved(alice, over, message):
    ds = dataset(alice)
    with pytest.raises(SpecError) as exc:
        service.launch(alice, ds, spec(**over), enqueue=False)
    assert message in str(exc.value)
    assert Experiment.objects.count() == 0 and Run.objects.count() == 0


def test_results_count_failures_and_compare_with_a_baseline(alice):
    from agents_app.models import Evaluation

    ds = dataset(alice)
    base = finish(service.launch(alice, ds, spec(), enqueue=False))
    ours = finish(service.launch(alice, ds, spec(baseline=base.pk), enqueue=False))
    # Scores written by hand: the baseline passes everything, ours fails everything.
    for e, value in ((base, 1.0), (ours, 0.0)):
        for run in e.runs.all():
            Evaluation.objects.create(run=run, evaluator=0, kind="exact", value=value,
                                      passed=bool(value))
    failed = ours.runs.first()
    Run.objects.filter(pk=failed.pk).update(status="failed", error="boom")
    result = res.compute(ours)
    cell = result.cells[0]
    assert [r.id for r in cell.failed] == [failed.pk]
    assert cell.score.n == 5 and cell.score.mean == 0.0  # the failed run is not a zero
    assert cell.difference.pairs == 3 and cell.regression
    assert [c.label for c in result.regressions] == [cell.label]
    data = res.as_dict(result)
    assert data["cells"][0]["failed"][0]["error"] == "boom"
    assert data["regressions"] == [cell.label]
    rows = list(res.csv_rows(ours))
    assert rows[0] == res.CSV_HEADER and len(rows) == 1 + 6


def test_the_forecast_comes_from_the_history_of_the_same_pattern_and_models(alice):
    models = {"planner": "gpt-4o-mini", "executor": "gpt-4o-mini", "synthesizer": "gpt-4o-mini"}
    cells = [service.PlannedCell(0, "plan_execute", {}, models, "a cell")]
    total, rows = service.forecast(alice, cells, 10)
    assert total is None and rows[0][1] is None  # no history: unknown, not zero
    run = engine.create_run(alice, "plan_execute", "t", options={}, models=cells[0].models,
                            enqueue=False)
    Run.objects.filter(pk=run.pk).update(status="completed", cost_usd=Decimal("0.002"))
    total, rows = service.forecast(alice, cells, 10)
    assert total == Decimal("0.02") and rows[0][2] == 1
    offline = service.plan_cells(spec())
    assert service.forecast(alice, offline, 10)[0] == 0


def test_each_run_is_scored_once_by_every_evaluator_and_a_missing_reference_is_named(alice):
    from agents_app.models import Evaluation

    ds = service.save_dataset(alice, "t", [Row(key="a", task=TASKS[0], reference=""),
                                           Row(key="b", task=TASKS[1], reference="x")])
    s = spec(repetitions=1, evaluators=[{"kind": "regex", "pattern": r"\w+"},
                                        {"kind": "exact"}])
    experiment = finish(service.launch(alice, ds, s, enqueue=False))
    assert experiment.status == "completed"
    assert Evaluation.objects.filter(run__experiment=experiment).count() == 4
    for run in experiment.runs.all():  # a redelivered end scores nothing twice
        service.run_ended(run.pk, enqueue=False)
    assert Evaluation.objects.filter(run__experiment=experiment).count() == 4
    regex = Evaluation.objects.filter(run__experiment=experiment, kind="regex")
    assert all(e.value == 1.0 and e.passed for e in regex)
    no_reference = Evaluation.objects.get(run__item__key="a", kind="exact")
    assert no_reference.value is None and no_reference.error
    cell = res.compute(experiment).cells[0]
    assert [r.id for r in cell.unscored] == [no_reference.run_id]
    assert cell.score.n == 2  # the unscored evaluator is left out, the regex counts


def test_without_sharing_every_cell_runs_every_stage(alice):
    from agents_app.models import ModelCall

    s = spec(share_stages=False, assignments=[
        {"models": {"*": "offline/default"}},
        {"models": {"*": "offline/default", "executor": "offline/brief"}}])
    experiment = finish(service.launch(alice, dataset(alice), s, enqueue=False))
    assert experiment.status == "completed"
    assert not experiment.runs.filter(forked_from__isnull=False).exists()
    assert ModelCall.objects.filter(run__experiment=experiment, role="planner").count() == 12


def test_a_pairwise_judge_reads_two_cells_in_both_orders_once_the_grid_ends(alice):
    s = spec(repetitions=1, pairwise={"cells": [1, 2], "rubric": "Which is more complete?"},
             assignments=[{"models": {"*": "offline/default"}},
                          {"models": {"*": "offline/brief"}}])
    experiment = service.launch(alice, dataset(alice), s, enqueue=False)
    assert experiment.pairwise == {}
    experiment = finish(experiment)
    assert experiment.status == "completed"
    from agents_app.experiments import pairwise

    summary = pairwise.summary(experiment)
    assert summary["state"] == "done" and len(summary["verdicts"]) == 3
    assert summary["a_wins"] + summary["b_wins"] + summary["ties"] + summary["failed"] == 3
    assert all(v["calls"] == 2 for v in summary["verdicts"])  # both orders, each pair
    assert summary["position_bias"] is not None
    assert pairwise.judge(experiment.pk) is False  # judged once
    assert res.as_dict(res.compute(experiment))["pairwise"]["verdicts"]


@pytest.mark.parametrize("pw,message", [
    ({"cells": [1, 1], "rubric": "x"}, "two different cell numbers"),
    ({"cells": [1, 5], "rubric": "x"}, "the grid has 1 cells"),
    ({"cells": [1, 2], "rubric": ""}, "pairwise.rubric"),
])
def test_a_pairwise_judge_of_cells_that_do_not_exist_is_refused(alice, pw, message):
    with pytest.raises(SpecError) as exc:
        service.launch(alice, dataset(alice), spec(pairwise=pw), enqueue=False)
    assert message in str(exc.value) and Experiment.objects.count() == 0


def test_an_assignment_that_changes_no_role_of_a_pattern_makes_no_second_cell(alice):
    s = spec(patterns=[{"name": "plan_execute"}, {"name": "reflective"}],
             assignments=[{"models": {"*": "offline/default"}},
                          {"label": "brief", "models": {"*": "offline/default",
                                                        "executor": "offline/brief"}}])
    experiment = service.launch(alice, dataset(alice), s, enqueue=False)
    labels = list(experiment.cells.values_list("label", flat=True))
    assert len(labels) == 3 and not any(label.startswith("Reflective") and "brief" in label
                                        for label in labels)
    assert experiment.planned_runs == 3 * 3 * 2
    [skipped] = experiment.spec["skipped_cells"]
    assert "brief" in skipped and "has none of the roles it changes" in skipped


def test_a_baseline_scored_by_other_evaluators_is_refused(alice):
    ds = dataset(alice)
    base = service.launch(alice, ds, spec(evaluators=[{"kind": "exact"}]), enqueue=False)
    with pytest.raises(SpecError) as exc:
        service.launch(alice, ds, spec(baseline=base.pk, evaluators=[
            {"kind": "regex", "pattern": "x"}]), enqueue=False)
    assert "scored by other evaluators" in str(exc.value)
    assert Experiment.objects.count() == 1
