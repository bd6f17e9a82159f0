"""The trace: each model call's prompt and reply, for the run's owner only, with secrets
blanked, JSON indented and stage names in words."""

from decimal import Decimal

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.llm.gateway import Gateway, GatewayConfig, redact
from agents_app.models import ModelCall
from agents_app.trace import FOLD_CHARS, stage_label
from tests.conftest import OFFLINE

pytestmark = pytest.mark.django_db

KEY = "sk-live0123456789abcdefXYZ"  # the shape of a provider key


@pytest.fixture
def done_run(alice):
    run = engine.create_run(alice, "plan_execute", f"Collect logs with key {KEY}, then find the "
                            "error and write a report.", options={"auto_approve": True},
                            models=OFFLINE, max_cost_usd=Decimal("1"), max_tokens=100_000,
                            enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    return run


def call_url(call):
    return reverse("model_call", args=[call.run_id, call.pk])


def test_the_journal_stores_the_prompt_with_secrets_blanked(done_run):
    calls = list(done_run.model_calls.all())
    assert calls and all(c.messages for c in calls)
    stored = " ".join(m["content"] for c in calls for m in c.messages)
    assert "Collect logs with key" in stored and KEY not in stored


def test_owner_sees_prompt_and_reply_with_json_indented(alice_client, done_run):
    planner = done_run.model_calls.get(role="planner")
    response = alice_client.get(call_url(planner))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Collect logs with key" in html and KEY not in html
    assert "<strong>system</strong>" in html or "<strong>user</strong>" in html
    # The planner's JSON reply, indented and escaped: each key on its own line.
    assert '{\n  &quot;' in html
    assert "Planning (plan v1)" in html


def test_htmx_gets_only_the_prompt_and_reply(alice_client, done_run):
    call = done_run.model_calls.first()
    html = alice_client.get(call_url(call), HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div class="call-io">') and "<html" not in html


def test_another_user_gets_404(bob_client, done_run):
    call = done_run.model_calls.first()
    assert bob_client.get(call_url(call)).status_code == 404
    # Nor through a run of their own: a call is found only under its run.
    assert bob_client.get(reverse("model_call", args=[done_run.pk, call.pk + 1000])
                          ).status_code == 404


def test_a_call_of_another_run_is_404(alice_client, alice, done_run):
    other = engine.create_run(alice, "plan_execute", "Another task", options={},
                              models=OFFLINE, enqueue=False)
    call = done_run.model_calls.first()
    assert alice_client.get(reverse("model_call", args=[other.pk, call.pk])).status_code == 404


def test_anonymous_is_sent_to_sign_in(client, done_run):
    response = client.get(call_url(done_run.model_calls.first()))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_run_page_names_stages_in_words_and_links_each_call(alice_client, done_run):
    html = alice_client.get(done_run.get_absolute_url()).content.decode()
    assert "Planning (plan v1)" in html and "Step 1 of plan v1" in html
    assert "Final answer" in html
    assert ">plan:1<" not in html and ">step:1:0<" not in html
    for call in done_run.model_calls.all():
        assert f'hx-get="{call_url(call)}"' in html


def test_reply_and_prompt_are_escaped_masked_and_large_ones_folded(alice_client, done_run):
    call = ModelCall.objects.create(
        run=done_run, stage="synthesize", key="x", role="synthesizer", model="offline/default",
        messages=[{"role": "system", "content": "a" * (FOLD_CHARS + 1)},
                  {"role": "user", "content": "<img src=x onerror=alert(1)>"}],
        response=f'<script>alert(1)</script> token: ghp_{"A" * 36} and {KEY}')
    html = alice_client.get(call_url(call)).content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;" in html
    assert "<img src=x" not in html
    assert "ghp_" + "A" * 36 not in html and KEY not in html
    assert f'<details class="message"><summary><strong>system</strong> <small>{FOLD_CHARS + 1:,}' \
        in html


def test_a_fenced_json_reply_is_indented(alice_client, done_run):
    call = ModelCall.objects.create(run=done_run, stage="plan:2", key="y", role="planner",
                                    model="offline/default", messages=[],
                                    response='```json\n{"steps": ["a"], "goal": "g"}\n```')
    html = alice_client.get(call_url(call)).content.decode()
    assert '{\n  &quot;steps&quot;: [\n    &quot;a&quot;\n  ],' in html
    assert "was not recorded" in html


@pytest.mark.parametrize("pattern, stage, words", [
    ("plan_execute", "step:2:0", "Step 1 of plan v2"),
    ("plan_execute", "start", "Getting started"),
    ("plan_execute_review", "execute:1:2", "Round 2: changing the code (plan v1)"),
    ("plan_execute_review", "review:1:2:", "Round 2: review (plan v1)"),
    ("reflective", "critique:3", "Critique of draft 3"),
    ("debate", "judge", "Judge's conclusion"),
    ("team_lead", "review:1", "Lead's review of batch 1"),
    ("rewoo", "organize:2", "Answer, draft 2"),
    ("react", "act:4", "Iteration 4: tool call"),
    ("code_review", "reflect", "Reviewers reading each other's findings"),
    ("unknown_pattern", "some_stage:3", "Some stage 3"),
    ("react", "act", "Act"),  # a number missing: words without it, never an error
])
def test_stage_labels(pattern, stage, words):
    assert stage_label(pattern, stage) == words


class Journal:
    """The gateway's journal, keeping what it would store."""

    def __init__(self):
        self.rows = []

    def replay(self, key, role="", model="", messages=None):
        return None

    def before_call(self, key, role, model):
        return None

    def record(self, key, outcome):
        self.rows.append(outcome)


def test_gateway_hands_the_journal_redacted_messages(scripted):
    scripted.fn = lambda m, i: "fine"

    journal = Journal()
    g = Gateway(GatewayConfig(routes={"executor": "scripted/x"}, allow_network=False), journal)
    g.complete("executor", [{"role": "user", "content": f"use {KEY} please"}])
    assert scripted.calls[0].messages[0]["content"] == f"use {KEY} please"  # the model sees it
    stored = journal.rows[0].messages[0]["content"]
    assert KEY not in stored and stored.startswith("use ")


STRIPE = "sk_live_" + "51HqLyjWDarjtT1zdp7dcXYZabcdEFGH"
GITLAB = "glpat-" + "xY9zAbCdEfGhIjKlMnOp"
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1c7Qv3m9hRkq8Zt2Yp0sW4eXbN6uLfJ\n"
       "-----END RSA PRIVATE KEY-----")


def test_payment_and_source_hosting_keys_and_private_keys_are_shortened_in_the_journal(
        scripted):
    """Keys of the formats a review knows are kept as a prefix and their length, never whole,
    in a run's stored prompts too (the gateway's own patterns did not cover them)."""
    scripted.fn = lambda m, i: f"echoing {STRIPE}"

    journal = Journal()
    g = Gateway(GatewayConfig(routes={"executor": "scripted/x"}, allow_network=False), journal)
    g.complete("executor", [{"role": "user", "content": f"deploy with {STRIPE} and {GITLAB}\n{PEM}"}])
    stored = journal.rows[0].messages[0]["content"]
    for secret in (STRIPE, GITLAB, "MIIEowIBAAKCAQEA1c7Qv3m9hRkq8Zt2Yp0sW4eXbN6uLfJ"):
        assert secret not in stored
    assert "sk_live_" in stored and "chars)" in stored  # a prefix and the length remain
    assert redact(f"reply {STRIPE}") != f"reply {STRIPE}" and STRIPE not in redact(STRIPE)


def test_the_full_page_lists_no_prompt_as_a_site_message(alice_client, done_run):
    html = alice_client.get(call_url(done_run.model_calls.first())).content.decode()
    assert 'class="messages"' not in html
