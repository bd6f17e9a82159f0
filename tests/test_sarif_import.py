"""Importing other analyzers' findings (SARIF 2.1.0): parsing realistic logs of CodeQL, ESLint,
gitleaks and Semgrep, refusing bad input with one clear message, keeping paths inside the
repository, masking secrets, and the evidence reaching the reviewers, the offline review, the
coverage and ``manage.py review --sarif``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.analyzers.sarif_import import MAX_RESULTS, clean_path, read_sarif
from reviews_app.pipeline import coverage, imported, prompts

DATA = Path(__file__).parent / "data" / "sarif"
LIMIT = 1_000_000
KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc9f8a7b6c5d4e3f2a1"
EVIDENCE_KEYS = {"tool", "rule", "category", "severity", "confidence", "file", "line",
                 "end_line", "message", "url", "on_changed_line", "tool_fix"}


def load(name: str):
    return read_sarif((DATA / name).read_bytes(), name=name, max_bytes=LIMIT)


def sarif(results, *, driver="tool", rules=(), **run) -> bytes:
    return json.dumps({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": driver, "rules": list(rules)}},
        "results": results, **run}]}).encode()


def result(uri, line=3, **extra) -> dict:
    return {"ruleId": "r1", "level": "warning", "message": {"text": "m"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri},
                                                "region": {"startLine": line}}}], **extra}


# --- parsing realistic logs ------------------------------------------------------------------
def test_codeql_security_severity_cwe_tags_and_base_ids():
    got = load("codeql.sarif")
    assert got.tools == ["codeql"] and got.notes == []
    inj, unused = got.evidence
    assert EVIDENCE_KEYS <= set(inj)
    assert (inj["file"], inj["line"], inj["end_line"]) == ("src/app.ts", 3, 3)
    assert inj["rule"] == "js/code-injection" and inj["tool"] == "codeql"
    assert inj["severity"] == "critical" and inj["category"] == "security"
    assert inj["url"].startswith("https://codeql.github.com/")
    assert unused["category"] == "style" and unused["severity"] == "low"


def test_eslint_absolute_uris_levels_and_security_rule_names():
    got = load("eslint.sarif")
    assert got.tools == ["eslint"]
    no_eval, semi = got.evidence
    assert no_eval["rule"] == "no-eval" and no_eval["severity"] == "high"
    assert no_eval["category"] == "security"
    # An absolute path is kept only to be matched against the change, never opened.
    assert no_eval["file"] == "/home/ci/checkout/src/app.ts" and no_eval["absolute_path"]
    assert semi["category"] == "style" and semi["severity"] == "low"


def test_gitleaks_secret_is_masked_high_and_security():
    got = load("gitleaks.sarif")
    (leak,) = got.evidence
    assert KEY not in json.dumps(got.evidence) and "sk" in leak["message"]
    assert leak["category"] == "security" and leak["severity"] == "high"
    assert (leak["file"], leak["line"]) == ("deploy/env.sh", 2)


def test_semgrep_dot_slash_paths_cwe_tags_and_default_level():
    got = load("semgrep.sarif")
    (ev,) = got.evidence
    assert got.tools == ["semgrep-oss"]
    assert ev["file"] == "src/app.ts" and ev["category"] == "security"
    assert ev["severity"] == "medium" and ev["rule"].endswith("eval-detected")


@pytest.mark.parametrize("props, severity", [
    ({"security-severity": "9.0"}, "critical"), ({"security-severity": "7.5"}, "high"),
    ({"security-severity": "4"}, "medium"), ({"security-severity": "2.1"}, "low"),
    ({"security-severity": "n/a"}, "medium"), ({}, "medium")])
def test_security_severity_scores(props, severity):
    rules = [{"id": "r1", "properties": props}]
    (ev,) = read_sarif(sarif([result("a.js")], rules=rules), name="x", max_bytes=LIMIT).evidence
    assert ev["severity"] == severity


@pytest.mark.parametrize("level, severity, category", [
    ("error", "high", "architecture"), ("warning", "medium", "architecture"),
    ("note", "low", "style"), ("none", "info", "architecture"), ("bogus", "medium",
                                                                  "architecture")])
def test_levels(level, severity, category):
    data = sarif([result("a.js", level=level)])
    (ev,) = read_sarif(data, name="x", max_bytes=LIMIT).evidence
    assert (ev["severity"], ev["category"]) == (severity, category)


def test_tool_names_are_sanitised_and_capped():
    data = sarif([result("a.js")], driver="\x1b[31mEvil <b>Tool</b>" + "x" * 100)
    got = read_sarif(data, name="x", max_bytes=LIMIT)
    assert got.tools[0] == got.evidence[0]["tool"]
    assert len(got.tools[0]) <= 40 and all(c.isalnum() or c in "_.+-" for c in got.tools[0])


# --- paths stay inside the repository --------------------------------------------------------
@pytest.mark.parametrize("uri, expected", [
    ("src/a.ts", ("src/a.ts", False)), ("./src/a.ts", ("src/a.ts", False)),
    ("src//b/./a.ts", ("src/b/a.ts", False)), ("file:///ci/repo/src/a.ts",
                                                ("/ci/repo/src/a.ts", True)),
    ("src%2Fa.ts", ("src/a.ts", False)),
    ("../etc/passwd", None), ("src/../../etc/passwd", None), ("file:///../../x", None),
    ("%2e%2e/secret", None), ("https://evil.example/a.ts", None), ("", None),
    ("a\x00b", None), ("src/%00.ts", None)])
def test_clean_path(uri, expected):
    assert clean_path(uri) == expected


def test_results_outside_the_repository_are_left_out_with_a_note():
    data = sarif([result("../../etc/passwd"), result("ok.py"), {"ruleId": "r1"}, "junk"])
    got = read_sarif(data, name="scan.sarif", max_bytes=LIMIT)
    assert [e["file"] for e in got.evidence] == ["ok.py"]
    assert any("2 result(s) without a location" in n for n in got.notes)
    assert any("1 malformed" in n for n in got.notes)


def test_join_keeps_the_change_files_marks_changed_lines_and_matches_absolute_paths():
    files = [{"path": "src/app.ts", "hunks": [{"lines": [
        {"kind": "add", "new": 3, "text": "eval(x)"}, {"kind": "ctx", "new": 4, "text": ""}]}]},
             {"path": "app.ts", "hunks": []}]
    ev = load("eslint.sarif").evidence + load("codeql.sarif").evidence
    kept, outside = imported.join(files, ev)
    assert outside == 1  # codeql's src/other.ts is not part of this change
    assert {e["file"] for e in kept} == {"src/app.ts"}
    assert [e["on_changed_line"] for e in kept] == [True, False, True]
    assert not any("absolute_path" in e for e in kept)
    assert imported.tools_by_file(kept) == {"src/app.ts": ["eslint", "codeql"]}


# --- untrusted input: one clear message ------------------------------------------------------
@pytest.mark.parametrize("data, message", [
    (b"", "is empty"), (b"   \n", "is empty"), (b"{not json", "not valid JSON"),
    (b"\xff\xfe\x00", "NUL bytes"), (b'{"version": "2.1.0", "runs": []}\x00', "NUL bytes"),
    (b"[1, 2]", "not a SARIF log"), (b'{"version": "2.0.0", "runs": []}', "only 2.1.0"),
    (b'{"runs": []}', "only 2.1.0"), (b'{"version": "2.1.0"}', "runs"),
    (b'{"version": "2.1.0", "runs": [{"tool": {}}]}', "driver"),
    (b'{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": 5}}}]}', "name"),
    (b'{"version": "2.1.0", "runs": "x"}', "runs"),
    (b"[" * 100_000 + b"]" * 100_000, "nested"),
    (b'\xc3\x28{"version": "2.1.0"}', "not valid JSON")])
def test_bad_input_is_refused_with_a_clear_value_error(data, message):
    with pytest.raises(ValueError, match=message) as exc:
        read_sarif(data, name="scan.sarif", max_bytes=LIMIT)
    assert "scan.sarif" in str(exc.value) and "\n" not in str(exc.value)


def test_too_big_is_refused_before_parsing():
    data = sarif([result("a.js")])
    with pytest.raises(ValueError, match="over the 100-byte limit"):
        read_sarif(data + b" " * 200, name="big.sarif", max_bytes=100)


def test_thousands_of_results_are_capped_with_a_note():
    data = sarif([result("a.js", line=i + 1) for i in range(MAX_RESULTS + 50)])
    got = read_sarif(data, name="many.sarif", max_bytes=10 * LIMIT)
    assert len(got.evidence) == MAX_RESULTS
    assert any("50 more were left out" in n for n in got.notes)


def test_missing_optional_fields_give_usable_evidence():
    data = sarif([{"locations": [{"physicalLocation": {"artifactLocation": {"uri": "a.sh"}}}]}],
                 driver="x")
    (ev,) = read_sarif(data, name="x", max_bytes=LIMIT).evidence
    assert ev["line"] is None and ev["rule"] == "sarif" and ev["message"] == "x rule sarif"


# --- the evidence reaches the reviewers and coverage -----------------------------------------
def test_imported_evidence_reaches_the_security_reviewer_prompt():
    files = [{"path": "src/app.ts", "language": "typescript", "status": "added", "hunks": [{"lines": [
        {"kind": "add", "new": 3, "text": "  return eval(code);"}]}]}]
    kept, _ = imported.join(files, load("semgrep.sarif").evidence)
    text = json.dumps(prompts.reviewer_messages("security", "c", files, kept))
    assert "eval-detected" in text and "semgrep-oss" in text


def test_coverage_claims_only_the_files_an_imported_tool_reported_on():
    files = [{"path": p, "is_python": False, "language": "typescript", "hunks": [{"lines": [
        {"kind": "add", "new": 1, "text": "x"}]}]} for p in ("src/app.ts", "src/b.ts")]
    analysis = {"examined": [], "tools": {}, "imported_tools": {"src/app.ts": ["eslint"]}}
    out = coverage.examined(files, [], analysis, {}, ["security"], {"security"}, {})
    by_path = {c["path"]: c for c in out}
    assert by_path["src/app.ts"]["reviewed"] and by_path["src/app.ts"]["tools"] == ["eslint"]
    assert by_path["src/app.ts"]["reason"] == "imported"
    assert "eslint" in by_path["src/app.ts"]["detail"]
    assert by_path["src/b.ts"]["reason"] == coverage.NOT_EXAMINED


# --- manage.py review --sarif: the offline review uses the imported results ------------------
TS_DIFF = """diff --git a/src/app.ts b/src/app.ts
new file mode 100644
--- /dev/null
+++ b/src/app.ts
@@ -0,0 +1,4 @@
+export function run(input: string): unknown {
+  const code = input.trim();
+  return eval(code);
+}
"""


def review(*args) -> tuple[int, str, str]:
    from io import StringIO

    from django.core.management import call_command
    out, err = StringIO(), StringIO()
    try:
        call_command("review", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_offline_review_of_typescript_finds_the_imported_eval_and_does_not_approve(
        tmp_path):
    from reviews_app.models import Review
    change = tmp_path / "change.diff"
    change.write_text(TS_DIFF)
    code, out, err = review(str(change), "--format", "json",
                            "--sarif", str(DATA / "eslint.sarif"),
                            "--sarif", str(DATA / "semgrep.sarif"),
                            "--sarif", str(DATA / "codeql.sarif"))
    assert code == 1, err
    data = json.loads(out)
    assert data["review"]["verdict"]["final"] != "approve"
    rules = {e["rule"] for f in data["findings"] for e in f.get("evidence") or ()}
    assert {"no-eval", "javascript.browser.security.eval-detected.eval-detected",
            "js/code-injection"} <= rules
    eval_findings = [f for f in data["findings"] if f["line"] == 3]
    assert eval_findings and all(f["file"] == "src/app.ts" for f in eval_findings)
    assert any(f["severity"] in ("critical", "high") for f in eval_findings)
    review_row = Review.objects.get()
    (cov,) = [c for c in review_row.coverage if c.get("path") == "src/app.ts"]
    assert cov["reason"] == "imported" and cov["reviewed"]
    assert set(cov["tools"]) == {"eslint", "semgrep-oss", "codeql"}
    events = " ".join(review_row.run.events.values_list("message", flat=True))
    assert "1 on other files left out" in events


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("content, message", [
    (b"", "is empty"), (b"not json", "not valid JSON"), (b"\x00\x00", "NUL bytes"),
    (b'{"version": "2.0.0", "runs": []}', "only 2.1.0")])
def test_a_bad_sarif_file_exits_2_with_one_line_and_starts_nothing(tmp_path, content, message):
    from agents_app.models import Run
    change = tmp_path / "change.diff"
    change.write_text(TS_DIFF)
    bad = tmp_path / "bad.sarif"
    bad.write_bytes(content)
    code, out, err = review(str(change), "--sarif", str(bad))
    assert code == 2 and message in err and "bad.sarif" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and out == ""
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_missing_or_too_big_sarif_file_exits_2(tmp_path, settings):
    from agents_app.models import Run
    change = tmp_path / "change.diff"
    change.write_text(TS_DIFF)
    code, _, err = review(str(change), "--sarif", str(tmp_path / "nope.sarif"))
    assert code == 2 and "No such SARIF file" in err
    settings.QUORUM_REVIEW_MAX_UPLOAD_BYTES = 100
    code, _, err = review(str(change), "--sarif", str(DATA / "codeql.sarif"))
    assert code == 2 and "codeql.sarif" in err and "limit" in err
    assert not Run.objects.exists()


# --- the web form: an optional "Analyzer results (SARIF)" field ------------------------------
def _post(client, *sarif_files, **extra):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse
    files = [SimpleUploadedFile(name, data, content_type="application/json")
             for name, data in sarif_files]
    return client.post(reverse("start_review"),
                       {"source": "paste", "diff": TS_DIFF, "sarif": files, **extra})


@pytest.mark.django_db
@pytest.mark.parametrize("name, data, message", [
    ("a.sarif", b"not json at all", "not valid JSON"),
    ("a.sarif", b'{"version": "2.0.0", "runs": []}', "only 2.1.0"),
    ("a.sarif", b'{"version":"2.1.0","runs":[]}\x00', "NUL bytes"),
    ("a.sarif", b"", "empty"),
    ("a.sarif", b'{"version": "2.1.0", "runs": [{"tool": {}}]}', "driver"),
    ("<img src=x onerror=alert(1)>.sarif", b"[]", "not a SARIF log")])
def test_the_form_refuses_bad_sarif_with_a_clear_message_and_starts_nothing(
        alice_client, name, data, message):
    from agents_app.models import Run
    from reviews_app.models import Review
    response = _post(alice_client, (name, data))
    html = response.content.decode()
    assert response.status_code == 400 and 'role="alert"' in html and message in html
    assert "<img src=x" not in html
    assert not Review.objects.exists() and not Run.objects.exists()


@pytest.mark.django_db
def test_the_form_refuses_a_sarif_over_the_size_limit_and_too_many_files(alice_client,
                                                                          settings):
    from reviews_app.models import Review
    good = (DATA / "semgrep.sarif").read_bytes()
    response = _post(alice_client, *[(f"s{i}.sarif", good) for i in range(11)])
    assert response.status_code == 400 and b"at most 10 SARIF files" in response.content
    settings.QUORUM_REVIEW_MAX_UPLOAD_BYTES = 200
    response = _post(alice_client, ("big.sarif", good))
    assert response.status_code == 400 and b"big.sarif is" in response.content
    assert b"the limit is" in response.content and not Review.objects.exists()


@pytest.mark.django_db
def test_the_form_passes_the_imported_evidence_to_the_run(alice_client):
    from agents_app.models import Run
    response = _post(alice_client, ("eslint.sarif", (DATA / "eslint.sarif").read_bytes()),
                     ("gitleaks.sarif", (DATA / "gitleaks.sarif").read_bytes()))
    assert response.status_code == 302, response.content.decode()[:1500]
    run = Run.objects.get()
    evidence = run.options["imported"]
    assert {e["tool"] for e in evidence} == {"eslint", "gitleaks"}
    assert KEY not in json.dumps(run.options)
    # A resubmission is a second review, not a half-saved first one.
    assert _post(alice_client, ("eslint.sarif", (DATA / "eslint.sarif").read_bytes())
                 ).status_code == 302
    assert Run.objects.count() == 2


@pytest.mark.django_db
def test_the_form_field_is_on_the_page_and_anonymous_posts_start_nothing(alice_client):
    from django.test import Client
    from django.urls import reverse

    from agents_app.models import Run
    page = alice_client.get(reverse("review_list")).content.decode()
    assert "Analyzer results (SARIF)" in page and 'name="sarif"' in page and "multiple" in page
    response = _post(Client(), ("eslint.sarif", (DATA / "eslint.sarif").read_bytes()))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert not Run.objects.exists()


def test_all_files_together_import_at_most_max_results():
    from reviews_app import services
    data = sarif([result("a.js", line=i + 1) for i in range(MAX_RESULTS - 10)])
    evidence, notes = services.imported_evidence([("one.sarif", data), ("two.sarif", data)])
    assert len(evidence) == MAX_RESULTS
    assert any(n.startswith("two.sarif:") and "left out" in n for n in notes)


@pytest.mark.django_db(transaction=True)
def test_a_review_started_with_sarif_shows_the_imported_finding_and_coverage(alice_client):
    from agents_app import engine
    from agents_app.models import Run
    from reviews_app.models import Review
    response = _post(alice_client, ("eslint.sarif", (DATA / "eslint.sarif").read_bytes()))
    assert response.status_code == 302
    run = engine.run_inline(Run.objects.get().pk)
    assert run.status == "awaiting_triage", run.error
    review = Review.objects.get()
    assert review.proposed_verdict != "approve"
    page = alice_client.get(review.get_absolute_url())
    html = page.content.decode()
    assert page.status_code == 200 and "no-eval" in html and "eslint" in html
    assert "reported on by imported analyzers" in html or "imported SARIF" in html
