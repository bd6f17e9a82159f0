"""Every view: owner, another user, anonymous; and bad input on every form."""

from decimal import Decimal

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.models import Approval, PlanVersion, Run
from tests.conftest import OFFLINE

pytestmark = pytest.mark.django_db




def run_urls(run):
    return {
        "detail": ("get", reverse("run_detail", args=[run.pk])),
        "decide": ("post", reverse("plan_decision", args=[run.pk])),
        "cancel": ("post", reverse("cancel_run", args=[run.pk])),
    }


# --- access -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["dashboard", "start_run"])
def test_anonymous_is_sent_to_sign_in(client, name):
    method = "get" if name == "dashboard" else "post"
    response = getattr(client, method)(reverse(name))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("view", ["detail", "decide", "cancel"])
def test_anonymous_cannot_reach_a_run(client, gated_run, view):
    method, url = run_urls(gated_run)[view]
    response = getattr(client, method)(url, {"action": "approve", "seq": gated_run.stage_seq})
    assert response.status_code == 302 and reverse("login") in response["Location"]
    gated_run.refresh_from_db()
    assert gated_run.status == "awaiting_plan_approval"


@pytest.mark.parametrize("view", ["detail", "decide", "cancel"])
def test_another_user_gets_404_and_changes_nothing(bob_client, gated_run, view):
    method, url = run_urls(gated_run)[view]
    response = getattr(bob_client, method)(url, {"action": "approve", "seq": gated_run.stage_seq})
    assert response.status_code == 404
    gated_run.refresh_from_db()
    assert gated_run.status == "awaiting_plan_approval"
    assert not Approval.objects.exists()


def test_owner_sees_the_run_page_with_plan_editor(alice_client, gated_run):
    response = alice_client.get(reverse("run_detail", args=[gated_run.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="plan-form"' in html and "Collect logs" in html
    assert "offline model" in html
    assert f'ws-connect="/ws/runs/{gated_run.pk}/"' in html


def test_dashboard_lists_only_my_runs(alice_client, gated_run, bob):
    engine.create_run(bob, "plan_execute", "Bob's secret task", options={}, models=OFFLINE,
                      enqueue=False)
    html = alice_client.get(reverse("dashboard")).content.decode()
    assert "Collect logs, then find the error." in html and "secret" not in html
    assert "offline model" in html


def test_owner_can_approve(alice_client, gated_run):
    response = alice_client.post(reverse("plan_decision", args=[gated_run.pk]),
                                 {"action": "approve", "seq": gated_run.stage_seq,
                                  "steps": gated_run.state["plan"]["steps"]},
                                 HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    gated_run.refresh_from_db()
    assert gated_run.status == "executing"
    assert Approval.objects.get().action == "approve"


def test_owner_can_cancel(alice_client, gated_run):
    response = alice_client.post(reverse("cancel_run", args=[gated_run.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Run cancelled." in response.content.decode()
    gated_run.refresh_from_db()
    assert gated_run.status == "cancelled"


# --- starting a run -------------------------------------------------------------------------------
def test_start_run_creates_and_redirects(alice_client, alice, django_capture_on_commit_callbacks, monkeypatch):
    scheduled = []
    monkeypatch.setattr(engine.scheduling, "schedule", scheduled.append)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")  # requests are blocked in tests
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("start_run"), {
            "pattern": "plan_execute", "task": "Plan a picnic", "model_planner": "gpt-4o-mini",
            "max_cost_usd": "0.5", "max_tokens": "5000", "auto_approve": "on"})
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.owner == alice and run.task == "Plan a picnic"
    assert run.models_used == {"planner": "gpt-4o-mini", "executor": "offline/default",
                               "synthesizer": "offline/default"}
    assert run.options["auto_approve"] is True and run.max_tokens == 5000
    assert run.max_cost_usd == Decimal("0.5")
    assert scheduled == [run.pk]


def test_start_run_over_htmx_redirects_the_client(alice_client, monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)
    response = alice_client.post(reverse("start_run"), {"pattern": "plan_execute", "task": "x"},
                                 HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == Run.objects.get().get_absolute_url()


@pytest.mark.parametrize("data, message", [
    ({"task": ""}, "Describe the task."),
    ({"task": "   "}, "Describe the task."),
    ({"task": "x" * 8001}, "the limit is 8,000"),
    ({"task": "ok", "model_planner": "no-such-model-xyz"}, "Unknown model"),
    ({"task": "ok", "model_executor": "offline/other"}, "offline provider has only"),
    ({"task": "ok", "model_executor": "gpt-4o"}, "No credentials for “gpt-4o”"),
    ({"task": "ok", "max_cost_usd": "-1"}, "greater than or equal"),
    ({"task": "ok", "max_tokens": "abc"}, "Enter a whole number"),
    ({"task": "ok", "pattern": "nope"}, "Select a valid choice"),
])
def test_bad_start_input_shows_a_message_and_saves_nothing(alice_client, data, message):
    payload = {"pattern": "plan_execute", **data}
    for htmx in (False, True):
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        response = alice_client.post(reverse("start_run"), payload, **headers)
        assert response.status_code == 400
        assert message in response.content.decode()
    assert not Run.objects.exists()


# --- the plan gate ----------------------------------------------------------------------------------
def decide(client, run, **data):
    return client.post(reverse("plan_decision", args=[run.pk]), data, HTTP_HX_REQUEST="true")


@pytest.mark.parametrize("steps, message", [
    ([], "no steps left to carry out"),
    (["good", ""], "A step is empty"),
    (["  "], "no steps left to carry out"),
    (["s"] * 11, "At most 10 steps"),
])
def test_bad_plan_edits_keep_the_gate_and_the_typed_steps(alice_client, gated_run, steps, message):
    data = {"action": "approve", "seq": gated_run.stage_seq, "steps": steps}
    response = decide(alice_client, gated_run, **data)
    assert response.status_code == 400
    assert message in response.content.decode()
    gated_run.refresh_from_db()
    assert gated_run.status == "awaiting_plan_approval"
    assert PlanVersion.objects.filter(run=gated_run).count() == 1
    assert not Approval.objects.exists()


def test_empty_plan_via_engine_message(alice, gated_run):
    from agents_app.patterns.base import Decision, InvalidDecision
    with pytest.raises(InvalidDecision, match="no steps left to carry out"):
        engine.decide(gated_run, alice, gated_run.stage_seq, Decision("approve", edits=[]),
                      enqueue=False)


def test_reject_without_feedback_is_a_clear_400(alice_client, gated_run):
    response = decide(alice_client, gated_run, action="reject", seq=gated_run.stage_seq, feedback="")
    assert response.status_code == 400 and "Say what is wrong" in response.content.decode()
    gated_run.refresh_from_db()
    assert gated_run.status == "awaiting_plan_approval"


def test_double_click_gets_409_and_one_decision(alice_client, gated_run):
    seq, steps = gated_run.stage_seq, gated_run.state["plan"]["steps"]
    first = decide(alice_client, gated_run, action="approve", seq=seq, steps=steps)
    second = decide(alice_client, gated_run, action="approve", seq=seq, steps=steps)
    assert first.status_code == 200
    assert second.status_code == 409 and "no longer waiting" in second.content.decode()
    assert Approval.objects.count() == 1


def test_stale_tab_decision_is_409(alice_client, gated_run):
    response = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq - 1)
    assert response.status_code == 409
    assert not Approval.objects.exists()


@pytest.mark.parametrize("data", [{"action": "explode", "seq": 1}, {"action": "approve"},
                                  {"action": "approve", "seq": "x"}])
def test_garbled_decision_is_400(alice_client, gated_run, data):
    response = decide(alice_client, gated_run, **data)
    assert response.status_code == 400 and "could not be read" in response.content.decode()
    assert not Approval.objects.exists()


def test_decision_without_htmx_renders_the_whole_page(alice_client, gated_run):
    response = alice_client.post(reverse("plan_decision", args=[gated_run.pk]),
                                 {"action": "approve", "seq": gated_run.stage_seq - 1})
    assert response.status_code == 409 and "<html" in response.content.decode()


def test_csrf_is_enforced_on_every_post(alice, gated_run):
    from django.test import Client
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    for url in (reverse("start_run"), reverse("plan_decision", args=[gated_run.pk]),
                reverse("cancel_run", args=[gated_run.pk])):
        response = client.post(url, {"action": "approve", "seq": gated_run.stage_seq, "task": "t"},
                               HTTP_HX_REQUEST="true")
        assert response.status_code == 403
    gated_run.refresh_from_db()
    assert gated_run.status == "awaiting_plan_approval"


# --- history -------------------------------------------------------------------------------------
def test_history_filters_search_and_keyset_pages(alice_client, alice):
    for i in range(30):
        Run.objects.create(owner=alice, pattern="plan_execute", task=f"task number {i}",
                           status="completed" if i % 2 else "failed")
    page1 = alice_client.get(reverse("dashboard")).context
    assert len(page1["runs"]) == 25 and page1["next_before"] is not None
    page2 = alice_client.get(reverse("dashboard"), {"before": page1["next_before"]}).context
    assert len(page2["runs"]) == 5 and page2["next_before"] is None
    assert {r.pk for r in page1["runs"]}.isdisjoint({r.pk for r in page2["runs"]})
    failed = alice_client.get(reverse("dashboard"), {"status": "failed"}).context["runs"]
    assert len(failed) == 15 and all(r.status == "failed" for r in failed)
    found = alice_client.get(reverse("dashboard"), {"q": '"number 7"'}).context["runs"]
    assert [r.task for r in found] == ["task number 7"]  # a quoted phrase; words: 7, 17, 27
    response = alice_client.get(reverse("dashboard"), {"q": '"number 7"'}, HTTP_HX_REQUEST="true",
                                HTTP_HX_TARGET="history")
    assert b"<html" not in response.content and b"task number 7" in response.content


def test_history_ignores_garbled_filters(alice_client):
    response = alice_client.get(reverse("dashboard"), {"status": "bogus", "before": "-3"})
    assert response.status_code == 200
    assert "were not understood" in response.content.decode()


def test_model_output_is_sanitised_on_the_run_page(alice_client, alice):
    run = Run.objects.create(owner=alice, pattern="plan_execute", task="<script>alert(1)</script>",
                             status="completed",
                             answer="Hi <script>alert(2)</script> [x](javascript:alert(3)) <img src=x onerror=alert(4)>")
    html = alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "<script>alert" not in html
    assert 'href="javascript:' not in html
    assert "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


@pytest.mark.django_db
def test_the_run_page_counts_only_the_events_its_run_row_counts(alice_client, alice):
    """An event committed after the page read the run row (a stage finishing meanwhile) is
    left to the live channel: the page's cursor stays at the run's own count."""
    from agents_app.models import Event, Run
    from agents_app.run_page import run_context

    run = Run.objects.create(owner=alice, pattern="plan_execute", task="t", last_event_seq=1)
    Event.objects.create(run=run, seq=1, kind="run_created", message="started")
    stale = Run.objects.get(pk=run.pk)
    Event.objects.create(run=run, seq=2, kind="gate_opened", message="waiting")
    Run.objects.filter(pk=run.pk).update(last_event_seq=2)
    ctx = run_context(stale)
    assert ctx["last_seq"] == 1 and [e.seq for e in ctx["events"]] == [1]
    page = alice_client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200 and b"waiting" in page.content
