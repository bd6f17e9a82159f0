"""Cost and usage of a person's own runs over a date range: over time (by day, week or month),
by pattern and by model — the numbers the usage page draws as charts, lists as tables and
exports as CSV.

Runs are counted by the day they started. Per model, the figures come from the model calls
(a run may use several models); their sums equal the runs' totals, since a run's cost and
tokens are the sums of its calls. Both tables are read from covering indexes (migration 0007:
``run_owner_usage`` and ``call_usage``), not from the rows, whose state and prompts are large.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django import forms
from django.db import connection
from django.db.models import Count, Sum
from django.db.models.functions import Substr, TruncDate
from django.utils import timezone

from .forms import FIRST_DAY, LAST_DAY
from .models import ModelCall, Run
from .patterns import PATTERNS

UNITS = {"day": "Day", "week": "Week (from Monday)", "month": "Month"}
# At most this many bars in a chart: a longer range by days is shown by weeks (or months).
MAX_PERIODS = 400
DEFAULT_DAYS = 30


class UsageForm(forms.Form):
    """The usage page's range and unit: query parameters, each bad value named in a message."""

    start = forms.DateField(required=False, label="From")
    end = forms.DateField(required=False, label="To")
    by = forms.ChoiceField(choices=list(UNITS.items()), required=False, label="By")

    PARAM_NAMES = {"start": "from", "end": "to"}

    def __init__(self, data=None, **kwargs):
        if data is not None:
            data = data.copy()
            for field, param in self.PARAM_NAMES.items():
                if param in data:
                    data[field] = data[param]
        super().__init__(data, **kwargs)

    def _day(self, name: str):
        day = self.cleaned_data[name]
        if day and not FIRST_DAY <= day <= LAST_DAY:
            raise forms.ValidationError(f"Pick a day between {FIRST_DAY} and {LAST_DAY}.")
        return day

    def clean_start(self):
        return self._day("start")

    def clean_end(self):
        return self._day("end")

    def clean(self):
        data = super().clean()
        if data.get("start") and data.get("end") and data["start"] > data["end"]:
            self.add_error("start", f"{data['start']} is after the “To” day, {data['end']}.")
        return data

    def settings(self) -> tuple[dt.date, dt.date, str, list[tuple[str, str]]]:
        """The range and unit to use (the defaults where a value could not be used), and
        (label, message) for each value that could not."""
        self.is_valid() if self.is_bound else None
        d = {k: v for k, v in (self.cleaned_data.items() if self.is_bound else ())
             if k not in self.errors and v}
        end = d.get("end") or (d["start"] + dt.timedelta(days=DEFAULT_DAYS - 1)
                               if d.get("start") else timezone.localdate())
        end = min(end, LAST_DAY)
        start = d.get("start") or max(end - dt.timedelta(days=DEFAULT_DAYS - 1), FIRST_DAY)
        problems = [(self.fields[n].label or n, " ".join(str(m) for m in msgs))
                    for n, msgs in (self.errors.items() if self.is_bound else ())]
        return start, end, d.get("by") or "day", problems


def _periods(start: dt.date, end: dt.date, unit: str) -> list[dt.date]:
    """The first day of each period from ``start`` to ``end``."""
    if unit == "month":
        first = start.replace(day=1)
        out = []
        while first <= end:
            out.append(first)
            first = (first + dt.timedelta(days=32)).replace(day=1)
        return out
    step = 7 if unit == "week" else 1
    first = start - dt.timedelta(days=start.weekday()) if unit == "week" else start
    return [first + dt.timedelta(days=i) for i in range(0, (end - first).days + 1, step)]


def fit_unit(start: dt.date, end: dt.date, unit: str) -> str:
    """``unit``, or a coarser one when the range has more than MAX_PERIODS of it."""
    for candidate in ("day", "week", "month")[("day", "week", "month").index(unit):]:
        if len(_periods(start, end, candidate)) <= MAX_PERIODS:
            return candidate
    return "month"


def _bounds(start: dt.date, end: dt.date) -> tuple[dt.datetime, dt.datetime]:
    zone = timezone.get_current_timezone()
    return (dt.datetime.combine(start, dt.time.min, zone),
            dt.datetime.combine(end + dt.timedelta(days=1), dt.time.min, zone))


def _day():
    """The day a run started, in the current time zone, as SQL. SQLite keeps datetimes as UTC
    text, so in UTC (the default) the day is the text's first ten characters; elsewhere, and on
    Postgres, the database truncates (on SQLite through a Python function called per row,
    several times slower over a year of runs)."""
    zone = timezone.get_current_timezone()
    if connection.vendor == "sqlite" and str(zone) in ("UTC", "Etc/UTC"):
        return Substr("created_at", 1, 10)
    return TruncDate("created_at", tzinfo=zone)


def period_start(day: dt.date, unit: str) -> dt.date:
    if unit == "month":
        return day.replace(day=1)
    if unit == "week":
        return day - dt.timedelta(days=day.weekday())
    return day


def usage(user, start: dt.date, end: dt.date, unit: str) -> dict:
    """Every table of the usage page for ``user``'s own runs started from ``start`` to ``end``.
    The database sums by day and pattern; the days are gathered into weeks or months here."""
    low, high = _bounds(start, end)
    runs = Run.objects.filter(owner=user, created_at__gte=low, created_at__lt=high)
    rows = (runs.annotate(day=_day()).values("day", "pattern")
            .annotate(runs=Count("id"), cost=Sum("cost_usd"), prompt=Sum("prompt_tokens"),
                      completion=Sum("completion_tokens")).order_by())
    periods = {p: {"period": p, "runs": 0, "cost": Decimal(0), "prompt": 0, "completion": 0,
                   "by_pattern": {}} for p in _periods(start, end, unit)}
    patterns: dict[str, dict] = {}
    for r in rows:
        day = r["day"] if isinstance(r["day"], dt.date) else dt.date.fromisoformat(r["day"])
        day = period_start(day, unit)
        cost = r["cost"] or Decimal(0)
        p = periods.setdefault(day, {"period": day, "runs": 0, "cost": Decimal(0), "prompt": 0,
                                     "completion": 0, "by_pattern": {}})
        p["runs"] += r["runs"]
        p["cost"] += cost
        p["prompt"] += r["prompt"] or 0
        p["completion"] += r["completion"] or 0
        p["by_pattern"][r["pattern"]] = p["by_pattern"].get(r["pattern"], Decimal(0)) + cost
        t = patterns.setdefault(r["pattern"], {"key": r["pattern"], "runs": 0,
                                               "cost": Decimal(0), "prompt": 0, "completion": 0})
        t["runs"] += r["runs"]
        t["cost"] += cost
        t["prompt"] += r["prompt"] or 0
        t["completion"] += r["completion"] or 0
    for t in patterns.values():
        spec = PATTERNS.get(t["key"])
        t["label"] = spec.label if spec else t["key"]
        t["tokens"] = t["prompt"] + t["completion"]
        t["per_run"] = t["cost"] / t["runs"] if t["runs"] else Decimal(0)
    models = [{"model": m["model"], "calls": m["calls"], "prompt": m["prompt"] or 0,
               "completion": m["completion"] or 0,
               "tokens": (m["prompt"] or 0) + (m["completion"] or 0),
               "cost": m["cost"] or Decimal(0)}
              for m in ModelCall.objects.filter(run__in=runs.values("id")).values("model")
              .annotate(calls=Count("id"), prompt=Sum("prompt_tokens"),
                        completion=Sum("completion_tokens"), cost=Sum("cost_usd")).order_by()]
    over_time = sorted(periods.values(), key=lambda p: p["period"])
    for p in over_time:
        p["tokens"] = p["prompt"] + p["completion"]
    by_pattern = sorted(patterns.values(), key=lambda t: (-t["cost"], -t["runs"], t["label"]))
    totals = {"runs": sum(p["runs"] for p in over_time),
              "cost": sum((p["cost"] for p in over_time), Decimal(0)),
              "tokens": sum(p["tokens"] for p in over_time),
              "calls": sum(m["calls"] for m in models)}
    return {"over_time": over_time, "by_pattern": by_pattern,
            "by_model": sorted(models, key=lambda m: (-m["cost"], -m["calls"], m["model"])),
            "totals": totals}


def period_label(day: dt.date, unit: str) -> str:
    if unit == "month":
        return day.strftime("%Y-%m")
    return day.isoformat()


def chart_data(tables: dict, unit: str) -> dict:
    """What the charts draw (numbers as floats; names are text the script puts in the chart,
    never in markup): cost over time by pattern, tokens over time, cost by pattern and by
    model."""
    keys = [t["key"] for t in tables["by_pattern"]]
    labels = {t["key"]: t["label"] for t in tables["by_pattern"]}
    periods = [period_label(p["period"], unit) for p in tables["over_time"]]
    return {
        "cost_over_time": {"labels": periods, "series": [
            {"name": labels[k], "values": [float(p["by_pattern"].get(k, 0)) for p in tables["over_time"]]}
            for k in keys]},
        "tokens_over_time": {"labels": periods, "series": [
            {"name": "Tokens in", "values": [p["prompt"] for p in tables["over_time"]]},
            {"name": "Tokens out", "values": [p["completion"] for p in tables["over_time"]]}]},
        "cost_by_pattern": {"labels": [labels[k] for k in keys], "series": [
            {"name": "Cost (USD)", "values": [float(t["cost"]) for t in tables["by_pattern"]]}]},
        "cost_by_model": {"labels": [m["model"] for m in tables["by_model"]], "series": [
            {"name": "Cost (USD)", "values": [float(m["cost"]) for m in tables["by_model"]]}]},
    }


def _usd(value) -> Decimal:
    return Decimal(value or 0).quantize(Decimal("0.000001"))


def csv_rows(tables: dict, table: str, unit: str) -> list[list]:
    """One table as CSV rows, its header first; amounts in USD to six decimal places (as the
    calls are priced)."""
    if table == "over_time":
        keys = [t["key"] for t in tables["by_pattern"]]
        head = [UNITS[unit].split(" ")[0].lower(), "runs", "cost_usd", "tokens_in", "tokens_out",
                *[f"cost_usd:{k}" for k in keys]]
        return [head, *[[period_label(p["period"], unit), p["runs"], _usd(p["cost"]), p["prompt"],
                         p["completion"], *[_usd(p["by_pattern"].get(k)) for k in keys]]
                        for p in tables["over_time"]]]
    if table == "patterns":
        return [["pattern", "label", "runs", "cost_usd", "tokens_in", "tokens_out",
                 "cost_usd_per_run"],
                *[[t["key"], t["label"], t["runs"], _usd(t["cost"]), t["prompt"], t["completion"],
                   _usd(t["per_run"])] for t in tables["by_pattern"]]]
    return [["model", "calls", "cost_usd", "tokens_in", "tokens_out"],
            *[[m["model"], m["calls"], _usd(m["cost"]), m["prompt"], m["completion"]]
              for m in tables["by_model"]]]


CSV_TABLES = {"over_time": "over time", "patterns": "by pattern", "models": "by model"}
