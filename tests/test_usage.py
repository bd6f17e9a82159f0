"""Cost and usage over time, by pattern and by model: the person's own runs only, each chart also
a table and a CSV export, bad values answered with a message, and the chart library served from
our own static files."""

import csv
import datetime as dt
import io
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from agents_app.models import ModelCall, Run

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[1]
DAY = dt.date(2026, 3, 2)  # a Monday


def started(owner, day: dt.date, pattern="plan_execute", calls=(), **fields):
    """A run started at noon on ``day`` with ``calls`` [(model, prompt, completion, cost)]; its
    totals are the sums of its calls, as the engine keeps them."""
    run = Run.objects.create(
        owner=owner, pattern=pattern, task=f"{pattern} on {day}", status="completed",
        cost_usd=sum((Decimal(c[3]) for c in calls), Decimal(0)),
        prompt_tokens=sum(c[1] for c in calls), completion_tokens=sum(c[2] for c in calls),
        calls=len(calls), **fields)
    noon = dt.datetime.combine(day, dt.time(12), timezone.get_current_timezone())
    Run.objects.filter(pk=run.pk).update(created_at=noon)
    for i, (model, prompt, completion, cost) in enumerate(calls):
        ModelCall.objects.create(run=run, stage="s", key=str(i), role="r", model=model,
                                 prompt_tokens=prompt, completion_tokens=completion,
                                 cost_usd=Decimal(cost))
    return run


@pytest.fixture
def spent(alice, bob):
    started(alice, DAY, calls=[("gpt-4o", 100, 10, "0.010"), ("offline/default", 5, 5, "0")])
    started(alice, DAY, pattern="debate", calls=[("gpt-4o", 200, 20, "0.020")])
    started(alice, DAY + dt.timedelta(days=2), calls=[("claude-3", 50, 5, "0.005")])
    started(alice, DAY + dt.timedelta(days=40), calls=[("gpt-4o", 1, 1, "1.000")])  # outside
    started(bob, DAY, calls=[("bobs-model", 999, 999, "9.000")])  # another person's


def page(client, **params):
    response = client.get(reverse("usage"), params)
    assert response.status_code == 200
    return response


RANGE = {"from": str(DAY), "to": str(DAY + dt.timedelta(days=6))}


def test_usage_over_time_by_pattern_and_by_model_counts_only_my_runs(alice_client, spent):
    ctx = page(alice_client, **RANGE).context
    assert ctx["totals"] == {"runs": 3, "cost": Decimal("0.035"), "tokens": 395, "calls": 4}
    days = {p["label"]: (p["runs"], p["cost"], p["prompt"], p["completion"]) for p in ctx["over_time"]}
    assert len(days) == 7 and days[str(DAY + dt.timedelta(days=1))] == (0, 0, 0, 0)
    assert days[str(DAY)] == (2, Decimal("0.030"), 305, 35)
    assert [(t["key"], t["runs"], t["cost"]) for t in ctx["by_pattern"]] == [
        ("debate", 1, Decimal("0.020")), ("plan_execute", 2, Decimal("0.015"))]
    assert [(m["model"], m["calls"], m["cost"]) for m in ctx["by_model"]] == [
        ("gpt-4o", 2, Decimal("0.030")), ("claude-3", 1, Decimal("0.005")),
        ("offline/default", 1, Decimal("0"))]
    html = page(alice_client, **RANGE).content.decode()
    assert "bobs-model" not in html and "$9" not in html


def test_each_chart_is_drawn_from_the_same_numbers_as_its_table(alice_client, spent):
    html = page(alice_client, **RANGE).content.decode()
    data = json.loads(re.search(r'<script id="usage-data" type="application/json">(.*?)</script>',
                                html, re.S).group(1))
    assert data["cost_by_model"] == {"labels": ["gpt-4o", "claude-3", "offline/default"],
                                     "series": [{"name": "Cost (USD)", "values": [0.03, 0.005, 0.0]}]}
    assert data["cost_by_pattern"]["labels"] == ["Debate", "Plan and execute"]
    over = data["cost_over_time"]
    assert len(over["labels"]) == 7 and [s["name"] for s in over["series"]] == ["Debate", "Plan and execute"]
    assert over["series"][1]["values"][:3] == [0.01, 0.0, 0.005]
    assert data["tokens_over_time"]["series"][0]["values"][0] == 305
    for chart, table in (("cost_over_time", "table-over-time"), ("cost_by_pattern", "table-by-pattern"),
                         ("cost_by_model", "table-by-model")):
        assert f'data-chart="{chart}"' in html and f'id="{table}"' in html
    # The same rows in the tables: one per model, one per pattern, one per day.
    for model in ("gpt-4o", "claude-3", "offline/default"):
        assert f'<th scope="row">{model}</th>' in html
    assert html.count('<tr><th scope="row">2026-03-') == 7


def test_weeks_and_months_and_a_range_too_long_for_days(alice_client, spent):
    weeks = page(alice_client, **{"from": str(DAY), "to": str(DAY + dt.timedelta(days=45)), "by": "week"}).context
    assert [p["runs"] for p in weeks["over_time"]] == [3, 0, 0, 0, 0, 1, 0]
    months = page(alice_client, **{"from": "2026-01-01", "to": "2026-04-30", "by": "month"}).context
    assert [(p["label"], p["runs"]) for p in months["over_time"]] == [
        ("2026-01", 0), ("2026-02", 0), ("2026-03", 3), ("2026-04", 1)]
    long = page(alice_client, **{"from": "2020-01-01", "to": "2026-12-31", "by": "day"})
    assert long.context["unit"] == "week" and "too long to show by day" in long.content.decode()


def test_the_default_range_is_the_last_thirty_days(alice_client, alice):
    started(alice, timezone.localdate(), calls=[("gpt-4o", 1, 1, "0.001")])
    ctx = page(alice_client).context
    assert ctx["end"] == timezone.localdate() and (ctx["end"] - ctx["start"]).days == 29
    assert ctx["totals"]["runs"] == 1


def read_csv(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith("attachment;")
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_every_table_exports_as_csv(alice_client, spent):
    url = reverse("usage_csv")
    rows = read_csv(alice_client.get(url, {"table": "over_time", **RANGE}))
    assert rows[0] == ["day", "runs", "cost_usd", "tokens_in", "tokens_out", "cost_usd:debate",
                       "cost_usd:plan_execute"]
    assert rows[1] == [str(DAY), "2", "0.030000", "305", "35", "0.020000", "0.010000"]
    assert len(rows) == 8
    rows = read_csv(alice_client.get(url, {"table": "patterns", **RANGE}))
    assert rows[1][:4] == ["debate", "Debate", "1", "0.020000"]
    rows = read_csv(alice_client.get(url, {"table": "models", **RANGE}))
    assert rows == [["model", "calls", "cost_usd", "tokens_in", "tokens_out"],
                    ["gpt-4o", "2", "0.030000", "300", "30"],
                    ["claude-3", "1", "0.005000", "50", "5"],
                    ["offline/default", "1", "0.000000", "5", "5"]]
    html = page(alice_client, **RANGE).content.decode()
    for table in ("over_time", "patterns", "models"):
        assert f"table={table}&amp;from={DAY}" in html


def test_a_model_name_that_looks_like_a_formula_is_text_in_the_csv(alice_client, alice):
    started(alice, DAY, calls=[("=HYPERLINK(\"http://x\")", 1, 1, "0.001")])
    rows = read_csv(alice_client.get(reverse("usage_csv"), {"table": "models", **RANGE}))
    assert rows[1][0] == "'=HYPERLINK(\"http://x\")"


@pytest.mark.parametrize("params, says", [
    ({"from": "2026-02-30"}, "From"), ({"from": "9999-01-01"}, "From"), ({"to": "0001-01-01"}, "To"),
    ({"from": "2026-03-10", "to": "2026-03-01"}, "after"), ({"by": "fortnight"}, "By"),
    ({"by": "day\x00"}, "By"), ({"from": "9" * 40}, "From"), ({"to": "-1"}, "To"),
])
def test_bad_values_are_named_and_the_defaults_used(alice_client, alice, params, says):
    response = page(alice_client, **params)
    alert = re.search(r'<p class="error" role="alert">(.*?)</p>', response.content.decode(), re.S)
    assert alert and says in alert.group(1)
    csv_response = alice_client.get(reverse("usage_csv"), {"table": "models", **params})
    assert csv_response.status_code == 400 and says in csv_response.content.decode()


def test_an_unknown_csv_table_is_a_clear_400(alice_client):
    response = alice_client.get(reverse("usage_csv"), {"table": "passwords"})
    assert response.status_code == 400 and "Unknown table" in response.content.decode()


def test_another_person_sees_only_their_own_usage(client, bob, spent):
    client.force_login(bob)
    ctx = page(client, **RANGE).context
    assert ctx["totals"]["runs"] == 1 and [m["model"] for m in ctx["by_model"]] == ["bobs-model"]
    rows = read_csv(client.get(reverse("usage_csv"), {"table": "models", **RANGE}))
    assert [r[0] for r in rows[1:]] == ["bobs-model"]


def test_anonymous_is_sent_to_sign_in(client):
    for url in (reverse("usage"), reverse("usage_csv") + "?table=models"):
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/accounts/login/")


def test_the_chart_library_is_vendored_with_its_version_and_license(alice_client, spent):
    lib = ROOT / "static" / "vendor" / "chartjs"
    source = (lib / "chart.umd.min.js").read_text()
    assert source[:60].count("Chart.js v4.6.1") == 1
    # collectstatic (whitenoise's manifest storage) fails on a reference to a missing source map.
    assert "sourceMappingURL" not in source
    assert "MIT License" in (lib / "LICENSE.md").read_text()
    assert "4.6.1" in (lib / "README.md").read_text()
    html = page(alice_client, **RANGE).content.decode()
    scripts = re.findall(r'<script[^>]* src="([^"]+)"', html)
    assert "/static/vendor/chartjs/chart.umd.min.js" in scripts
    assert all(s.startswith("/static/") for s in scripts), scripts


def test_the_dashboard_links_to_the_usage_page(alice_client):
    assert reverse("usage") in alice_client.get(reverse("dashboard")).content.decode()


@pytest.mark.parametrize("zone, day", [("UTC", DAY), ("Europe/Paris", DAY + dt.timedelta(days=1)),
                                       ("America/New_York", DAY)])
def test_a_run_counts_on_the_day_it_started_where_the_site_is(alice_client, alice, settings,
                                                             zone, day):
    settings.TIME_ZONE = zone
    run = started(alice, DAY, calls=[("gpt-4o", 1, 1, "0.001")])
    late = dt.datetime.combine(DAY, dt.time(23, 30), dt.UTC)  # 00:30 the next day in Paris
    Run.objects.filter(pk=run.pk).update(created_at=late)
    ctx = page(alice_client, **{"from": str(DAY - dt.timedelta(days=1)),
                                "to": str(DAY + dt.timedelta(days=2))}).context
    assert [p["period"] for p in ctx["over_time"] if p["runs"]] == [day]
