"""The usage page: cost and usage of the person's own runs over time, by pattern and by model,
as charts, as tables and as CSV."""

from __future__ import annotations

import csv

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .csvcells import cell
from .usage import CSV_TABLES, UNITS, UsageForm, chart_data, csv_rows, fit_unit, period_label, usage


def _settings(request):
    form = UsageForm(request.GET or None)
    start, end, unit, problems = form.settings()
    fitted = fit_unit(start, end, unit)
    notice = (f"{start} to {end} is too long to show by {unit}: shown by {fitted}."
              if fitted != unit else "")
    return form, start, end, fitted, problems, notice


@login_required
@require_GET
def usage_page(request):
    form, start, end, unit, problems, notice = _settings(request)
    tables = usage(request.user, start, end, unit)
    for p in tables["over_time"]:
        p["label"] = period_label(p["period"], unit)
    query = f"from={start}&to={end}&by={unit}"
    return render(request, "agents_app/usage.html", {
        "form": form, "start": start, "end": end, "unit": unit, "units": UNITS,
        "problems": problems, "notice": notice, "query": query, "charts": chart_data(tables, unit),
        **tables})


@login_required
@require_GET
def usage_csv(request):
    table = request.GET.get("table") or "over_time"
    if table not in CSV_TABLES:
        return HttpResponse(f"Unknown table: choose one of {', '.join(CSV_TABLES)}.\n",
                            status=400, content_type="text/plain; charset=utf-8")
    form, start, end, unit, problems, _ = _settings(request)
    if problems:
        text = "; ".join(f"{label}: {message}" for label, message in problems)
        return HttpResponse(f"These values could not be used: {text}\n", status=400,
                            content_type="text/plain; charset=utf-8")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (f'attachment; filename="quorum-usage-{table}-{start}-'
                                       f'{end}.csv"')
    writer = csv.writer(response)
    for row in csv_rows(usage(request.user, start, end, unit), table, unit):
        writer.writerow([cell(v) for v in row])
    return response
