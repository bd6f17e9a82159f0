"""The experiment pages (issue 34): datasets (upload, pick from the history, read), the
launch form with its preview (cells, runs, cost forecast), an experiment's page (progress
that follows the runs, the table with intervals, charts, exports, cancel) and the judge
prompts. Everything is the owner's: another user's dataset or experiment is a 404."""

from __future__ import annotations

import csv
import hashlib
import json

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from common.web import go

from .converters import MAX_ID
from .csvcells import cell
from .experiments import results as res
from .experiments import service
from .experiments.datasets import DatasetError, parse
from .experiments.forms import DatasetUploadForm, ExperimentForm
from .experiments.spec import SpecError, parse_spec
from .models import Dataset, Experiment
from .teams.access import can_manage, visible
from .teams.fields import chosen_team

ITEMS_SHOWN = 200


@login_required
@require_GET
def experiment_list(request):
    return render(request, "agents_app/experiments/list.html", {
        "experiments": visible(Experiment.objects, request.user).select_related(
            "dataset")[:200],
        "datasets": Dataset.objects.filter(owner=request.user)[:200]})


@login_required
@require_http_methods(["GET", "POST"])
def dataset_new(request):
    form = DatasetUploadForm(request.POST or None, request.FILES or None)
    error = ""
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            rows = parse(upload.read(), upload.name or "",
                         max_task=settings.QUORUM_MAX_TASK_CHARS)
        except DatasetError as exc:
            error = str(exc)
        else:
            dataset = service.save_dataset(request.user, form.cleaned_data["name"], rows)
            return go(request, dataset.get_absolute_url())
    status = 400 if request.method == "POST" else 200
    return render(request, "agents_app/experiments/dataset_new.html",
                  {"form": form, "error": error}, status=status)


@login_required
@require_POST
def dataset_from_history(request):
    """A dataset of the runs ticked in the history (the compare form's boxes)."""
    values = request.POST.getlist("runs")
    ids = sorted({int(v) for v in values if v.isascii() and v.isdigit() and len(v) <= 19
                  and int(v) <= MAX_ID})
    if len(ids) != len(set(values)):  # a value that is no run's number: refused, not dropped
        return render(request, "agents_app/experiments/dataset_new.html",
                      {"form": DatasetUploadForm(), "error": "Some of those are not run "
                       "numbers."}, status=400)
    name = (request.POST.get("name") or "").strip().replace("\x00", "")[:200] or \
        "Tasks picked from the history"
    try:
        dataset = service.dataset_from_runs(request.user, name, ids[:2000])
    except SpecError as exc:
        return render(request, "agents_app/experiments/dataset_new.html",
                      {"form": DatasetUploadForm(), "error": str(exc)}, status=400)
    return go(request, dataset.get_absolute_url())


@login_required
@require_GET
def dataset_detail(request, pk: int):
    dataset = get_object_or_404(Dataset, pk=pk, owner=request.user)
    items = list(dataset.items.all()[:ITEMS_SHOWN])
    return render(request, "agents_app/experiments/dataset_detail.html", {
        "dataset": dataset, "items": items, "count": dataset.items.count(),
        "experiments": dataset.experiments.filter(owner=request.user)})


@login_required
@require_http_methods(["GET", "POST"])
def experiment_new(request):
    initial = {}
    if request.GET.get("dataset", "").isdigit():
        initial["dataset"] = request.GET["dataset"]
    form = ExperimentForm(request.POST or None, owner=request.user, initial=initial)
    ctx: dict = {"form": form}
    if request.method == "POST":
        if form.is_valid():
            try:
                spec = parse_spec(form.spec_data())
                dataset = form.cleaned_data["dataset"]
                items = list(dataset.items.all())
                skipped: list[str] = []
                cells = service.plan_cells(spec, skipped)
                spec.check_size(len(items), cells=len(cells))
                service.check_evaluators(spec, items)
            except (SpecError, forms.ValidationError) as exc:
                ctx["error"] = exc.messages[0] if isinstance(exc, forms.ValidationError) \
                    else str(exc)
            else:
                runs_per_cell = len(items) * spec.repetitions
                if request.POST.get("action") == "launch":
                    nonce = form.cleaned_data.get("nonce") or ""
                    done = Experiment.objects.filter(owner=request.user, nonce=nonce
                                                     ).first() if nonce else None
                    # Sent twice (a double click, a resubmitted page): the one it made.
                    if done is not None and {k: v for k, v in done.spec.items()
                                             if k != "skipped_cells"} \
                            != spec.model_dump(mode="json"):
                        ctx["error"] = (f"This form was launched already, as experiment "
                                        f"{done.pk}, with other settings. Open a new form to "
                                        "launch another.")
                        return render(request, "agents_app/experiments/new.html", ctx,
                                      status=409)
                    try:
                        experiment = done or service.launch(request.user, dataset, spec,
                                                            nonce=nonce,
                                                            team=chosen_team(form))
                    except SpecError as exc:
                        ctx["error"] = str(exc)
                        return render(request, "agents_app/experiments/new.html", ctx,
                                      status=400)
                    return go(request, experiment.get_absolute_url())
                total, rows = service.forecast(request.user, cells, runs_per_cell)
                ctx["preview"] = {"cells": cells, "runs": len(cells) * runs_per_cell,
                                  "per_cell": runs_per_cell, "forecast": total,
                                  "forecast_rows": rows, "tasks": len(items),
                                  "skipped": skipped, "repetitions": spec.repetitions}
        status = 200 if "preview" in ctx else 400
        return render(request, "agents_app/experiments/new.html", ctx, status=status)
    return render(request, "agents_app/experiments/new.html", ctx)


def owned_experiment(request, pk: int) -> Experiment:
    """The experiment if the person may see it (its owner, its team's members); a POST
    (cancel) needs its owner while a member, or one of the team's approvers."""
    experiment = get_object_or_404(visible(Experiment.objects.select_related(
        "dataset", "baseline"), request.user), pk=pk)
    if request.method == "POST" and not can_manage(request.user, experiment):
        raise PermissionDenied("Only the team's approvers, or the person who started the "
                               "experiment, may cancel it.")
    return experiment


@login_required
@require_GET
def experiment_detail(request, pk: int):
    experiment = owned_experiment(request, pk)
    result = res.compute(experiment)
    from .experiments.pairwise import summary

    ctx = {"experiment": experiment, "result": result, "pairwise": summary(experiment),
           "spec_json": json.dumps(experiment.spec, indent=2),
           "chart_key": _chart_key(experiment, result)}
    if request.htmx and request.GET.get("part") == "progress":
        return render(request, "agents_app/experiments/detail.html#progress", ctx)
    return render(request, "agents_app/experiments/detail.html", ctx)


def _chart_key(experiment: Experiment, result: res.Results) -> str:
    """Changes whenever a run ends or is scored: the charts' URLs, so a browser reloads a
    chart only when its data changed."""
    text = f"{experiment.status}:{result.ended}:{sum(len(c.runs) for c in result.cells)}"
    text += ":" + ",".join(f"{c.score.mean}" for c in result.cells)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@login_required
@require_POST
def experiment_cancel(request, pk: int):
    experiment = owned_experiment(request, pk)
    service.cancel(experiment)
    return go(request, experiment.get_absolute_url())


CHARTS = ("cost_vs_score", "heatmap", "latency")


@login_required
@require_GET
def experiment_chart(request, pk: int, name: str):
    experiment = owned_experiment(request, pk)
    if name not in CHARTS:
        return HttpResponse(status=404)
    from .experiments import charts

    result = res.compute(experiment, with_baseline=False)
    if name == "cost_vs_score":
        svg = charts.cost_vs_score([{"label": c.label, "cost": c.cost.as_dict(),
                                     "score": c.score.as_dict()} for c in result.cells])
    elif name == "heatmap":
        svg = charts.heatmap([t.key for t in result.tasks], [c.label for c in result.cells],
                             [t.rates for t in result.tasks])
    else:
        svg = charts.latency([(c.label, [r.seconds for r in c.runs
                                         if r.seconds is not None and r.status == "completed"])
                              for c in result.cells])
    response = HttpResponse(svg, content_type="image/svg+xml")
    response["Cache-Control"] = "private, max-age=3600"
    # An SVG opened on its own is still a document: it may run and load nothing but its own
    # inline styles and its embedded colour bar (charts.SVG_CSP).
    response["Content-Security-Policy"] = charts.SVG_CSP
    return response


class _Echo:
    def write(self, value: str) -> str:
        return value


@login_required
@require_GET
def experiment_export(request, pk: int, fmt: str):
    experiment = owned_experiment(request, pk)
    if fmt == "json":
        body = json.dumps(res.as_dict(res.compute(experiment)), indent=2)
        response = HttpResponse(body, content_type="application/json")
    else:
        writer = csv.writer(_Echo())
        response = StreamingHttpResponse((writer.writerow([cell(v) for v in row])
                                          for row in res.csv_rows(experiment)),
                                         content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (f'attachment; filename="experiment-{experiment.pk}.'
                                       f'{fmt}"')
    return response


@login_required
@require_GET
def judge_prompts(request):
    from .experiments.evaluators import JUDGE_PROMPTS

    return render(request, "agents_app/experiments/prompts.html", {"prompts": JUDGE_PROMPTS})
