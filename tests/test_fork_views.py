"""The fork pages (issue 33): a run's stages to fork from, the fork form made from the stage's
schema with models, gate policies and a budget, the shortcuts (run again, replay, continue),
a fork's page (where it came from, its inherited calls), and runs compared by stage — for the
owner, another user (404, nothing made) and anonymous visitors; every field at its edge."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.models import Checkpoint, Run
from agents_app.patterns.base import Decision
from tests.conftest import OFFLINE

pytestmark = pytest.mark.django_db(transaction=True)
TASK = "Collect the logs, then find the error."


@pytest.fixture
def done(alice, monkeypatch):
    """Alice's Plan-and-Execute run, its plan approved by her, completed offline."""
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)
    run = engine.run_inline(engine.create_run(alice, "plan_execute", TASK, options={},
                                              models=OFFLINE, enqueue=False).pk)
    engine.decide(run, alice, run.stage_seq, Decision(action="approve", author="alice"),
                  enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "completed"
    return run


def gate_seq(run) -> int:
    return Checkpoint.objects.get(run=run, gate="plan_approval").seq


def fork_url(run, seq=None):
    return reverse("fork_form", args=[run.pk, gate_seq(run) if seq is None else seq])


def form_data(run, **over):
    steps = "\n".join(run.state["plan"]["steps"])
    data = {"edit_steps": steps, "note": "", "nonce": "n-1", "kind": "fork",
            **{f"model_{r}": m for r, m in run.models_used.items()},
            "gate_plan_approval": "ask"}
    data.update(over)
    return data


def test_the_owner_forks_at_the_plan_with_an_edit_another_model_and_a_policy(client, alice,
                                                                              done, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")  # the fork waits at its gate
    client.force_login(alice)
    page = client.get(reverse("fork_page", args=[done.pk])).content.decode()
    assert f'href="{fork_url(done)}"' in page and "Run again" in page
    form = client.get(fork_url(done)).content.decode()
    assert "Edit: Plan v1" in form and "one per line" in form and 'name="model_executor"' in form
    response = client.post(fork_url(done), form_data(
        done, edit_steps="Collect the logs\nCheck the disk first\nFind the error",
        model_executor="gpt-4o-mini", gate_plan_approval="ask", note="what if"))
    fork = Run.objects.exclude(pk=done.pk).get()
    assert response.status_code == 302 and response.url == fork.get_absolute_url()
    assert fork.forked_from == done and fork.status == "awaiting_plan_approval"
    assert fork.state["plan"]["steps"][1] == "Check the disk first"
    assert fork.models_used["executor"] == "gpt-4o-mini"
    assert fork.fork["note"] == "what if" and fork.fork["nonce"] == "n-1"
    # Sent again (a double click, a reload): the same fork, not a second one.
    again = client.post(fork_url(done), form_data(done, edit_steps="x", model_executor="y"))
    assert again.status_code == 302 and again.url == fork.get_absolute_url()
    assert Run.objects.count() == 2
    # The fork's page says where it came from and lists the calls it did not make again.
    page = client.get(fork.get_absolute_url()).content.decode()
    assert f"of <a href=\"/runs/{done.pk}/\">run {done.pk}</a>" in page
    assert 'id="inherited-calls"' in page and "not made again" in page
    assert f"/runs/compare/?runs={done.pk},{fork.pk}" in page


@pytest.mark.parametrize("over, message", [
    ({"edit_steps": ""}, "no steps left to carry out"),
    ({"edit_steps": "a\x00b"}, "Null characters are not allowed"),
    ({"edit_steps": "x" * 200_001}, "at most 200000 characters"),
    ({"edit_steps": "\n".join(f"step {i}" for i in range(40))}, "at most 30"),
    ({"model_executor": "no-such-model-zzz"}, "executor"),
    ({"gate_plan_approval": "sometimes"}, "Select a valid choice"),
    ({"max_cost_usd": "-1"}, "greater than or equal to"),
    ({"max_tokens": "9" * 12}, "less than or equal to"),
])
def test_a_bad_fork_form_says_why_and_makes_nothing(client, alice, done, over, message):
    client.force_login(alice)
    response = client.post(fork_url(done), form_data(done, **over))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Run.objects.count() == 1


def test_a_stage_with_nothing_to_edit_and_an_unknown_stage(client, alice, done):
    client.force_login(alice)
    start = client.get(reverse("fork_form", args=[done.pk, 0])).content.decode()
    assert "Nothing can be edited at this stage" in start and 'name="edit_' not in start
    assert client.get(reverse("fork_form", args=[done.pk, 999])).status_code == 404
    response = client.post(reverse("fork_form", args=[done.pk, 0]), {
        "nonce": "z", "kind": "retry", **{f"model_{r}": m for r, m in done.models_used.items()}})
    fork = Run.objects.exclude(pk=done.pk).get()
    assert response.status_code == 302 and fork.fork["kind"] == "retry"


def test_run_again_replay_and_continue(client, alice, done):
    client.force_login(alice)
    again = client.post(reverse("run_again", args=[done.pk]), {"nonce": "a"})
    fork = Run.objects.get(fork__kind="again")
    assert again.status_code == 302 and fork.stage_seq == 0 and fork.task == done.task
    replay = client.post(reverse("replay_run", args=[done.pk]), {"nonce": "b"})
    assert replay.status_code == 302 and Run.objects.filter(fork__kind="replay").exists()
    refused = client.post(reverse("continue_run", args=[done.pk]), {"max_cost_usd": "5"})
    assert refused.status_code == 409 and "Only a run stopped" in refused.content.decode()
    assert Run.objects.filter(fork__kind="continue").count() == 0


def test_compare_two_runs_and_three(client, alice, done):
    client.force_login(alice)
    fork = engine.run_inline(
        __import__("agents_app.forking.create", fromlist=["x"]).create_fork(
            done, alice, seq=gate_seq(done), edits={"steps": ["Only this"]},
            gates={"plan_approval": "approve"}, enqueue=False).pk)
    fork = engine.run_inline(fork.pk)
    page = client.get(reverse("compare_runs") + f"?runs={done.pk},{fork.pk}")
    body = page.content.decode()
    assert page.status_code == 200 and 'id="divergence-note"' in body
    assert "Edited when forked" in body and "first-divergence" in body
    third = client.post(reverse("run_again", args=[done.pk]), {"nonce": "c"})
    assert third.status_code == 302
    again = Run.objects.get(fork__kind="again")
    side = client.get(reverse("compare_runs") + f"?runs={done.pk},{fork.pk},{again.pk}")
    assert side.status_code == 200 and 'id="side-by-side"' in side.content.decode()
    # The history's ticks send one ``runs`` per run.
    ticked = client.get(reverse("compare_runs"), {"runs": [done.pk, fork.pk]})
    assert ticked.status_code == 200 and 'id="stage-diff"' in ticked.content.decode()
    history = client.get(reverse("dashboard")).content.decode()
    assert 'id="compare-form"' in history and f'name="runs" value="{fork.pk}"' in history


@pytest.mark.parametrize("runs, status", [
    ("1", 400), ("1,2,3,4,5,6,7", 400), ("abc", 400), ("1,x", 400), ("9" * 30, 400),
])
def test_compare_refuses_what_it_cannot_read(client, alice, runs, status):
    client.force_login(alice)
    assert client.get(reverse("compare_runs"), {"runs": runs}).status_code == status
    assert client.get(reverse("compare_runs")).status_code == 200  # the page: how to choose


def test_another_users_runs_are_404_everywhere_and_nothing_is_made(client, bob, done):
    client.force_login(bob)
    for url in (reverse("fork_page", args=[done.pk]), fork_url(done),
                reverse("compare_runs") + f"?runs={done.pk},{done.pk + 1}"):
        assert client.get(url).status_code == 404, url
    for name in ("run_again", "replay_run", "continue_run"):
        assert client.post(reverse(name, args=[done.pk]), {"nonce": "q"}).status_code == 404
    assert client.post(fork_url(done), form_data(done)).status_code == 404
    assert Run.objects.count() == 1
    client.logout()
    assert client.get(reverse("fork_page", args=[done.pk])).status_code == 302


def test_the_run_page_lists_its_stages_to_fork_or_retry_from(client, alice, bob, done):
    """"Retry from here" on any stage of the run page: a "Stages" box that loads the run's
    stages, as they are when it is opened, each with "Fork from here" and "Retry from here"."""
    client.force_login(alice)
    page = client.get(done.get_absolute_url()).content.decode()
    part = reverse("fork_page", args=[done.pk]) + "?part=stages"
    assert 'id="run-stages"' in page and f'hx-get="{part}"' in page
    rows = client.get(part, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in rows  # the rows alone, for the box
    seqs = list(Checkpoint.objects.filter(run=done).exclude(stage="", gate="")
                .values_list("seq", flat=True))
    assert seqs and rows.count("Retry from here") == rows.count("Fork from here") == len(seqs)
    for seq in seqs:
        assert f'action="{reverse("fork_form", args=[done.pk, seq])}"' in rows
    # Its retry button makes a retry from that stage.
    seq = gate_seq(done)
    answer = client.post(reverse("fork_form", args=[done.pk, seq]), {"kind": "retry",
                                                                     "nonce": "r-1"})
    retry = Run.objects.exclude(pk=done.pk).get()
    assert answer.status_code == 302 and retry.fork["kind"] == "retry" and retry.fork_seq == seq
    client.force_login(bob)
    assert client.get(part).status_code == 404
    client.logout()
    assert client.get(part).status_code == 302
