"""Issue 32, "Pages that stay true": the run page's status line (``#gate-status``) is derived
from the run's rows, so it says what a person last decided and what the run is doing since —
on the page, in the answer to the decision, and in every live update — and never keeps saying
what stopped being true ("The planner is writing a new version…" once the new plan waits,
"Its steps are being carried out" on a completed run). A decision sent from a page that the
run has moved on from is refused naming who decided what and when, and what the person typed
comes back to them, never applied."""

from __future__ import annotations

import html as html_lib
import re

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.live import panels_for, render_live
from agents_app.models import Approval, PlanVersion, Run, StepResult

pytestmark = pytest.mark.django_db

TIME = r"\d\d:\d\d:\d\d"


def decide(client, run, **data):
    return client.post(reverse("plan_decision", args=[run.pk]), data, HTTP_HX_REQUEST="true")


def status_line(html: str) -> str:
    """The text of the page's status line (``#gate-status``), tags and spacing taken out."""
    found = re.search(r'<div id="gate-status"[^>]*>(.*?)</div>', html, re.DOTALL)
    assert found, html[:3000]
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def live_update(run: Run, after: int) -> str:
    """The live channel's message for the events of ``run`` after ``after`` (as a page that
    had seen up to ``after`` receives it)."""
    run.refresh_from_db()
    events = list(run.events.filter(seq__gt=after, seq__lte=run.last_event_seq))
    return render_live(run, events, panels_for(run, {e.kind for e in events}))


def test_after_a_rejection_the_line_follows_the_run_to_the_new_plan_waiting(alice_client,
                                                                            gated_run):
    seen = gated_run.last_event_seq
    answer = decide(alice_client, gated_run, action="reject", seq=gated_run.stage_seq,
                    feedback="Add a step that checks the disk.")
    assert answer.status_code == 200
    said = status_line(answer.content.decode())
    assert re.fullmatch(rf"At {TIME}, alice rejected plan v1: Add a step that checks the disk\. "
                        r"The planner is writing a new version of the plan\.", said), said

    run = engine.run_inline(gated_run.pk)  # the planner writes v2; the run waits again
    assert run.status == "awaiting_plan_approval" and run.state["plan"]["version"] == 2
    for html in (live_update(run, seen), alice_client.get(run.get_absolute_url()).content
                 .decode()):
        said = status_line(html)
        assert "writing a new version" not in said
        assert re.fullmatch(rf"At {TIME}, alice rejected plan v1: Add a step that checks the "
                            r"disk\. Waiting for you: approve, edit or reject the plan\.",
                            said), said


def test_on_a_completed_run_the_line_says_it_completed(alice_client, gated_run):
    seen = gated_run.last_event_seq
    answer = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                    steps=gated_run.state["plan"]["steps"])
    assert "The executor is carrying out the plan's steps." in status_line(
        answer.content.decode())
    run = engine.run_inline(gated_run.pk)
    assert run.status == "completed"
    for html in (live_update(run, seen), alice_client.get(run.get_absolute_url()).content
                 .decode()):
        said = status_line(html)
        assert "carrying out" not in said and "being carried out" not in said
        assert re.fullmatch(rf"At {TIME}, alice approved plan v1\. The run completed; its "
                            r"answer is below\.", said), said


def test_the_line_is_in_every_live_update_and_takes_no_focus(alice_client, gated_run):
    """A live update carries the line (replacing the region's content, not the region, which
    keeps the focus a decision gave it); only the answer to a decision focuses it."""
    answer = decide(alice_client, gated_run, action="approve", seq=gated_run.stage_seq,
                    steps=gated_run.state["plan"]["steps"]).content.decode()
    assert re.search(r'<div id="gate-status"[^>]*hx-swap-oob="innerHTML"><p class="notice" '
                     r'tabindex="-1" autofocus data-focus-now><span class="decided">At ', answer)
    seen = Run.objects.get(pk=gated_run.pk).last_event_seq
    run = engine.run_inline(gated_run.pk)
    html = live_update(run, seen)
    assert re.search(r'<div id="gate-status" class="gate-status" role="status" '
                     r'aria-live="polite" data-as-of="\d+" hx-swap-oob="innerHTML"><p '
                     r'class="notice"><span class="decided">At ', html)
    assert "data-focus-now" not in html and "autofocus" not in html


def test_a_run_nobody_decided_on_has_no_line(alice_client, gated_run):
    assert status_line(alice_client.get(gated_run.get_absolute_url()).content.decode()) == ""


# --- a decision from a page the run has moved on from -------------------------------------
def test_a_stale_approval_names_who_decided_and_keeps_the_edit_unapplied(alice_client,
                                                                        gated_run):
    seq, steps = gated_run.stage_seq, gated_run.state["plan"]["steps"]
    assert decide(alice_client, gated_run, action="approve", seq=seq,
                  steps=steps).status_code == 200
    edited = ["Read the <b>last</b> hundred lines of the log", *steps[1:]]
    response = decide(alice_client, gated_run, action="approve", seq=seq, steps=edited)
    assert response.status_code == 409
    html = response.content.decode()
    refusal = re.search(r'<p class="error" role="alert"[^>]*>(.*?)</p>', html, re.DOTALL)
    assert refusal, html[:3000]
    assert re.search(rf"no longer waiting for that decision.*At {TIME}, alice approved plan "
                     r"v1\.", refusal.group(1)), refusal.group(1)
    # What the person typed comes back, escaped, outside the panels (live updates replace
    # those), in a read-only box: the steps as they were on their screen.
    unsent = re.search(r'<div id="unsent"[^>]*hx-swap-oob="innerHTML">(.*?)</div>\s*$', html,
                       re.DOTALL)
    assert unsent, html[-3000:]
    assert "Read the &lt;b&gt;last&lt;/b&gt; hundred lines of the log" in unsent.group(1)
    assert "<b>last</b>" not in html
    assert "readonly" in unsent.group(1)
    # ... and is not applied: one approval, of the plan as the planner wrote it.
    assert Approval.objects.count() == 1 and PlanVersion.objects.count() == 1
    assert gated_run.plan_versions.get().steps == steps


def test_a_stale_rejection_keeps_the_feedback(alice_client, gated_run):
    seq = gated_run.stage_seq
    assert decide(alice_client, gated_run, action="reject", seq=seq,
                  feedback="More detail.").status_code == 200
    run = engine.run_inline(gated_run.pk)
    response = decide(alice_client, run, action="reject", seq=seq,
                      feedback="Check the disk first.")
    assert response.status_code == 409
    html = response.content.decode()
    assert re.search(rf"At {TIME}, alice rejected plan v1: More detail\.", html)
    assert "Check the disk first." in html.split('id="unsent"', 1)[1]
    run.refresh_from_db()
    assert run.status == "awaiting_plan_approval"
    assert list(Approval.objects.values_list("feedback", flat=True)) == ["More detail."]
    assert not StepResult.objects.exists()


def test_an_unchanged_plan_sent_late_brings_back_nothing_to_copy(alice_client, gated_run):
    seq, steps = gated_run.stage_seq, gated_run.state["plan"]["steps"]
    decide(alice_client, gated_run, action="approve", seq=seq, steps=steps)
    html = decide(alice_client, gated_run, action="approve", seq=seq,
                  steps=steps).content.decode()
    assert "no longer waiting" in html and 'id="unsent"' not in html
