"""The pairwise judge between two cells of an experiment (issue 34), once its grid has ended:
for every task and repetition both cells completed, the judge reads the two answers in both
orders; when the orders disagree it is a tie, and the share of such disagreements is the
judge's position-bias rate, shown with the verdicts. Run outside any transaction (the judge
calls a model); claimed first with a conditional update, so two deliveries judge once."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from ..models import Experiment, ExperimentStatus, Status

log = logging.getLogger("quorum.experiments")


def pending(experiment: Experiment) -> bool:
    return bool(experiment.spec.get("pairwise")) and \
        experiment.status == ExperimentStatus.COMPLETED and not experiment.pairwise


def judge(experiment_id: int) -> bool:
    """Judge the experiment's two cells if it has ended and nobody has; True when it did."""
    experiment = Experiment.objects.filter(pk=experiment_id).first()
    if experiment is None or not pending(experiment):
        return False
    with transaction.atomic():
        claimed = Experiment.objects.filter(
            pk=experiment_id, status=ExperimentStatus.COMPLETED, pairwise={}).update(
            pairwise={"state": "judging"})
    if not claimed:
        return False
    experiment = Experiment.objects.get(pk=experiment_id)
    spec = experiment.spec["pairwise"]
    try:
        verdicts = _verdicts(experiment, spec)
        result = {"state": "done", "verdicts": verdicts}
    except Exception as exc:  # the judge's own failure is shown, never a silent blank
        log.exception("experiment %s: the pairwise judge failed", experiment_id)
        result = {"state": "done", "verdicts": [], "error": f"{type(exc).__name__}: {exc}"}
    Experiment.objects.filter(pk=experiment_id).update(pairwise=result)
    return True


def _verdicts(experiment: Experiment, spec: dict[str, Any]) -> list[dict[str, Any]]:
    from ..engine.journal import gateway_config
    from ..llm.gateway import Gateway
    from .evaluators import pairwise

    cells = {c.index + 1: c for c in experiment.cells.all()}
    a_cell, b_cell = (cells[n] for n in spec["cells"])
    runs: dict[tuple[int, int, int], Any] = {}
    for run in experiment.runs.filter(cell__in=[a_cell, b_cell], status=Status.COMPLETED
                                      ).select_related("item"):
        runs[(run.cell_id, run.item_id, run.repetition)] = run
    client = Gateway(gateway_config({"judge": spec.get("model") or "offline/default"}))
    out = []
    for (cell_id, item_id, rep), a in sorted(runs.items(), key=lambda kv: kv[0][1:]):
        if cell_id != a_cell.pk or (b := runs.get((b_cell.pk, item_id, rep))) is None:
            continue
        verdict = pairwise(spec["rubric"], a.task, a.answer or "", b.answer or "",
                           client=client)
        out.append({"task": a.item.key if a.item else str(item_id), "repetition": rep,
                    "a_run": a.pk, "b_run": b.pk, **verdict.as_dict()})
    return out


def summary(experiment: Experiment) -> dict[str, Any] | None:
    """Wins, losses, ties, failures and the position-bias rate, for the page and exports."""
    spec = experiment.spec.get("pairwise")
    if not spec:
        return None
    data = experiment.pairwise or {}
    verdicts = data.get("verdicts") or []
    judged = [v for v in verdicts if v.get("winner") is not None]
    cells = {c.index + 1: c.label for c in experiment.cells.all()}
    return {"state": data.get("state", "waiting"), "error": data.get("error", ""),
            "rubric": spec["rubric"], "model": spec.get("model", ""),
            "a": cells.get(spec["cells"][0], "?"), "b": cells.get(spec["cells"][1], "?"),
            "a_wins": sum(1 for v in judged if v["winner"] == "a"),
            "b_wins": sum(1 for v in judged if v["winner"] == "b"),
            "ties": sum(1 for v in judged if v["winner"] == "tie"),
            "failed": len(verdicts) - len(judged),
            "position_bias": (sum(1 for v in judged if not v["consistent"]) / len(judged)
                              if judged else None),
            "verdicts": verdicts}
