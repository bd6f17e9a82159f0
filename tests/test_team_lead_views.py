"""Team Lead through the dashboard form, the engine with the offline model, the run page and
the command line."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from agents_app import engine, live
from agents_app.models import Run, RunItem

# Parallel members answer on helper threads; tests commit like the worker does.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_schedule(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)


@pytest.mark.parametrize("strategy, reviews", [("sequential", 0), ("parallel", 0),
                                               ("dynamic", 1)])
def test_each_strategy_from_the_form_to_the_page(alice_client, no_schedule, strategy, reviews):
    r = alice_client.post(reverse("start_run"), {
        "pattern": "team_lead", "task": "Collect the facts, then write the report",
        "strategy": strategy, "team": "analyst: finds facts\neditor: writes"})
    assert r.status_code == 302
    run = engine.run_inline(Run.objects.get().pk)
    assert run.status == "completed", run.error
    subtasks = run.state["subtasks"]
    assert [s["assignee"] for s in subtasks[:2]] == ["analyst", "editor"]
    assert run.state["reviews"] == reviews
    if strategy == "dynamic":
        assert subtasks[-1]["task"].startswith("Check the results")
    assert RunItem.objects.filter(run=run, kind="subtask").exists()
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "Subtasks" in page and "analyst" in page and "done" in page
    # Its events redraw its panel on open pages, drawn from the package's template.
    kinds = set(run.events.values_list("kind", flat=True))
    assert {"delegated", "work_done"} <= kinds and ("lead_review" in kinds) == bool(reviews)
    for kind in ("delegated", "work_done", "lead_review", "assignee_unknown"):
        assert "items-panel" in live.panels_for(run, [kind])
    html = live.render_run_update(run, list(run.events.all()), {"items-panel"})
    assert 'id="items-panel" hx-swap-oob="true"' in html and "analyst" in html


@pytest.mark.parametrize("data, message", [
    ({"team": "a b: x"}, "one word"),
    ({"team": "\n".join(f"m{i}: x" for i in range(7))}, "1 to 6"),
    ({"strategy": "chaos"}, "not one of the available choices"),
    ({"max_reassignments": "9"}, "less than or equal to 5"),
])
def test_bad_options(alice_client, no_schedule, data, message):
    r = alice_client.post(reverse("start_run"), {"pattern": "team_lead", "task": "T", **data},
                          HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and message in r.content.decode()
    assert not Run.objects.exists()


def test_command_line(alice):
    out = StringIO()
    call_command("run_pattern", "team_lead", "--task", "Plan a trip, then book it",
                 "--strategy", "parallel", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["status"] == "completed" and result["answer"]
    with pytest.raises(CommandError, match="--strategy"):
        call_command("run_pattern", "team_lead", "--task", "x", "--strategy", "chaos",
                     stdout=StringIO())
