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


def test_batch_decisions_decide_each_ticked_gate_on_its_own(alice_client, alice, bob):
    from agents_app.models import Checkpoint

    one, two = waiting(alice), waiting(alice, "Plan a picnic, then a walk.")
    stale = waiting(alice, "Check the disk, then the logs.")
    theirs = waiting(bob)
    seen_stale = stale.stage_seq
    engine.decide(stale, alice, stale.stage_seq, Decision(action="approve", author="alice"),
                  enqueue=False)  # decided in another tab after the inbox showed it
    answer = alice_client.post(reverse("inbox_decide"), {
        "action": "approve", "picks": [f"{one.pk}:{one.stage_seq}", f"{two.pk}:{two.stage_seq}",
                                       f"{stale.pk}:{seen_stale}",
                                       f"{theirs.pk}:{theirs.stage_seq}", "x:1", "1"]})
    text = answer.content.decode()
    assert answer.status_code == 200
    assert f"Run {one.pk}: approved." in text and f"Run {two.pk}: approved." in text
    assert f"Run {stale.pk}: it moved on before this was sent" in text
    assert f"Run {theirs.pk}: not found." in text
    for run in (one, two):
        run.refresh_from_db()
        assert run.status == "executing"
        [decided] = Checkpoint.objects.filter(run=run, decision__isnull=False)
        assert decided.decision["how"] == "person" and decided.decision["author"] == "alice"
    theirs.refresh_from_db()
    assert theirs.status == "awaiting_plan_approval"


def test_a_batch_rejection_sends_the_feedback_and_needs_it(alice_client, alice):
    run = waiting(alice)
    pick = f"{run.pk}:{run.stage_seq}"
    for data, message in (({"action": "reject", "picks": [pick]}, "Say what should change"),
                          ({"action": "maybe", "picks": [pick]}, "Choose approve or reject"),
                          ({"action": "approve"}, "Tick the gates"),
                          ({"action": "reject", "picks": [pick], "feedback": "a\x00"},
                           "without NUL"),
                          ({"action": "reject", "picks": [pick], "feedback": "x" * 4001},
                           "at most 4,000")):
        answer = alice_client.post(reverse("inbox_decide"), data)
        assert answer.status_code == 400 and message in answer.content.decode()
    run.refresh_from_db()
    assert run.status == "awaiting_plan_approval"
    answer = alice_client.post(reverse("inbox_decide"), {"action": "reject", "picks": [pick],
                                                         "feedback": "Check the disk first."})
    assert f"Run {run.pk}: rejected with your feedback." in answer.content.decode()
    run.refresh_from_db()
    assert run.status != "awaiting_plan_approval" or run.stage_seq > int(pick.split(":")[1])


def test_a_push_from_a_thread_running_an_event_loop_arrives(alice, settings, monkeypatch):
    """QA (issue 35, the inbox browser test): a gate decided in a thread that runs an event
    loop (Playwright's sync API there; any async caller) was never pushed: async_to_sync
    refuses such a thread, and the card stayed in every open inbox until its list reloaded."""
    import asyncio

    from channels.layers import get_channel_layer

    from agents_app import inbox_live

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # the ORM, as that test does
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    run = waiting(alice)
    groups, _message = inbox_live.message_for(run.pk)
    layer = get_channel_layer()

    async def main():
        channel = await layer.new_channel()
        await layer.group_add(groups[0], channel)
        inbox_live.push(run.pk)  # synchronous, in this thread's running loop
        return await asyncio.wait_for(layer.receive(channel), 5)

    got = asyncio.run(main())
    assert got["type"] == "inbox.gate" and got["run"] == run.pk and got["open"] is True


def test_the_waiting_index_covers_every_waiting_status_in_the_inbox_s_order():
    """The partial index ``run_waiting`` (migration 0011) is used only for the very list the
    inbox asks for (SQLite compares the IN list as written)."""
    from agents_app import inbox
    from agents_app.models import WAITING_STATUSES

    assert inbox.waiting_statuses() == WAITING_STATUSES


def test_unreadable_picks_and_filters_are_said_not_skipped_in_silence(alice_client):
    answer = alice_client.post(reverse("inbox_decide"), {"action": "approve",
                                                         "picks": ["x:y"]})
    assert "A ticked gate could not be read" in answer.content.decode()
    page = alice_client.get(reverse("inbox"), {"team": "x", "scope": "zzz",
                                               "assignee": "nobody"}).content.decode()
    for name in ("Show", "Team", "Assignee"):
        assert f"“{name}” had a value this page does not offer" in page
