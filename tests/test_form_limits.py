"""A form past Django's limits (fields or bytes) answers 413 with a sentence, before any view
runs: a page of its own, or plain text for htmx (agents_app/middleware.py FormOverLimits).
Anonymous, signed-in owner and another user all get the same refusal; nothing is saved."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from agents_app.models import Approval, Run

pytestmark = pytest.mark.django_db

TOO_MANY = "&".join(f"f{i}=x" for i in range(1_001))


@pytest.fixture
def alice_run(alice):
    from agents_app.engine import create_run

    return create_run(alice, "plan_execute", "Collect logs, then find the error.",
                      options={}, models={"planner": "offline/default"}, enqueue=False)


@pytest.mark.parametrize("who", ["anonymous", "owner", "another user"])
def test_too_many_fields_is_a_413_page_for_everyone(client, alice, alice_run, who):
    if who == "owner":
        client.force_login(alice)
    elif who == "another user":
        client.force_login(get_user_model().objects.create_user("mallory", password="x" * 12))
    response = client.post(f"/runs/{alice_run.pk}/plan/", TOO_MANY,
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code == 413
    text = response.content.decode()
    assert "more than 1,000 fields" in text and "nothing was saved" in text
    assert f'href="/runs/{alice_run.pk}/"' in text
    assert not Approval.objects.exists()
    assert Run.objects.get(pk=alice_run.pk).status == alice_run.status


def test_htmx_gets_the_sentence_as_plain_text(client, alice, alice_run):
    client.force_login(alice)
    response = client.post(f"/runs/{alice_run.pk}/plan/", TOO_MANY + "&action=approve",
                           content_type="application/x-www-form-urlencoded",
                           headers={"HX-Request": "true"})
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("This form sent more than 1,000 fields")
    assert not Approval.objects.exists()


def test_too_many_bytes_is_a_413_too(client, alice, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    client.force_login(alice)
    response = client.post("/runs/new/", "pattern=plan_execute&task=" + "x" * 20_000,
                           content_type="application/x-www-form-urlencoded",
                           headers={"HX-Request": "true"})
    assert response.status_code == 413
    assert response.content.decode().startswith("This form sent more than 10,000 bytes")
    assert not Run.objects.exists()


def test_other_bodies_and_forms_within_the_limits_pass_through(client, alice):
    client.force_login(alice)
    within = "&".join(f"f{i}=x" for i in range(900)) + "&task=Plan+a+picnic&pattern=plan_execute"
    response = client.post("/runs/new/", within,
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code == 302  # the start form's own answer: the run was started
    assert Run.objects.get().task == "Plan a picnic"
    # A JSON body (a webhook's) is not a form: never parsed here, whatever its size.
    response = client.post("/webhooks/github/nosuchhook/", {"a": list(range(5_000))},
                           content_type="application/json")
    assert response.status_code == 404


def test_settings_at_their_upper_bounds_start_and_run(client, alice, settings):
    """The largest budget and lease the settings allow (config/env.py) are stored and run:
    a default budget past the columns' range once failed the run on its first stage
    (decimal.InvalidOperation), a lease past timedelta's range with OverflowError."""
    from agents_app.engine import run_inline

    settings.QUORUM_DEFAULT_MAX_COST_USD = 1000.0
    settings.QUORUM_DEFAULT_MAX_TOKENS = 50_000_000
    settings.QUORUM_STAGE_LEASE_SECONDS = 1e9
    client.force_login(alice)
    response = client.post("/runs/new/", {"pattern": "plan_execute",
                                          "task": "Collect logs, then find the error."})
    assert response.status_code == 302
    run = Run.objects.get()
    assert (run.max_cost_usd, run.max_tokens) == (1000, 50_000_000)
    assert run_inline(run.pk).status == "awaiting_plan_approval"


def test_a_pattern_setting_out_of_range_is_named_and_can_be_overridden(client, alice, settings):
    """QUORUM_MAX_STEPS past the option's limit: the empty field's error says which setting
    it came from (nobody typed it), nothing is saved, and a typed value still starts a run."""
    settings.QUORUM_MAX_STEPS = 100
    client.force_login(alice)
    data = {"pattern": "plan_execute", "task": "Collect logs, then find the error."}
    response = client.post("/runs/new/", data)
    assert response.status_code == 400
    text = response.content.decode()
    assert "less than or equal to 30" in text
    assert "the site&#x27;s setting QUORUM_MAX_STEPS is out of range" in text
    assert not Run.objects.exists()
    assert client.post("/runs/new/", {**data, "max_steps": "5"}).status_code == 302
    assert Run.objects.get().options["max_steps"] == 5
