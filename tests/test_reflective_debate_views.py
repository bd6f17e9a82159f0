"""Reflective and Debate through the dashboard form, the engine with the offline model behind
LiteLLM, the run page and the command line."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from agents_app import engine, live
from agents_app.models import Run, RunItem

# Debaters answer side by side on helper threads, each with its own database connection:
# they must see the committed run, so these tests commit (like the worker does).
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_schedule(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)


def start(client, **data):
    return client.post(reverse("start_run"), data)


def test_reflective_from_the_form_to_the_page(alice_client, no_schedule):
    r = start(alice_client, pattern="reflective", task="Explain vector databases briefly",
              max_reflections="3")
    run = Run.objects.get()
    assert r.status_code == 302 and run.pattern == "reflective"
    assert set(run.models_used) == {"actor", "critic"}
    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    items = list(RunItem.objects.filter(run=run).values_list("kind", "key"))
    assert items == [("draft", "1"), ("critique", "1"), ("draft", "2"), ("critique", "2")]
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "Draft 2" in page and "approved" in page and "What changed since draft 1" in page
    assert "Addressed: Give a concrete example" in page  # the revision, as the diff shows it
    assert run.answer.startswith("# Explain vector databases")


def test_reflective_limit_from_the_form(alice_client, no_schedule):
    start(alice_client, pattern="reflective", task="Explain X", max_reflections="1")
    run = engine.run_inline(Run.objects.get().pk)
    assert run.status == "completed"
    assert RunItem.objects.filter(run=run, kind="draft").count() == 1
    assert run.events.filter(kind="critique", message__contains="limit of 1").exists()


def test_debate_from_the_form_to_the_page(alice_client, no_schedule):
    r = start(alice_client, pattern="debate", task="Should we adopt microservices?",
              positions="Optimist: in favour\nSkeptic: against\nPragmatist: it depends",
              max_rounds="2")
    assert r.status_code == 302
    run = engine.run_inline(Run.objects.get().pk)
    assert run.status == "completed", run.error
    args = RunItem.objects.filter(run=run, kind="argument")
    assert args.count() == 6
    assert RunItem.objects.filter(run=run, kind="conclusion").count() == 1
    page = alice_client.get(run.get_absolute_url()).content.decode()
    for text in ("Round 1", "Round 2", "Pragmatist", "Judge", "it depends"):
        assert text in page
    assert set(run.models_used) == {"debater", "judge"}
    # Round 2's calls saw round 1's transcript.
    second = run.model_calls.filter(stage="round:2").first()
    assert "### Round 1 — Optimist" in second.messages[-1]["content"]
    # Its events redraw its panel on open pages, drawn from the package's template.
    kinds = set(run.events.values_list("kind", flat=True))
    assert {"round_finished", "concluded"} <= kinds
    for kind in ("round_finished", "argument_failed", "concluded"):
        assert "items-panel" in live.panels_for(run, [kind])
    html = live.render_run_update(run, list(run.events.all()), {"items-panel"})
    assert 'id="items-panel" hx-swap-oob="true"' in html and "Pragmatist" in html


def test_debate_default_positions(alice_client, no_schedule):
    start(alice_client, pattern="debate", task="Tabs or spaces?")
    run = Run.objects.get()
    assert [p["name"] for p in run.options["positions"]] == ["For", "Against"]
    assert run.options["max_rounds"] == 2


@pytest.mark.parametrize("data, message", [
    ({"pattern": "debate", "positions": "Solo: alone"}, "2 to 5"),
    ({"pattern": "debate", "positions": "A: x\nA: y"}, "named twice"),
    ({"pattern": "debate", "max_rounds": "9"}, "less than or equal to 5"),
    ({"pattern": "reflective", "max_reflections": "0"}, "greater than or equal to 1"),
    ({"pattern": "reflective", "model_critic": "no-such-model-xyz"}, "Unknown model"),
    ({"pattern": "debate", "model_judge": "offline/other"}, "offline provider has only"),
])
def test_bad_options_are_refused_clearly(alice_client, no_schedule, data, message):
    r = alice_client.post(reverse("start_run"), {"task": "A question", **data},
                          HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and message in r.content.decode()
    assert not Run.objects.exists()


def test_fields_of_other_patterns_are_ignored(alice_client, no_schedule):
    """A bad value in a field the chosen pattern does not use does not block it."""
    r = start(alice_client, pattern="reflective", task="T", positions="nonsense",
              model_planner="no-such-model-xyz")
    assert r.status_code == 302


def test_access_to_a_debate_page(client, alice, bob, no_schedule):
    client.force_login(alice)
    start(client, pattern="debate", task="Q?")
    run = engine.run_inline(Run.objects.get().pk)
    assert client.get(run.get_absolute_url()).status_code == 200
    client.force_login(bob)
    assert client.get(run.get_absolute_url()).status_code == 404
    client.logout()
    assert client.get(run.get_absolute_url()).status_code == 302


def test_untrusted_model_output_is_sanitised(alice, no_schedule):
    from django.test import Client

    run = Run.objects.create(owner=alice, pattern="debate", task="Q", status="completed",
                             options={"positions": [{"name": "A", "stance": "<b>x</b>"}],
                                      "max_rounds": 1})
    RunItem.objects.create(run=run, kind="argument", key="1:A", data={
        "round": 1, "position": "A", "text": "<script>alert(1)</script>[x](javascript:alert(2))",
        "error": ""})
    c = Client()
    c.force_login(alice)
    page = c.get(run.get_absolute_url()).content.decode()
    section = page[page.index('id="items-panel"'):page.index('id="answer-panel"')]
    assert "<script>" not in section and 'href="javascript' not in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "&lt;b&gt;x&lt;/b&gt;" in section


@pytest.mark.parametrize("pattern, extra, kinds", [
    ("reflective", ["--max-reflections", "2"], {"draft", "critique"}),
    ("debate", ["--positions", "Yes: for\nNo: against", "--max-rounds", "1"],
     {"argument", "conclusion"}),
])
def test_command_line(alice, pattern, extra, kinds):
    out = StringIO()
    call_command("run_pattern", pattern, "--task", "Should we?", *extra, "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["status"] == "completed" and result["answer"]
    run = Run.objects.get(pk=result["run"])
    assert set(run.items.values_list("kind", flat=True)) == kinds


def test_a_bad_value_in_another_patterns_field_does_not_block(alice_client, no_schedule):
    """Debate's rounds at 99 (left over after switching pattern) does not stop a reflective
    run; the chosen pattern's own bad value still does."""
    r = start(alice_client, pattern="reflective", task="T", max_rounds="99",
              max_iterations="0", team="bad line", top_k_sketches="-1")
    assert r.status_code == 302
    r = alice_client.post(reverse("start_run"), {"pattern": "debate", "task": "T",
                                                 "max_rounds": "99"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and "less than or equal to 5" in r.content.decode()


@pytest.mark.parametrize("args, message", [
    (["reflective", "--max-reflections", "0"], "--max-reflections: takes 1 to 10"),
    (["debate", "--max-rounds", "0"], "--max-rounds: takes 1 to 5"),
    (["debate", "--max-rounds", "6"], "--max-rounds: takes 1 to 5"),
    (["team_lead", "--max-reassignments", "9"], "--max-reassignments: takes 0 to 5"),
    (["react", "--max-iterations", "99"], "--max-iterations: takes 1 to 30"),
    (["rewoo", "--tools", "ask_person"], "cannot stop to ask a person"),
])
def test_command_line_ranges_match_the_form(alice, args, message):
    from django.core.management import CommandError

    with pytest.raises(CommandError, match=message):
        call_command("run_pattern", args[0], "--task", "T", *args[1:], stdout=StringIO())
    assert not Run.objects.exists()
