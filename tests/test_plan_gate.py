"""The plan gate does what the person decided: the plan approved is exactly the list of steps
on the screen (no step posted is an empty plan, refused, with rejection offered instead); step
text and feedback with control characters, too long or too many steps get a plain message,
the text shown again and nothing saved; a decision sent twice or from a stale page is recorded
once; a decision made is announced in a live status region that takes the focus."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.models import Approval, PlanVersion, StepResult

pytestmark = pytest.mark.django_db




def decide(client, run, htmx=True, **data):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.post(reverse("plan_decision", args=[run.pk]), data, **headers)


def nothing_decided(run, versions: int = 1) -> None:
    run.refresh_from_db()
    assert run.status == "awaiting_plan_approval"
    assert PlanVersion.objects.filter(run=run).count() == versions
    assert not Approval.objects.exists()
    assert not StepResult.objects.exists()


def editor_steps(html: str) -> list[str]:
    return re.findall(r'<textarea name="steps"[^>]*>([^<]*)</textarea>', html)


# --- the plan on the screen is the plan that runs ------------------------------------------------
@pytest.mark.parametrize("htmx", [True, False])
def test_approving_with_every_step_deleted_runs_nothing_and_offers_reject(alice_client,
                                                                         gated_run, htmx):
    # Deleting every step in the editor removes every "steps" field from the form.
    response = decide(alice_client, gated_run, htmx=htmx, action="approve",
                      seq=gated_run.stage_seq)
    assert response.status_code == 400
    html = response.content.decode()
    assert "The plan has no steps left to carry out, so there is nothing to approve." in html
    assert "reject the plan with feedback" in html
    assert '<details class="reject" open>' in html  # the reject form is open beside it
    assert editor_steps(html) == []  # the page shows the empty plan it was sent, not the old one
    nothing_decided(gated_run)
    engine.run_inline(gated_run.pk)
    nothing_decided(gated_run)  # and nothing runs behind the person's back


def test_blank_steps_only_are_an_empty_plan(alice_client, gated_run):
    response = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                      steps=["  ", "\n"])
    assert response.status_code == 400 and "no steps left" in response.content.decode()
    nothing_decided(gated_run)


def test_the_approved_plan_is_exactly_the_edited_steps(alice_client, gated_run):
    edited = ["Find the error in the logs", "Write down its cause"]
    response = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                      steps=edited)
    assert response.status_code == 200
    run = engine.run_inline(gated_run.pk)
    assert run.status == "completed", run.error
    assert [s.description for s in StepResult.objects.filter(run=run).order_by("index")] == edited
    latest = PlanVersion.objects.filter(run=run).order_by("-version").first()
    assert latest.steps == edited and latest.author == "alice"
    assert Approval.objects.get().edited is True


def test_the_steps_shown_unchanged_approve_the_plan_as_it_is(alice_client, gated_run):
    steps = gated_run.state["plan"]["steps"]
    assert decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                  steps=steps).status_code == 200
    run = engine.run_inline(gated_run.pk)
    assert [s.description for s in StepResult.objects.filter(run=run).order_by("index")] == steps
    assert PlanVersion.objects.filter(run=run).count() == 1
    assert Approval.objects.get().edited is False


# --- bad input: a clear message, the text shown again, nothing saved --------------------------
@pytest.mark.parametrize("step, named", [
    ("Collect\x00 logs", "U+0000 (NUL)"),
    ("Collect\x1b[31m logs", "U+001B (ESC)"),
    ("Collect\u202e logs", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
])
def test_control_characters_in_a_step_are_refused_and_shown_removed(alice_client, gated_run,
                                                                    step, named):
    response = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                      steps=["Read the logs", step])
    assert response.status_code == 400
    html = response.content.decode()
    assert f"Step 2 contains invisible control characters ({named})" in html
    assert "they have been removed: check the text and send it again." in html
    shown = editor_steps(html)
    assert shown[0] == "Read the logs" and "\x00" not in shown[1] and "\x1b" not in shown[1]
    assert "\u202e" not in shown[1] and shown[1].startswith("Collect")
    nothing_decided(gated_run)
    # Sending the text as shown again approves it.
    assert decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                  steps=shown).status_code == 200
    assert PlanVersion.objects.filter(run=gated_run).latest("version").steps[1] == shown[1]


def test_tab_and_newline_are_ordinary_text(alice_client, gated_run):
    response = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                      steps=["Read\tthe logs\r\nslowly"])
    assert response.status_code == 200
    assert PlanVersion.objects.filter(run=gated_run).latest("version").steps == [
        "Read\tthe logs\nslowly"]


@pytest.mark.parametrize("steps, message", [
    (["ok", "y" * 2001], "Step 2 is 2,001 characters; the limit is 2,000."),
    (["s"] * 11, "At most 10 steps; this plan has 11."),
    (["good", ""], "A step is empty: write it or delete it."),
])
def test_too_long_too_many_or_blank_steps(alice_client, gated_run, steps, message):
    response = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                      steps=steps)
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html and editor_steps(html) == steps
    nothing_decided(gated_run)


@pytest.mark.parametrize("feedback, message", [
    ("Add a step\x00", "Your feedback contains invisible control characters (U+0000 (NUL))"),
    ("x" * 4001, "at most 4000 characters"),
])
def test_bad_feedback_gets_its_own_message_and_is_kept(alice_client, gated_run, feedback,
                                                      message):
    response = decide(alice_client, gated_run, action="reject", seq=gated_run.stage_seq,
                      feedback=feedback)
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html and "reload the page" not in html
    assert feedback.replace("\x00", "") in html  # what was typed is there to correct
    nothing_decided(gated_run)


# --- one decision, once -----------------------------------------------------------------------
def test_an_edited_approval_sent_twice_is_recorded_once(alice_client, gated_run):
    seq, edited = gated_run.stage_seq, ["Only this step"]
    first = decide(alice_client, gated_run, action="approve", seq=seq, steps=edited)
    second = decide(alice_client, gated_run, action="approve", seq=seq, steps=edited)
    assert first.status_code == 200
    assert second.status_code == 409 and "no longer waiting" in second.content.decode()
    assert Approval.objects.count() == 1
    assert PlanVersion.objects.filter(run=gated_run).count() == 2  # v1, and the edit once


def test_a_stale_page_cannot_approve_the_plan_it_no_longer_shows(alice_client, gated_run):
    old_seq, old_steps = gated_run.stage_seq, gated_run.state["plan"]["steps"]
    assert decide(alice_client, gated_run, action="reject", seq=old_seq,
                  feedback="Add a step that checks the disk.").status_code == 200
    run = engine.run_inline(gated_run.pk)
    assert run.status == "awaiting_plan_approval" and run.state["plan"]["version"] == 2
    response = decide(alice_client, run, action="approve", seq=old_seq, steps=old_steps)
    assert response.status_code == 409
    run.refresh_from_db()
    assert run.status == "awaiting_plan_approval"
    assert list(Approval.objects.values_list("action", flat=True)) == ["reject"]


# --- the decision is announced and focused ------------------------------------------------------
def test_a_decision_is_announced_in_a_live_region_that_takes_focus(alice_client, gated_run):
    page = alice_client.get(gated_run.get_absolute_url()).content.decode()
    assert '<div id="gate-status" class="gate-status" role="status" aria-live="polite" ' \
        'data-as-of=' in page
    response = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                      steps=["Only this step"])
    html = response.content.decode()
    status = re.search(r'<div id="gate-status"[^>]*hx-swap-oob="innerHTML">(.*?)</div>', html,
                       re.DOTALL)
    assert status, html[-500:]
    assert re.match(r'<p class="notice" tabindex="-1" autofocus data-focus-now><span class="decided">At [\d:]+, alice '
                    r'edited and approved plan v2\.</span> The executor is carrying out', status.group(1))


def test_a_refusal_is_an_alert_that_takes_focus(alice_client, gated_run):
    html = decide(alice_client, gated_run, action="approve",
                  seq=gated_run.stage_seq).content.decode()
    assert '<p class="error" role="alert" tabindex="-1" autofocus data-focus>The plan has no steps' in html


def test_another_user_cannot_decide_and_nothing_changes(bob_client, gated_run):
    response = decide(bob_client, gated_run, action="approve", seq=gated_run.stage_seq,
                      steps=["Take over"])
    assert response.status_code == 404
    nothing_decided(gated_run)


def test_anonymous_is_sent_to_sign_in(client, gated_run):
    response = decide(client, gated_run, action="approve", seq=gated_run.stage_seq,
                      steps=["Take over"])
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    nothing_decided(gated_run)


@pytest.mark.parametrize("steps, status, said", [
    (["step"] * 1500, 413, "more than 1,000 fields"),  # Django's field cap (FormOverLimits)
    (["x" * 3_000_000], 400, ""),  # the gate's own limit on a step's length
])
def test_a_flood_of_steps_is_refused_in_words_not_a_500(alice_client, gated_run, steps,
                                                       status, said):
    response = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                      steps=steps)
    assert response.status_code == status
    assert said in response.content.decode()
    nothing_decided(gated_run)


@pytest.mark.parametrize("htmx", [True, False])
def test_a_rejection_without_feedback_keeps_the_reject_box_open_beside_its_error(
        alice_client, gated_run, htmx):
    """Issue 32: the "Reject with feedback" box closed as its error appeared, hiding the very
    field the error asks for."""
    response = decide(alice_client, gated_run, htmx=htmx, action="reject",
                      seq=gated_run.stage_seq, feedback="")
    assert response.status_code == 400
    html = response.content.decode()
    assert "Say what is wrong with the plan, so the planner can fix it." in html
    assert '<details class="reject" open>' in html
    nothing_decided(gated_run)
