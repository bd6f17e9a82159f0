"""Secrets: provider keys set in the environment never reach the database, the logs, the
pages, the exports or the admin, even when a provider's error message quotes the key; and
secret-looking strings inside a reviewed diff are not echoed into the logs."""

from __future__ import annotations

import logging

import litellm
import pytest
from django.apps import apps
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from agents_app import engine
from agents_app.models import ModelCall, Run
from reviews_app import services
from reviews_app.models import Review
from tests.conftest import OFFLINE, scripted_models

pytestmark = pytest.mark.django_db(transaction=True)

OPENAI_KEY = "sk-test-SECRET-abcdef1234567890"
ANTHROPIC_KEY = "sk-ant-test-SECRET-0987654321fedcba"
# Distinctive parts too, so that a partly masked key still counts as a leak.
KEY_PARTS = (OPENAI_KEY, ANTHROPIC_KEY, "SECRET-abcdef1234567890", "0987654321fedcba")

AWS_KEY_ID = "AKIAQUORUMTESTKEY7EX"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiQuorumTESTKEY"
DIFF_SK = "sk-live-DIFFSECRET-1234567890abcdef"
DIFF_SECRETS = (AWS_KEY_ID, AWS_SECRET, DIFF_SK)
SECRET_DIFF = f'''diff --git a/deploy/credentials.py b/deploy/credentials.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/deploy/credentials.py
@@ -0,0 +1,6 @@
+import subprocess
+AWS_ACCESS_KEY_ID = "{AWS_KEY_ID}"
+AWS_SECRET_ACCESS_KEY = "{AWS_SECRET}"
+OPENAI_API_KEY = "{DIFF_SK}"
+password = "{AWS_SECRET}"
+subprocess.call("aws s3 ls --secret %s" % AWS_SECRET_ACCESS_KEY, shell=True)
'''


class Collect(logging.Handler):
    """Every record, formatted with its traceback, from every logger."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))

    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def all_logs(caplog):
    """The root logger and the quorum loggers at DEBUG (caplog), plus a handler on each logger
    that does not propagate (LiteLLM's, at the level the settings give them)."""
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="quorum")
    handler = Collect()
    loggers = [logging.getLogger()] + [
        lg for lg in logging.root.manager.loggerDict.values()
        if isinstance(lg, logging.Logger) and not lg.propagate]
    for lg in loggers:
        lg.addHandler(handler)
    yield lambda: handler.text() + "\n" + "\n".join(
        logging.Formatter("%(name)s %(message)s").format(r) for r in caplog.records)
    for lg in loggers:
        lg.removeHandler(handler)


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)


def leaks(text: str, secrets=KEY_PARTS) -> list[str]:
    return [s for s in secrets if s in text]


def database_text() -> str:
    """Every row of every table (the apps', auth, sessions, axes, ...) as text."""
    out = []
    for model in apps.get_models():
        for row in model.objects.all().values():
            out.append(f"{model._meta.label} {row!r}")
    return "\n".join(out)


def pages(client: Client, runs: list[Run]) -> dict[str, str]:
    urls = ["/", reverse("review_list"), reverse("change_new")]
    for run in runs:
        urls.append(run.get_absolute_url())
        review = Review.objects.filter(run=run).first()
        if review:
            urls += [reverse("review_file", args=[run.pk, i]) for i in range(len(review.files))]
            urls += [f"{reverse('export_review', args=[run.pk])}?format={fmt}&scope={scope}"
                     for fmt in ("markdown", "json", "sarif") for scope in ("all", "accepted")]
    out = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        out[url] = response.content.decode()
    return out


def admin_pages(client: Client) -> dict[str, str]:
    out = {}
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        meta = model._meta
        urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        for pk in model.objects.order_by("pk").values_list("pk", flat=True)[:30]:
            urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[pk]))
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        out[url] = response.content.decode()
    return out


def key_echoing_provider(messages, info):
    """A provider whose errors quote the key it was given, in the shapes LiteLLM raises."""
    if info.role == "executor":
        return litellm.AuthenticationError(
            f"Incorrect API key provided: {OPENAI_KEY}. You can find your API key at ...",
            llm_provider="openai", model="gpt-4o-mini")
    if info.role == "security":
        return RuntimeError(f"upstream said: invalid x-api-key {ANTHROPIC_KEY}")
    if info.role == "synthesizer":
        return litellm.RateLimitError(f"429 for key {OPENAI_KEY}", llm_provider="openai",
                                      model="gpt-4o-mini")
    return None


def test_provider_keys_appear_nowhere(keys, all_logs, capfd, scripted, alice,
                                      django_user_model):
    # A run that completes through LiteLLM's real call path.
    ok = engine.run_inline(engine.create_run(
        alice, "plan_execute", "Collect logs, then find the error", options={"auto_approve": True},
        models=scripted_models(), enqueue=False).pk)
    assert ok.status == "completed"

    # Runs whose model calls fail with errors quoting the key.
    scripted.fn = lambda m, i: key_echoing_provider(m, i) or scripted.offline_like(m, i)
    failed = engine.run_inline(engine.create_run(
        alice, "plan_execute", "Collect logs, then find the error",
        options={"auto_approve": True, "max_replans": 0}, models=scripted_models(),
        enqueue=False).pk)
    assert failed.status == "failed"
    inp = services.from_text(SECRET_DIFF)
    review = engine.run_inline(services.start_review(
        alice, inp, services.prepare(inp), enqueue=False,
        models={"security": "scripted/main", "synthesizer": "scripted/main",
                "architecture": "offline/default", "style": "offline/default"}).pk)
    assert review.is_terminal or review.is_waiting
    errors = list(ModelCall.objects.exclude(error="").values_list("role", "error"))
    # The failures really happened, and were recorded with the key blanked out.
    assert {role for role, _ in errors} >= {"executor", "security", "synthesizer"}, errors
    assert all("[redacted]" in e for _, e in errors), errors

    assert leaks(database_text()) == []
    client = Client()
    client.force_login(alice)
    for url, html in pages(client, [ok, failed, review]).items():
        assert leaks(html) == [], url
    root = django_user_model.objects.create_superuser("root", password="root-password-123")
    staff = Client()
    staff.force_login(root)
    for url, html in admin_pages(staff).items():
        assert leaks(html) == [], url
    logs = all_logs()
    assert "model call" in logs  # the gateway's lines were captured
    assert leaks(logs) == []
    out, err = capfd.readouterr()
    assert leaks(out + err) == []


def test_secrets_in_a_reviewed_diff_are_not_logged(all_logs, capfd, alice):
    inp = services.from_text(SECRET_DIFF)
    run = engine.run_inline(services.start_review(
        alice, inp, services.prepare(inp), enqueue=False,
        models={role: "offline/default" for role in
                ("security", "architecture", "style", "synthesizer")}).pk)
    assert run.status == "awaiting_triage"
    review = Review.objects.get(run=run)
    # The review did read the file (its analyzers flagged it) ...
    assert review.findings.filter(file="deploy/credentials.py").exists()
    logs = all_logs()
    assert "model call" in logs  # ... and the gateway logged its calls
    # ... but no log line and no console output carries the secrets.
    assert leaks(logs, DIFF_SECRETS) == []
    out, err = capfd.readouterr()
    assert leaks(out + err, DIFF_SECRETS) == []
    # The person's own page shows their diff with each secret shortened to a prefix and its
    # length: enough to know which key it is, not enough to use it.
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("review_detail", args=[run.pk])).content.decode()
    assert "AKIA…(20 chars)" in page
    assert leaks(page, DIFF_SECRETS) == []


def test_offline_defaults_never_put_a_key_in_a_run(keys, alice):
    """The key is read by LiteLLM from the environment: nothing Quorum stores for a run (its
    models, options, state) carries it."""
    run = engine.run_inline(engine.create_run(
        alice, "plan_execute", "a, then b", options={"auto_approve": True}, models=OFFLINE,
        enqueue=False).pk)
    assert run.status == "completed"
    assert leaks(database_text()) == []


SELF_HOSTED_KEY = "lmstudio-key-0123456789abcdef"


def test_errors_quoting_an_unusual_key_or_the_prompt_are_blanked(monkeypatch, all_logs, capfd,
                                                                 scripted, alice):
    """A key of no known shape (a self-hosted server's) is still this server's secret, and a
    provider error that quotes the prompt does not carry the diff's secrets into the logs or
    the database."""
    monkeypatch.setenv("LOCAL_LLM_API_KEY", SELF_HOSTED_KEY)

    def provider(messages, info):
        if info.role == "security":
            prompt = "\n".join(m["content"] for m in messages)
            at = prompt.find("AWS_ACCESS")
            return RuntimeError(f"invalid api key {SELF_HOSTED_KEY}; input_value="
                                + prompt[max(0, at - 200):at + 400])
        return scripted.offline_like(messages, info)

    scripted.fn = provider
    inp = services.from_text(SECRET_DIFF)
    engine.run_inline(services.start_review(
        alice, inp, services.prepare(inp), enqueue=False,
        models={"security": "scripted/main", "synthesizer": "offline/default",
                "architecture": "offline/default", "style": "offline/default"}).pk)
    errors = list(ModelCall.objects.filter(role="security").values_list("error", flat=True))
    assert errors and all("[redacted]" in e for e in errors), errors
    secrets = (*DIFF_SECRETS, SELF_HOSTED_KEY)
    assert leaks(all_logs(), secrets) == []
    assert leaks(database_text(), (SELF_HOSTED_KEY,)) == []
    assert leaks("\n".join(errors), secrets) == []  # the diff itself is stored: it is theirs
    out, err = capfd.readouterr()
    assert leaks(out + err, secrets) == []
    assert all("Traceback" not in e for e in errors)
