"""Secrets in a reviewed change: found in every file type with a severity that follows the
key's format, and never repeated whole in findings, stored rows, pages, exports, logs or the
trace (a short prefix and the length instead)."""

from __future__ import annotations

import logging

import pytest
from django.test import Client
from django.urls import reverse

from agents_app import engine
from agents_app.models import Event, ModelCall, Run
from common import analyzers, secret_keys
from common.secret_keys import mask, mask_lines, scan_files, scan_lines
from reviews_app import services
from reviews_app.models import Review
from reviews_app.pipeline import offline_review, synthesis

AWS_KEY_ID = "AKIAQUORUMTESTKEY7EX"
STRIPE_KEY = "sk_live_51QuorumTestKey0000000000abcdEFGH"
GITHUB_TOKEN = "ghp_QuorumTestToken0123456789abcdefghij"
PEM_BODY = "MIIEowIBAAKCAQEAquorumTESTkeyBODYline0123456789abcdefghABCDEFGH"
SECRETS = (AWS_KEY_ID, STRIPE_KEY, GITHUB_TOKEN, PEM_BODY)

DIFF = f'''diff --git a/web/billing.ts b/web/billing.ts
new file mode 100644
--- /dev/null
+++ b/web/billing.ts
@@ -0,0 +1,3 @@
+import Stripe from "stripe";
+const stripe = new Stripe("{STRIPE_KEY}");
+export default stripe;
diff --git a/.env b/.env
new file mode 100644
--- /dev/null
+++ b/.env
@@ -0,0 +1,2 @@
+AWS_ACCESS_KEY_ID={AWS_KEY_ID}
+DEBUG=1
diff --git a/ci/deploy.yml b/ci/deploy.yml
new file mode 100644
--- /dev/null
+++ b/ci/deploy.yml
@@ -0,0 +1,3 @@
+steps:
+  - run: git clone https://x:{GITHUB_TOKEN}@github.com/acme/app
+    shell: bash
diff --git a/deploy/id_rsa b/deploy/id_rsa
new file mode 100644
--- /dev/null
+++ b/deploy/id_rsa
@@ -0,0 +1,3 @@
+-----BEGIN RSA PRIVATE KEY-----
+{PEM_BODY}
+-----END RSA PRIVATE KEY-----
diff --git a/app/settings.py b/app/settings.py
new file mode 100644
--- /dev/null
+++ b/app/settings.py
@@ -0,0 +1,3 @@
+STRIPE_SECRET_KEY = "{STRIPE_KEY}"
+password = "{GITHUB_TOKEN}"
+DEBUG = True
'''

OFFLINE_REVIEW = {role: "offline/default"
                  for role in ("security", "architecture", "style", "synthesizer")}


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


# --- the key-format table --------------------------------------------------------------------
@pytest.mark.parametrize(("path", "line", "rule", "severities"), [
    ("web/pay.ts", f'const key = "{STRIPE_KEY}";', "secret-stripe-live-key", {"critical"}),
    ("web/pay.ts", 'const k = "rk_live_abcdefghijklmnop0123";', "secret-stripe-live-key",
     {"critical"}),
    (".env", f"AWS_ACCESS_KEY_ID={AWS_KEY_ID}", "secret-aws-access-key-id", {"critical"}),
    ("deploy.sh", 'export AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYQuorumTESTK"',
     "secret-aws-secret-access-key", {"critical"}),
    ("ci.yml", f"token: {GITHUB_TOKEN}", "secret-github-token", {"high", "critical"}),
    ("ci.yml", "token: github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
     "secret-github-token", {"high", "critical"}),
    ("Dockerfile", "ENV GITLAB=glpat-abcdefghij0123456789", "secret-gitlab-token",
     {"high", "critical"}),
    ("bot.js", 'slack("xoxb-123456789012-abcdefghijkl")', "secret-slack-token",
     {"high", "critical"}),
    ("maps.html", 'key="AIzaSyA1234567890abcdefghijklmnopqrstuv"', "secret-google-api-key",
     {"high", "critical"}),
    ("ai.go", 'k := "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"', "secret-anthropic-key",
     {"high", "critical"}),
    ("ai.rb", 'OPENAI = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"', "secret-openai-key",
     {"high", "critical"}),
    ("id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----", "secret-private-key", {"critical"}),
    ("key.pem", "-----BEGIN EC PRIVATE KEY-----", "secret-private-key", {"critical"}),
])
def test_provider_keys_are_high_or_critical_in_any_file_type(path, line, rule, severities):
    [e] = scan_lines(path, [(7, line)])
    assert (e["rule"], e["category"], e["file"], e["line"]) == (rule, "security", path, 7)
    assert e["severity"] in severities
    assert "line 7" in e["fix"] and path in e["fix"]  # says what to change, here
    for text in (e["message"], e["fix"]):
        assert not any(len(tok) > 16 and tok in text for tok in line.split('"')
                       if "PRIVATE" not in tok), text


@pytest.mark.parametrize(("line", "severity"), [
    ('api_key = "Zx8qLp2Rt6Vb9Nm4Kj7Hg3Fd"', "medium"),  # random-looking, no known format
    ("DB_PASSWORD=s3cretvalue", "low"),
])
def test_secret_looking_values_of_no_known_format_are_lower(line, severity):
    [e] = scan_lines("config.env", [(1, line)])
    assert (e["rule"], e["severity"]) == ("secret-possible", severity)
    assert "Possible secret" in e["message"]


@pytest.mark.parametrize("line", [
    'password = os.environ["DB_PASSWORD"]', "token = get_token()", "DB_PASSWORD=changeme",
    'API_KEY = "${API_KEY}"', "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", 'sha = "a3f5c9e1b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2"',
    "const total = price * quantity;",
])
def test_code_and_placeholders_are_not_secrets(line):
    assert scan_lines("x.py", [(1, line)]) == []
    if "EXAMPLE" not in line:  # a sample key is shortened all the same: it costs nothing
        assert mask(line) == line


def test_mask_keeps_a_short_prefix_and_the_length_and_is_idempotent():
    assert mask(f'key = "{STRIPE_KEY}"') == f'key = "sk_live_…({len(STRIPE_KEY)} chars)"'
    assert mask(AWS_KEY_ID) == "AKIA…(20 chars)"
    assert mask(GITHUB_TOKEN) == f"ghp_…({len(GITHUB_TOKEN)} chars)"
    assert mask("Possible hardcoded password: 'hunter2'") == \
        "Possible hardcoded password: 'hu…(7 chars)'"
    text = f"a {STRIPE_KEY} b {AWS_KEY_ID} c"
    assert mask(mask(text)) == mask(text)
    block = f"x\n-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\n"
    assert PEM_BODY not in mask(block) and "BEGIN RSA PRIVATE KEY" in mask(block)
    assert mask(mask(block)) == mask(block)
    masked = mask_lines(["+-----BEGIN RSA PRIVATE KEY-----", f"+{PEM_BODY}",
                         "+-----END RSA PRIVATE KEY-----", "+after"])
    assert masked == ["+-----BEGIN RSA PRIVATE KEY-----", f"+…({len(PEM_BODY)} chars)",
                      "+-----END RSA PRIVATE KEY-----", "+after"]
    finding = {"title": f"Key {STRIPE_KEY}", "suggestion": f"Remove {GITHUB_TOKEN}",
               "history": [f"noted {AWS_KEY_ID}"], "line": 3}
    assert leaks(repr(secret_keys.mask_finding(finding))) == []
    assert finding["line"] == 3


def test_a_known_key_replaces_the_hard_coded_password_result_on_its_line():
    """bandit's B105 on ``password = "<GitHub token>"`` says "possible password", medium;
    the key's format says it is a GitHub token, high: one result, the stronger."""
    text = f'password = "{GITHUB_TOKEN}"\nother_password = "hunter2hunter2"\n'
    report = analyzers.run_analyzers([analyzers.AnalyzerInput(path="a.py", text=text)])
    found = scan_lines("a.py", [(1, text.split("\n")[0]), (2, text.split("\n")[1])])
    # as the analyze stage joins them: detect-secrets gives way on lines the others report
    combined = analyzers.runner.with_key_formats(found, report.evidence)
    on_1 = [e for e in combined if e["line"] == 1 and e["category"] == "security"]
    on_2 = [e for e in combined if e["line"] == 2 and e["category"] == "security"]
    assert [(e["rule"], e["severity"]) for e in on_1] == [("secret-github-token", "high")]
    # No known format on line 2: the analyzers' password result stands, medium, alone.
    assert [(e["rule"], e["severity"]) for e in on_2] == [("B105", "medium")]
    for e in report.evidence:
        assert leaks(e["message"]) == [] and "hunter2hunter2" not in e["message"]


def test_bandit_and_ruff_password_rules_follow_the_policy():
    text = ('def connect(password="hunter2hunter2"):\n    pass\n\n'
            'login(user="a", password="hunter2hunter2")\nsecret = "hunter2hunter2"\n')
    report = analyzers.run_analyzers([analyzers.AnalyzerInput(path="a.py", text=text)])
    got = {e["rule"]: e["severity"] for e in report.evidence
           if e["rule"] in ("B105", "B106", "B107")}
    assert got == {"B105": "medium", "B106": "medium", "B107": "medium"}
    assert all("hunter2hunter2" not in e["message"] + suggestion_text(e)
               for e in report.evidence)


def suggestion_text(e: dict) -> str:
    return analyzers.suggestion_for(e)


def test_model_findings_quoting_a_secret_are_masked_before_they_are_kept():
    """A model that repeats the key in its finding: masked where the finding is made."""
    from agents_app.patterns.testing import FunctionModel
    from reviews_app.pipeline.pattern import CodeReview

    files = [{"path": "web/billing.ts", "old_path": None, "status": "added",
              "language": "TypeScript", "lexer": "typescript", "is_python": False,
              "hunks": [{"header": "@@ -0,0 +1,1 @@", "lines": [
                  {"kind": "add", "old": None, "new": 1,
                   "text": f'const k = "{STRIPE_KEY}";'}]}],
              "added": 1, "removed": 0, "content": None, "mode": "light", "clipped": False,
              "no_newline_at_end": False}]
    pattern = CodeReview()
    state = pattern.initial_state("t", {"input": {"label": "t", "files": files, "coverage": [],
                                                  "total_files": 1}})
    state = pattern.run_stage("analyze", state, None).state
    [ev] = state["analysis"]["evidence"]
    assert (ev["rule"], ev["severity"]) == ("secret-stripe-live-key", "critical")

    def answer(messages, info):
        prompt = "\n".join(m["content"] for m in messages)
        assert STRIPE_KEY not in prompt  # the reviewers are told it is there, not what it is
        return {"findings": [{"category": "security", "severity": "critical",
                              "file": "web/billing.ts", "line": 1,
                              "title": f"Live key {STRIPE_KEY} committed",
                              "description": f"The key {STRIPE_KEY} is public now.",
                              "suggestion": f"Delete {STRIPE_KEY} and use process.env.",
                              "confidence": 0.9}]}

    result = pattern.run_stage("review", state, FunctionModel(answer))
    assert result.state["findings"]
    assert leaks(repr(result.state["findings"])) == []


# --- end to end: stored rows, pages, exports, logs, trace ------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_reviewed_diff_never_repeats_its_secrets(caplog, alice):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="quorum")
    inp = services.from_text(DIFF)
    run = engine.run_inline(services.start_review(
        alice, inp, services.prepare(inp), enqueue=False, models=OFFLINE_REVIEW).pk)
    assert run.status == "awaiting_triage"
    review = Review.objects.get(run=run)
    findings = list(review.findings.all())

    # Every key is found, in every file type, high or critical.
    by_file = {}
    for f in findings:
        if f.kept and f.category == "security":
            by_file.setdefault(f.file, set()).add((f.severity, tuple(f.rules)))
    assert ("critical", ("secret-stripe-live-key",)) in by_file["web/billing.ts"]
    assert ("critical", ("secret-aws-access-key-id",)) in by_file[".env"]
    assert ("high", ("secret-github-token",)) in by_file["ci/deploy.yml"]
    assert ("critical", ("secret-private-key",)) in by_file["deploy/id_rsa"]
    assert {s for s, _ in by_file["app/settings.py"]} == {"critical", "high"}
    assert review.proposed_verdict == "request_changes"

    # Stored rows: the findings (kept and dropped), the review's summary and notes.
    rows = [repr(list(review.findings.values()))]
    rows.append(repr([review.summary, review.notes, review.reviewers, review.coverage]))
    assert leaks("\n".join(rows)) == []
    assert any("sk_live_…(" in f.description + f.title for f in findings)
    # The trace: every model call's prompt and reply, and the run's events.
    calls = ModelCall.objects.filter(run=run)
    assert calls.exists()
    assert leaks(repr(list(calls.values("messages", "response", "error")))) == []
    assert leaks(repr(list(Event.objects.filter(run=run).values()))) == []
    # The pages (the review with its diff, each file's rows) and the three exports.
    client = Client()
    client.force_login(alice)
    urls = [reverse("review_detail", args=[run.pk])]
    urls += [reverse("review_file", args=[run.pk, i]) for i in range(len(review.files))]
    urls += [f"{reverse('export_review', args=[run.pk])}?format={fmt}&scope=all"
             for fmt in ("markdown", "json", "sarif")]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert leaks(response.content.decode()) == [], url
    page = client.get(reverse("review_detail", args=[run.pk])).content.decode()
    assert "AKIA…(20 chars)" in page  # shown shortened, so the person knows which key
    # The logs.
    assert leaks("\n".join(r.getMessage() for r in caplog.records)) == []
    assert Run.objects.filter(pk=run.pk).exists()


def test_offline_reviewer_restates_secret_evidence_as_security_findings():
    files = [{"path": ".env", "hunks": [{"lines": [
        {"kind": "add", "new": 1, "text": f"AWS_ACCESS_KEY_ID={AWS_KEY_ID}"}]}]}]
    [ev] = scan_files(files)
    import json
    body = "## Reviewer\nsecurity\n\n## Analyzer evidence\n```json\n" + json.dumps([ev]) + \
        "\n```"
    [f] = offline_review.reviewer([{"role": "user", "content": body}])["findings"]
    assert (f["severity"], f["rules"], f["line"]) == ("critical", ["secret-aws-access-key-id"], 1)
    assert leaks(repr(f)) == []
    [numbered] = synthesis.number_findings("security", [f])
    assert numbered["key"] == "SEC-1"


@pytest.mark.django_db(transaction=True)
def test_rows_stored_before_masking_are_masked_when_shown_and_exported(alice):
    """The last line of defence: a finding row that holds a secret whole (stored before
    masking existed, or by a path that forgot it) is masked as it is read."""
    inp = services.from_text(DIFF)
    run = engine.run_inline(services.start_review(
        alice, inp, services.prepare(inp), enqueue=False, models=OFFLINE_REVIEW).pk)
    review = Review.objects.get(run=run)
    Review.objects.filter(pk=review.pk).update(summary=f"Found {STRIPE_KEY}.")
    first = review.findings.filter(kept=True).first()
    review.findings.filter(pk=first.pk).update(
        title=f"Key {GITHUB_TOKEN}", description=f"It is {AWS_KEY_ID}",
        suggestion=f"Remove {STRIPE_KEY}", history=[f"noted {GITHUB_TOKEN}"])
    dropped = review.findings.filter(kept=False).first()
    if dropped is not None:
        review.findings.filter(pk=dropped.pk).update(drop_reason=f"dup of {AWS_KEY_ID}")
    assert leaks(repr(list(review.findings.values()))) != []  # the rows do hold them
    client = Client()
    client.force_login(alice)
    urls = [reverse("review_detail", args=[run.pk])]
    urls += [f"{reverse('export_review', args=[run.pk])}?format={fmt}&scope=all"
             for fmt in ("markdown", "json", "sarif")]
    for url in urls:
        body = client.get(url).content.decode()
        assert leaks(body) == [], url
    assert "ghp_…(" in client.get(urls[0]).content.decode()


TS_LIVE_KEY = f'''diff --git a/web/pay.ts b/web/pay.ts
new file mode 100644
--- /dev/null
+++ b/web/pay.ts
@@ -0,0 +1,2 @@
+const stripe = new Stripe("{STRIPE_KEY}");
+export default stripe;
'''


@pytest.mark.django_db(transaction=True)
def test_the_command_does_not_approve_a_typescript_live_key_and_never_prints_it(tmp_path):
    import json
    from io import StringIO

    from django.core.management import call_command

    path = tmp_path / "pay.diff"
    path.write_text(TS_LIVE_KEY)
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("review", str(path), "--format", "sarif", stdout=out, stderr=err)
    assert exit_.value.code == 1, err.getvalue()
    assert leaks(out.getvalue() + err.getvalue()) == []
    results = json.loads(out.getvalue())["runs"][0]["results"]
    assert any("sk_live_…(" in r["message"]["text"] for r in results)
    review = Review.objects.get()
    assert review.proposed_verdict == "request_changes"
    assert review.findings.filter(kept=True, severity="critical", file="web/pay.ts").exists()


def test_the_admin_shows_a_reviewed_secret_only_shortened_and_edits_no_record(
        alice, django_user_model):
    """The run's state and the review's files hold the diff: the admin's views of them show
    each secret shortened, as the pages do, and offer no edit of the record."""
    inp = services.from_text(DIFF)
    run = engine.run_inline(services.start_review(
        alice, inp, services.prepare(inp), enqueue=False, models=OFFLINE_REVIEW).pk)
    review = Review.objects.get(run=run)
    root = django_user_model.objects.create_superuser("root", password="root-password-123")
    staff = Client()
    staff.force_login(root)
    urls = [reverse("admin:agents_app_run_change", args=[run.pk]),
            reverse("admin:reviews_app_review_change", args=[review.pk])]
    urls += [reverse("admin:reviews_app_finding_change", args=[f.pk])
             for f in review.findings.all()]
    urls += [reverse("admin:agents_app_modelcall_change", args=[c.pk])
             for c in ModelCall.objects.filter(run=run)]
    for url in urls:
        response = staff.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert leaks(html) == [], url
        assert 'name="_save"' not in html, url  # viewed, never edited
    assert "sk_live_…(" in staff.get(urls[0]).content.decode()
    # A forged edit changes nothing.
    staff.post(urls[0], {"task": "rewritten", "status": "completed"})
    run.refresh_from_db()
    assert run.task != "rewritten"
