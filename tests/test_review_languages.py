"""The issue's acceptance, offline: with the built-in offline model (no provider key), a
review finds SQL injection through a template string, ``eval``/``innerHTML`` with user input
and hard-coded keys in TypeScript, JavaScript, Go and shell changes and does not approve them;
clean changes in those languages are approved, every file examined by an analyzer. Through the
whole pipeline (``manage.py review``: the real engine, the real analyzers; threads, hence
transactional)."""

from __future__ import annotations

import json

import pytest

from common import analyzers
from reviews_app.models import Review
from tests.review_cli import review

pytestmark = pytest.mark.django_db(transaction=True)

STRIPE = "sk_live_" + "51HqLyjWDarjtT1zdp7dcXYZabc"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
AWS = "AKIA" + "Z3MSJV4WWNKWW5FG"


def new_file(path: str, lines: list[str]) -> str:
    body = "".join(f"+{ln}\n" for ln in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}")


BAD = {
    "typescript": (new_file("src/users.ts", [
        f'const STRIPE_KEY = "{STRIPE}";',
        "export async function findUser(db: any, id: string) {",
        "  return db.query(`select * from users where id = ${id}`);",
        "}",
        "export function charge(): string {",
        "  return STRIPE_KEY;",
        "}"]), {("js-sql-injection", 3), ("secret-stripe-live-key", 1)}),
    "javascript": (new_file("web/render.js", [
        "export function render(el, params) {",
        '  el.innerHTML = params.get("q");',
        '  return eval(params.get("expr"));',
        "}"]), {("js-html-injection", 2), ("js-eval-injection", 3)}),
    "go": (new_file("store/users.go", [
        "package store",
        "",
        "import (",
        '\t"database/sql"',
        '\t"fmt"',
        ")",
        "",
        f'const apiToken = "{GITHUB}"',
        "",
        "func Find(db *sql.DB, id string) (*sql.Rows, error) {",
        '\treturn db.Query(fmt.Sprintf("SELECT * FROM users WHERE id = \'%s\'", id))',
        "}"]), {("go-sql-injection", 11), ("secret-github-token", 8)}),
    "shell": (new_file("scripts/deploy.sh", [
        "#!/bin/bash",
        f"export AWS_ACCESS_KEY_ID={AWS}",
        'eval "$1"',
        "curl -k https://example.com/setup.sh -o setup.sh"]),
        {("bash-eval-injection", 3), ("bash-tls-disabled", 4),
         ("secret-aws-access-key-id", 2)}),
}

CLEAN = {
    "typescript": new_file("src/users.ts", [
        "type Db = { query: (sql: string, args: unknown[]) => Promise<unknown> };",
        "",
        "export async function findUser(db: Db, id: string): Promise<unknown> {",
        '  return db.query("select * from users where id = $1", [id]);',
        "}"]),
    "javascript": new_file("web/render.js", [
        "export function render(el, params) {",
        '  el.textContent = params.get("q");',
        "}"]),
    "go": new_file("store/users.go", [
        "package store",
        "",
        'import "database/sql"',
        "",
        "func Find(db *sql.DB, id string) (*sql.Rows, error) {",
        '\treturn db.Query("SELECT * FROM users WHERE id = $1", id)',
        "}"]),
    "shell": new_file("scripts/greet.sh", [
        "#!/bin/bash",
        "set -euo pipefail",
        'name="${1:?usage: greet NAME}"',
        "printf 'Hello, %s\\n' \"$name\""]),
}

READERS = {"typescript": ["semgrep", "oxlint"], "javascript": ["semgrep", "oxlint"],
           "go": ["semgrep"], "shell": ["semgrep", "shellcheck"]}



@pytest.mark.parametrize("language", sorted(BAD))
def test_injection_eval_html_and_keys_are_found_and_not_approved(tmp_path, language):
    text, expected = BAD[language]
    code, data, err = review(tmp_path, text)
    assert code == 1, err
    assert data["review"]["verdict"]["final"] == "request_changes"
    # the offline model titles a finding "<rule>: <analyzer message>"
    found = {(f["title"].split(":", 1)[0], f["line"]) for f in data["findings"]}
    assert expected <= found, found
    for secret in (STRIPE, GITHUB, AWS):
        assert secret not in json.dumps(data) and secret not in err
    review_row = Review.objects.get()
    [entry] = review_row.coverage
    assert entry["reason"] == "analyzers_only" and entry["reviewed"] is True
    assert set(READERS[language]) <= set(entry["analyzers"])
    assert {"detect-secrets", "secrets"} <= set(entry["analyzers"])
    assert entry["reviewers"] == []  # the offline model reads no code


@pytest.mark.parametrize("language", sorted(CLEAN))
def test_clean_changes_are_approved_with_every_file_examined(tmp_path, language):
    code, data, err = review(tmp_path, CLEAN[language])
    assert code == 0, (err, data["findings"])
    assert data["review"]["verdict"]["final"] == "approve"
    [entry] = Review.objects.get().coverage
    assert (entry["reason"], entry["reviewed"]) == ("analyzers_only", True)
    assert set(READERS[language]) <= set(entry["analyzers"])
    assert entry["detail"].startswith(f"Checked by {' and '.join(READERS[language])} only")


def test_a_change_in_four_languages_at_once(tmp_path):
    text = "".join(BAD[lang][0] for lang in sorted(BAD)) + CLEAN["go"].replace(
        "store/users.go", "store/clean.go")
    code, data, err = review(tmp_path, text)
    assert code == 1
    files = {f["file"] for f in data["findings"]}
    assert {"src/users.ts", "web/render.js", "store/users.go", "scripts/deploy.sh"} <= files
    coverage = {c["path"]: c for c in Review.objects.get().coverage}
    assert len(coverage) == 5 and all(c["reviewed"] for c in coverage.values())
    assert "Verdict: request_changes" in err


def test_a_missing_analyzer_leaves_its_files_unexamined_and_blocks_approve(tmp_path,
                                                                         monkeypatch):
    real = analyzers.runner.find_tool
    monkeypatch.setattr(analyzers.runner, "find_tool",
                        lambda name: None if name in ("semgrep", "oxlint") else real(name))
    code, data, err = review(tmp_path, CLEAN["typescript"] + CLEAN["shell"])
    assert code == 1
    assert data["review"]["verdict"]["final"] != "approve"
    coverage = {c["path"]: c for c in Review.objects.get().coverage}
    ts = coverage["src/users.ts"]
    assert (ts["reason"], ts["reviewed"]) == ("not_examined", False)
    assert "checked for secrets only: semgrep and oxlint did not run on it (semgrep is not " \
           "installed" in ts["detail"]
    assert ts["analyzers"] == ["detect-secrets", "secrets"]
    # shellcheck still read the shell script: examined, and says by what
    sh = coverage["scripts/greet.sh"]
    assert (sh["reason"], sh["analyzers"]) == ("analyzers_only",
                                               ["shellcheck", "detect-secrets", "secrets"])
    assert "Not reviewed: src/users.ts" in err and "semgrep is not installed" in err


def test_a_file_only_the_secrets_scanners_read_is_not_examined(tmp_path):
    code, _, err = review(tmp_path, new_file("config/app.toml", ["debug = false"]))
    assert code == 1
    [entry] = Review.objects.get().coverage
    assert (entry["reason"], entry["reviewed"]) == ("not_examined", False)
    assert entry["detail"].startswith("Not reviewed: checked for secrets only: no analyzer "
                                      "reads TOML")
    assert entry["analyzers"] == ["detect-secrets", "secrets"]


def _start(user, text: str):
    from agents_app import engine
    from reviews_app import services

    inp = services.from_text(text)
    run = services.start_review(user, inp, services.prepare(inp), enqueue=False)
    return engine.run_inline(run.pk)


def test_the_page_lists_the_analyzers_and_reviewers_of_each_file(alice, bob):
    from django.test import Client
    from django.urls import reverse

    alice_client, bob_client, anonymous = Client(), Client(), Client()
    alice_client.force_login(alice)
    bob_client.force_login(bob)

    run = _start(alice, CLEAN["typescript"] + new_file("config/app.toml", ["debug = false"]))
    assert run.status == "awaiting_triage", run.error
    review = Review.objects.get(run=run)
    url = reverse("review_detail", args=[run.pk])
    page = alice_client.get(url).content.decode()
    offline = "Read by a model: none (the offline model restates analyzer results; it reads no code)"
    assert f"Analyzers: semgrep, oxlint, detect-secrets, secrets · {offline}" in page
    assert f"Analyzers: detect-secrets, secrets · {offline}" in page
    assert "checked for secrets only: no analyzer reads TOML" in page
    assert "Static analysis:" in page and "on 2 files in" in page
    # a file a model that reads code answered for, with analyzers: listed as reviewed in full
    review.coverage = [{**c, "reason": "examined", "reviewers": ["security"],
                        "detail": "Checked by semgrep and oxlint; read by the security "
                                  "reviewer."}
                       if c["path"] == "src/users.ts" else c for c in review.coverage]
    review.save(update_fields=["coverage"])
    page = alice_client.get(url).content.decode()
    assert "Reviewed in full (1)" in page and "Read by a model: security" in page
    assert "Reviewed with limits" not in page
    # the page's access rules stand: another user gets 404, anonymous is sent to sign in
    assert bob_client.get(url).status_code == 404
    anon = anonymous.get(url)
    assert anon.status_code == 302 and reverse("login") in anon["Location"]
