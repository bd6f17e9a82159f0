"""The inbox (issue 35's first part): the gates waiting for the signed-in person, with their
context, filters at their edges, the count in the navigation — and nobody else's."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.models import PlanVersion, Run
from agents_app.patterns.base import Decision
from tests.conftest import OFFLINE

pytestmark = pytest.mark.django_db(transaction=True)
TASK = "Collect the logs, then find the error."


@pytest.fixture(autouse=True)
def here(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)


def waiting(user, task=TASK) -> Run:
    run = engine.run_inline(engine.create_run(user, "plan_execute", task, options={},
                                              models=OFFLINE, enqueue=False).pk)
    assert run.status == "awaiting_plan_approval"
    return run


def test_the_inbox_lists_my_waiting_gates_with_the_plan_and_the_count(alice_client, alice,
                                                                      bob):
    mine = waiting(alice)
    waiting(bob, "Bob's own task")
    page = alice_client.get(reverse("inbox")).content.decode()
    assert f'id="gate-{mine.pk}"' in page and "Awaiting plan approval" in page
    assert "Plan v1" in page and mine.state["plan"]["steps"][0] in page
    assert "Bob&#x27;s own task" not in page and "Bob's own task" not in page
    assert '<span class="badge count" aria-label="1 waiting for you">1</span>' in page
    # Decided elsewhere: gone from the list and the count.
    engine.decide(mine, alice, mine.stage_seq, Decision(action="approve", author="alice"),
                  enqueue=False)
    page = alice_client.get(reverse("inbox") + "?part=list", HTTP_HX_REQUEST="true")
    text = page.content.decode()
    assert "<html" not in text and 'id="inbox-empty"' in text


def test_a_replanned_gate_shows_what_changed(alice_client, alice):
    run = waiting(alice)
    engine.decide(run, alice, run.stage_seq, Decision(action="reject", author="alice",
                                                      feedback="Add a step that checks "
                                                               "the disk."), enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "awaiting_plan_approval" and PlanVersion.objects.filter(
        run=run).count() == 2
    page = alice_client.get(reverse("inbox")).content.decode()
    assert "changed from v1" in page and 'class="plan-diff"' in page


@pytest.mark.parametrize("query,shown,problem", [
    ("?gate=plan_approval", True, ""),
    ("?gate=triage", False, ""),
    ("?pattern=debate", False, ""),
    ("?older_than=1", False, ""),
    ("?older_than=0", True, ""),
    ("?older_than=abc", True, "takes a number of hours"),
    ("?older_than=-5", True, "takes a number of hours"),
    ("?min_cost=NaN", True, "takes an amount in USD"),
    ("?min_cost=5", False, ""),
    ("?gate=%00x&pattern=" + "p" * 500, False, ""),
])
def test_filters_at_their_edges(alice_client, alice, query, shown, problem):
    run = waiting(alice)
    answer = alice_client.get(reverse("inbox") + query)
    assert answer.status_code == 200
    text = answer.content.decode()
    assert (f'id="gate-{run.pk}"' in text) is shown, query
    if problem:
        assert problem in text


def test_anonymous_is_sent_to_sign_in_and_another_user_sees_nothing(client, alice, bob):
    waiting(alice)
    assert client.get(reverse("inbox")).status_code == 302
    client.force_login(bob)
    text = client.get(reverse("inbox")).content.decode()
    assert 'id="inbox-empty"' in text and "badge count" not in text
