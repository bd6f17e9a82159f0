"""The analyzers for the other languages (common/analyzers/tools): our semgrep rules against
their own examples, each tool's parser on recorded output, and the runner when a tool is
missing, slow, or prints garbage. Real tool runs (all are installed from the lock file)."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest
import yaml

from common import analyzers, proc
from common.analyzers import AnalyzerInput, run_analyzers
from common.analyzers.fragments import units_for
from common.analyzers.inputs import kind_of, suffix_for
from common.analyzers.runner import find_tool, with_key_formats
from common.analyzers.tools import (
    BY_NAME,
    TOOLS,
    code_readers,
    hadolint,
    oxlint,
    secrets,
    semgrep,
    shellcheck,
)
from common.secret_keys import scan_lines

RULES = semgrep.RULES_DIR
RULE_FILES = sorted(RULES.glob("*/*.yaml"))


# --- our semgrep rules ------------------------------------------------------------------------
def test_every_rule_has_its_fields_and_an_example_of_each_kind():
    assert len(RULE_FILES) >= 20
    for path in RULE_FILES:
        [rule] = yaml.safe_load(path.read_text())["rules"]
        assert rule["id"] == path.stem, path
        assert rule["severity"] in ("CRITICAL", "HIGH", "MEDIUM", "LOW", "INFO"), path
        meta = rule["metadata"]
        assert meta["category"] in ("security", "architecture", "style"), path
        assert re.match(r"CWE-\d+: ", meta["cwe"]), path
        assert meta["confidence"] in ("HIGH", "MEDIUM", "LOW"), path
        problem, remedy = semgrep.split_message(rule["message"])
        assert problem and len(remedy) > 20, path  # "what is wrong. What to do instead."
        examples = [p for p in path.parent.glob(path.stem + ".*") if p.suffix != ".yaml"]
        assert len(examples) == 1, path
        text = examples[0].read_text()
        assert re.search(rf"ruleid: {rule['id']}\b", text), path
        assert re.search(rf"\bok: {rule['id']}\b", text), path


def test_the_rules_cover_each_language_and_risk():
    ids = {p.stem for p in RULE_FILES}
    for rule in ("tf-public-bucket", "tf-open-admin-port", "tf-unencrypted-storage",
                 "tf-iam-wildcard", "k8s-privileged-container", "k8s-host-namespace",
                 "k8s-no-resource-limits", "k8s-latest-image", "gha-pr-target-head-checkout"):
        assert rule in ids
    # issue 36: PHP, Ruby, C# and Kotlin, each class of risk
    for lang in ("php", "rb", "cs", "kt"):
        for risk in ("sql-injection", "command-injection", "code-injection", "xss",
                     "unsafe-deserialization", "weak-crypto", "weak-random", "tls-disabled",
                     "path-traversal", "ssrf", "open-redirect"):
            assert f"{lang}-{risk}" in ids, (lang, risk)
    # taint rules for web code (Flask, Django, FastAPI; Express)
    for lang in ("py", "js"):
        for risk in ("path-traversal", "ssrf", "open-redirect", "xss", "xxe",
                     "ldap-injection", "xpath-injection", "trust-boundary"):
            assert f"{lang}-taint-{risk}" in ids, (lang, risk)
        assert f"{lang}-insecure-cookie" in ids
    for lang in ("js", "go", "java", "bash"):
        assert f"{lang}-sql-injection" in ids
        assert any(i.startswith(lang) and "tls" in i for i in ids)
    for rule in ("js-command-injection", "go-command-injection", "java-command-injection",
                 "js-eval-injection", "bash-eval-injection", "js-html-injection",
                 "go-html-injection", "js-unsafe-deserialization",
                 "java-unsafe-deserialization", "js-weak-crypto", "go-weak-crypto",
                 "java-weak-crypto", "js-open-redirect", "go-open-redirect",
                 "java-open-redirect"):
        assert rule in ids


def _annotations(text: str, rule: str) -> tuple[set[int], set[int]]:
    """Lines annotated ``ruleid: <rule>`` (must be reported) and ``ok: <rule>`` (must not):
    semgrep's test convention, the annotation comment on the line above."""
    expected, ok = set(), set()
    for n, line in enumerate(text.split("\n"), start=1):
        if re.search(rf"\bruleid: {re.escape(rule)}\b", line):
            expected.add(n + 1)
        elif re.search(rf"\bok: {re.escape(rule)}\b", line):
            ok.add(n + 1)
    return expected, ok


def test_every_rule_reports_its_positive_lines_and_none_of_its_negative_ones(tmp_path):
    """Our own runner over semgrep's test annotations, with the engine and the options the
    review uses (one ``semgrep scan --experimental`` over every example; ``semgrep --test``
    gives the same answer but takes minutes)."""
    exe = find_tool("semgrep")
    assert exe, "semgrep is in requirements.lock"
    examples = sorted(p for p in RULES.glob("*/*") if p.suffix != ".yaml")
    argv = semgrep.SEMGREP.command(exe, [str(p) for p in examples], tmp_path)
    result = proc.run(argv, cwd=tmp_path, timeout=120, home=str(tmp_path),
                      env={**semgrep.SEMGREP.env, "XDG_CONFIG_HOME": str(tmp_path / "c"),
                           "XDG_CACHE_HOME": str(tmp_path / "k")})
    assert not result.timed_out and result.returncode == 0, result.text("stderr")[-500:]
    data = json.loads(result.text())
    assert [e for e in data["errors"] if e.get("level") == "error"] == []
    reported: dict[tuple[str, str], set[int]] = {}
    for r in data["results"]:
        rule = r["check_id"].rsplit(".", 1)[-1]
        reported.setdefault((rule, Path(r["path"]).name), set()).add(r["start"]["line"])
    for path in RULE_FILES:
        # ``<id>.<ext>``, or ``<id>.test.yml`` for YAML (semgrep loads the rules folder's
        # other YAML files as rules)
        [example] = [p for p in examples if p.name.split(".")[0] == path.stem]
        expected, ok = _annotations(example.read_text(), path.stem)
        got = reported.get((path.stem, example.name), set())
        assert expected and ok, path
        assert got == expected, (path.stem, sorted(got), sorted(expected))
        assert not got & ok


# --- which files each analyzer reads ------------------------------------------------------------
@pytest.mark.parametrize(("path", "first", "kind"), [
    ("src/app.ts", None, "typescript"), ("web/App.TSX", None, "typescript"),
    ("lib/x.mjs", None, "javascript"), ("a.jsx", None, "javascript"),
    ("cmd/main.go", None, "go"), ("Main.java", None, "java"), ("x.py", None, "python"),
    ("deploy.sh", None, "shell"), ("bin/deploy", "#!/usr/bin/env bash", "shell"),
    ("bin/run", "#!/bin/sh -e", "shell"), ("bin/tool", "#!/usr/bin/python3", "other"),
    ("Dockerfile", None, "dockerfile"), ("docker/Dockerfile.prod", None, "dockerfile"),
    ("api.dockerfile", None, "dockerfile"), ("config.yaml", None, "yaml"),
    (".env", None, "other"), ("README.md", None, "markdown"), ("docs/a.rst", None, "text"),
    ("infra/main.tf", None, "terraform"), ("k8s/deploy.yml", None, "yaml"),
    (".github/workflows/ci.yml", None, "workflow"), ("a/.github/workflows/x.YAML", None,
                                                     "workflow"),
    (".github/dependabot.yml", None, "yaml"), ("db/001_init.sql", None, "sql"),
    ("web/index.php", None, "php"), ("views/page.phtml", None, "php"),
    ("app/models/user.rb", None, "ruby"), ("lib/tasks/db.rake", None, "ruby"),
    ("Gemfile", None, "ruby"), ("Controllers/Home.cs", None, "csharp"),
    ("src/Main.kt", None, "kotlin"), ("build.gradle.kts", None, "kotlin"),
])
def test_kind_of_a_file(path, first, kind):
    assert kind_of(path, first) == kind


def test_generated_names_keep_only_a_safe_extension():
    assert suffix_for("other", "../../etc/passwd") == "txt"
    assert suffix_for("other", "a/b.y$ml") == "txt"
    assert suffix_for("other", "conf/app.yaml") == "yaml"
    assert suffix_for("typescript", "x.tsx") == "tsx"
    assert suffix_for("shell", "bin/deploy") == "sh"
    assert suffix_for("dockerfile", "Dockerfile.prod") == "Dockerfile"
    assert suffix_for("workflow", ".github/workflows/ci.yaml") == "yml"
    assert suffix_for("yaml", "k8s/app.YAML") == "yaml"
    assert suffix_for("terraform", "prod.tfvars") == "tf"
    assert suffix_for("markdown", "README.markdown") == "md"
    assert suffix_for("php", "views/page.phtml") == "php"
    assert suffix_for("ruby", "Gemfile") == "rb" and suffix_for("ruby", "x.rake") == "rb"
    assert suffix_for("csharp", "A.CS") == "cs"
    assert suffix_for("kotlin", "build.gradle.kts") == "kts"


def test_code_readers_by_kind():
    assert [t.name for t in code_readers("typescript")] == ["semgrep", "oxlint"]
    assert [t.name for t in code_readers("shell")] == ["semgrep", "shellcheck"]
    assert [t.name for t in code_readers("dockerfile")] == ["hadolint"]
    assert [t.name for t in code_readers("go")] == ["semgrep"]
    assert [t.name for t in code_readers("terraform")] == ["semgrep"]
    assert [t.name for t in code_readers("workflow")] == ["semgrep", "zizmor", "yamllint"]
    assert [t.name for t in code_readers("yaml")] == ["semgrep", "yamllint"]
    assert [t.name for t in code_readers("markdown")] == ["codespell", "pymarkdown"]
    assert [t.name for t in code_readers("text")] == ["codespell"]
    assert [t.name for t in code_readers("sql")] == ["semgrep"]
    for kind in ("php", "ruby", "csharp", "kotlin"):
        assert [t.name for t in code_readers(kind)] == ["semgrep"], kind
    assert [t.name for t in code_readers("python")] == ["ruff", "bandit", "semgrep"]
    assert code_readers("other") == []
    assert not BY_NAME["detect-secrets"].reads_code
    assert all(t.package for t in TOOLS)


# --- parsers on recorded output ------------------------------------------------------------------
def _units(*inputs: AnalyzerInput) -> dict:
    return {u.name: u for i, inp in enumerate(inputs) for u in units_for(i, inp)}


TS = AnalyzerInput("src/a.ts", "let a = 1;\nif (a = 2) {}\nconst unused = 3;\n",
                   kind="typescript", changed_lines={2, 3})
TS_FRAGMENT = AnalyzerInput("src/b.ts", "  if (x) {\n    debugger;\n", kind="typescript",
                            line_map={1: 40, 2: 41}, full=False, changed_lines={41})

OXLINT_JSON = {"diagnostics": [
    {"message": "Expected a conditional expression and instead saw an assignment",
     "code": "eslint(no-cond-assign)", "severity": "error",
     "url": "https://oxc.rs/docs/guide/usage/linter/rules/eslint/no-cond-assign.html",
     "help": "Consider wrapping the assignment in additional parentheses", "filename": "f0.ts",
     "labels": [{"span": {"offset": 16, "length": 1, "line": 2, "column": 7}}]},
    {"message": "Variable 'unused' is declared but never used.", "code": "eslint(no-unused-vars)",
     "severity": "error", "filename": "f0.ts",
     "labels": [{"span": {"offset": 30, "length": 6, "line": 3, "column": 7}}]},
    {"message": "Unexpected token", "severity": "error", "filename": "f1.ts",
     "labels": [{"span": {"offset": 0, "length": 1, "line": 1, "column": 1}}]},
    {"message": "`debugger` statement is not allowed", "code": "eslint(no-debugger)",
     "severity": "error", "filename": "f1.ts",
     "labels": [{"span": {"offset": 14, "length": 9, "line": 2, "column": 5}}]},
    {"message": "x", "code": "eslint(no-cond-assign)", "filename": "../../etc/passwd"},
    "garbage", None, {"labels": "not a list", "filename": "f0.ts"},
]}


def test_oxlint_results_are_graded_and_mapped():
    errors: list[str] = []
    ev = oxlint.parse(OXLINT_JSON, _units(TS, TS_FRAGMENT), [TS, TS_FRAGMENT], errors)
    got = [(e["file"], e["line"], e["rule"], e["category"], e["severity"], e["on_changed_line"])
           for e in ev]
    assert got == [
        ("src/a.ts", 2, "no-cond-assign", "architecture", "medium", True),
        ("src/a.ts", 3, "no-unused-vars", "architecture", "low", True),
        # the fragment's parse error is an artefact of cutting the file: dropped
        ("src/b.ts", 41, "no-debugger", "architecture", "low", True),
    ]
    assert ev[0]["tool"] == "oxlint" and ev[0]["url"].startswith("https://oxc.rs/")
    assert ev[0]["tool_fix"].startswith("Consider wrapping")
    assert errors == []


def test_oxlint_parse_error_of_a_whole_file_is_one_high_result():
    data = {"diagnostics": [{"message": "Unexpected token", "severity": "error",
                             "filename": "f0.ts", "labels": [{"span": {"line": n}}]}
                            for n in (1, 2)]}
    ev = oxlint.parse(data, _units(TS), [TS], [])
    assert [(e["rule"], e["severity"], e["line"]) for e in ev] == [("syntax-error", "high", 1)]
    assert ev[0]["message"].startswith("The file does not parse")


SH = AnalyzerInput("deploy.sh", "#!/bin/bash\nrm -rf $DIR/\nx=1\nif [\n", kind="shell")
SHELLCHECK_JSON = {"comments": [
    {"file": "f0.sh", "line": 2, "endLine": 2, "column": 8, "endColumn": 12, "level": "info",
     "code": 2086, "message": "Double quote to prevent globbing and word splitting."},
    {"file": "f0.sh", "line": 2, "endLine": 2, "column": 1, "endColumn": 13, "level": "warning",
     "code": 2115, "message": "Use \"${var:?}\" to ensure this never expands to / ."},
    {"file": "f0.sh", "line": 3, "endLine": 3, "column": 1, "endColumn": 2, "level": "warning",
     "code": 2034, "message": "x appears unused. Verify use (or export if used externally)."},
    {"file": "f0.sh", "line": 4, "endLine": 4, "column": 1, "endColumn": 2, "level": "error",
     "code": 1009, "message": "The mentioned syntax error was in this if expression."},
    {"file": "f0.sh", "line": 4, "endLine": 4, "column": 4, "endColumn": 4, "level": "error",
     "code": 1073, "message": "Couldn't parse this test expression."},
    {"file": "f0.sh", "line": 9, "level": "style", "code": "not a number"}, 7,
]}


def test_shellcheck_results_are_graded_by_the_table():
    ev = shellcheck.parse(SHELLCHECK_JSON, _units(SH), [SH], [])
    got = [(e["line"], e["rule"], e["category"], e["severity"]) for e in ev]
    assert got == [(2, "SC2086", "style", "low"), (2, "SC2115", "security", "medium"),
                   (3, "SC2034", "architecture", "low"),
                   (4, "SC1009", "architecture", "high")]  # one parse error per file
    assert ev[0]["url"] == "https://www.shellcheck.net/wiki/SC2086"
    assert shellcheck.parse({"comments": "x"}, {}, [], []) == []


DOCKER = AnalyzerInput("Dockerfile", "FROM ubuntu\nRUN sudo apt-get install curl\nUSER root\n",
                       kind="dockerfile")
HADOLINT_JSON = [
    {"code": "DL3006", "column": 1, "file": "f0.Dockerfile", "level": "warning", "line": 1,
     "message": "Always tag the version of an image explicitly"},
    {"code": "DL3004", "column": 1, "file": "f0.Dockerfile", "level": "error", "line": 2,
     "message": "Do not use sudo as it leads to unpredictable behavior."},
    {"code": "DL3015", "column": 1, "file": "f0.Dockerfile", "level": "info", "line": 2,
     "message": "Avoid additional packages by specifying `--no-install-recommends`"},
    {"code": "SC2086", "column": 1, "file": "f0.Dockerfile", "level": "info", "line": 2,
     "message": "Double quote to prevent globbing and word splitting."},
    {"code": "DL3002", "column": 1, "file": "f0.Dockerfile", "level": "warning", "line": 3,
     "message": "Last USER should not be root"},
    {"code": "DL3006", "file": "elsewhere", "line": 1}, ["not", "a", "dict"],
]


def test_hadolint_results_are_graded_by_the_table():
    ev = hadolint.parse(HADOLINT_JSON, _units(DOCKER), [DOCKER], [])
    got = [(e["line"], e["rule"], e["category"], e["severity"]) for e in ev]
    assert got == [(1, "DL3006", "architecture", "low"), (2, "DL3004", "security", "low"),
                   (2, "DL3015", "style", "low"), (2, "SC2086", "style", "low"),
                   (3, "DL3002", "security", "medium")]
    assert ev[0]["url"] == "https://github.com/hadolint/hadolint/wiki/DL3006"
    assert ev[3]["url"] == "https://www.shellcheck.net/wiki/SC2086"
    assert hadolint.parse({"not": "a list"}, {}, [], []) == []


GO = AnalyzerInput("cmd/main.go", "package main\n\nfunc f() {}\n", kind="go",
                   changed_lines={3})
SEMGREP_JSON = {
    "results": [
        {"check_id": "tmp.rules.go.go-sql-injection", "path": "f0.go",
         "start": {"line": 3, "col": 1}, "end": {"line": 3, "col": 9},
         "extra": {"message": "SQL text is built from a value: it can change the query. Use "
                              "placeholders.",
                   "severity": "HIGH", "metadata": {"category": "security",
                                                    "cwe": "CWE-89: SQL injection",
                                                    "confidence": "HIGH"}}},
        # the same line again through another pattern of the rule: reported once
        {"check_id": "go-sql-injection", "path": "f0.go", "start": {"line": 3},
         "end": {"line": 3}, "extra": {"message": "x. Y.", "severity": "HIGH"}},
        {"check_id": "go-weak-crypto", "path": "f0.go", "start": {"line": 1},
         "end": {"line": 1}, "extra": {"message": "Weak. Use better.", "severity": "bogus",
                                       "metadata": {"category": "nonsense"}}},
        {"check_id": "x", "path": "/etc/passwd", "start": {"line": 1}}, "garbage",
    ],
    "errors": [
        {"level": "warn", "type": ["PartialParsing", []], "path": "f0.go", "message": "x"},
        {"level": "error", "type": "Rule parse error", "message": "bad rule"},
    ],
    "paths": {"scanned": ["f0.go"]},
}


def test_semgrep_results_are_our_rules_text_and_grades():
    errors: list[str] = []
    ev = semgrep.parse(SEMGREP_JSON, _units(GO), [GO], errors)
    got = [(e["rule"], e["line"], e["category"], e["severity"], e["confidence"],
            e["on_changed_line"]) for e in ev]
    assert got == [("go-sql-injection", 3, "security", "high", 0.9, True),
                   ("go-weak-crypto", 1, "security", "medium", 0.7, False)]
    assert ev[0]["message"] == "SQL text is built from a value: it can change the query (CWE-89)."
    assert ev[0]["tool_fix"] == "Use placeholders"
    assert errors == ["semgrep read cmd/main.go only in part: it does not parse as go.",
                      "semgrep: bad rule"]
    assert semgrep.scanned(SEMGREP_JSON) == {"f0.go"}
    assert semgrep.scanned({"paths": "x"}) is None
    assert semgrep.parse(["not", "a", "dict"], {}, [], []) == []


CONF = AnalyzerInput("conf/app.yaml", "a: 1\npassword: Zx8Kq2mPvL4nR7tW9yB3cD6f\n",
                     kind="other", changed_lines={2})


def test_detect_secrets_results_never_carry_the_value():
    data = {"results": {"f0.yaml": [
        {"type": "Base64 High Entropy String", "line_number": 2,
         "hashed_secret": "2c07e864c6007850df0789578c5f1ade28caead7"},
        {"type": "Secret Keyword", "line_number": 2},
        {"type": "AWS Access Key", "line_number": 1},
    ]}, "garbage": 1}
    ev = secrets.parse(data, _units(CONF), [CONF], [])
    got = [(e["line"], e["rule"], e["severity"], e["on_changed_line"]) for e in ev]
    # one item per line, the most serious
    assert got == [(2, "secret-secret-keyword", "medium", True),
                   (1, "secret-aws-access-key", "high", False)]
    for e in ev:
        assert "Zx8Kq2" not in json.dumps(e) and "2c07e864" not in json.dumps(e)
        assert e["tool"] == "detect-secrets" and e["category"] == "security"
    assert secrets.parse({"results": ["x"]}, {}, [], []) == []


def test_our_key_formats_win_over_detect_secrets_on_the_same_line():
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    theirs = [{"tool": "detect-secrets", "rule": "secret-github-token", "file": "x.ts",
               "line": 1, "end_line": 1, "severity": "high", "category": "security"},
              {"tool": "detect-secrets", "rule": "secret-secret-keyword", "file": "x.ts",
               "line": 2, "end_line": 2, "severity": "medium", "category": "security"}]
    found = scan_lines("x.ts", [(1, f'const token = "{key}";')])
    joined = with_key_formats(found, theirs)
    assert [(e["tool"], e["line"]) for e in joined] == [("secrets", 1), ("detect-secrets", 2)]
    assert key not in json.dumps(joined)


# --- the runner: real runs, missing tools, timeouts, garbage --------------------------------------
MIXED = [
    AnalyzerInput("src/users.ts", "export function find(db: any, id: string) {\n"
                  "  return db.query(`select * from users where id = ${id}`);\n}\n",
                  kind="typescript"),
    AnalyzerInput("web/show.js", "export function show(el, params) {\n"
                  "  el.innerHTML = params.get('q');\n}\n", kind="javascript"),
    AnalyzerInput("deploy.sh", "#!/bin/bash\neval \"$1\"\n", kind="shell"),
    AnalyzerInput("Dockerfile", "FROM ubuntu\n", kind="dockerfile"),
    AnalyzerInput("notes.txt", "nothing here\n", kind="other"),
]


def test_a_real_run_over_every_kind():
    report = run_analyzers(MIXED)
    assert report.errors == []
    assert set(report.tools) == {"semgrep", "oxlint", "shellcheck", "hadolint",
                                 "detect-secrets"}
    assert report.examined == {
        "src/users.ts": ["semgrep", "oxlint", "detect-secrets"],
        "web/show.js": ["semgrep", "oxlint", "detect-secrets"],
        "deploy.sh": ["semgrep", "shellcheck", "detect-secrets"],
        "Dockerfile": ["hadolint", "detect-secrets"],
        "notes.txt": ["detect-secrets"]}
    rules = {(e["file"], e["rule"], e["line"]) for e in report.evidence}
    assert {("src/users.ts", "js-sql-injection", 2), ("web/show.js", "js-html-injection", 2),
            ("deploy.sh", "bash-eval-injection", 2), ("Dockerfile", "DL3006", 1)} <= rules


def _fake(tmp_path: Path, name: str, body: str) -> str:
    tool = tmp_path / name
    tool.write_text("#!/bin/sh\n" + body + "\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return str(tool)


def test_a_missing_tool_is_named_in_the_coverage_of_its_files(monkeypatch):
    real = analyzers.runner.find_tool
    monkeypatch.setattr(analyzers.runner, "find_tool",
                        lambda name: None if name == "semgrep" else real(name))
    report = run_analyzers(MIXED[:3])
    assert "semgrep" not in report.tools and "oxlint" in report.tools
    assert any(e.startswith("semgrep is not installed") for e in report.errors)
    for path in ("src/users.ts", "web/show.js", "deploy.sh"):
        assert report.not_run[path][0].startswith("semgrep is not installed")
        assert "semgrep" not in report.examined[path]
    assert report.examined["deploy.sh"] == ["shellcheck", "detect-secrets"]
    assert not any(e["tool"] == "semgrep" for e in report.evidence)


def test_garbage_output_and_a_crash_are_errors_not_exceptions(monkeypatch, tmp_path):
    real = analyzers.runner.find_tool
    fakes = {"oxlint": _fake(tmp_path, "oxlint", "echo '{not json'"),
             "shellcheck": _fake(tmp_path, "shellcheck", "echo boom >&2; exit 3"),
             "hadolint": _fake(tmp_path, "hadolint", "echo '[\"x\", 1, null]'")}
    monkeypatch.setattr(analyzers.runner, "find_tool", lambda name: fakes.get(name) or real(name))
    report = run_analyzers(MIXED)
    assert "oxlint printed output that is not JSON; its results are missing." in report.errors
    assert any(e.startswith("shellcheck failed (exit code 3): boom") for e in report.errors)
    assert report.not_run["src/users.ts"] == ["oxlint printed output that is not JSON; its "
                                              "results are missing"]
    assert report.examined["src/users.ts"] == ["semgrep", "detect-secrets"]
    assert report.examined["deploy.sh"] == ["semgrep", "detect-secrets"]
    # JSON of the wrong shape: it ran, and reported nothing we can read
    assert report.examined["Dockerfile"] == ["hadolint", "detect-secrets"]


def test_a_slow_tool_is_stopped_at_the_deadline(monkeypatch, tmp_path):
    slow = _fake(tmp_path, "semgrep", "exec sleep 30")
    real = analyzers.runner.find_tool
    monkeypatch.setattr(analyzers.runner, "find_tool",
                        lambda name: slow if name == "semgrep" else real(name))
    report = run_analyzers(MIXED[:2], timeout=5)
    assert report.seconds < 15
    assert "semgrep timed out after 5 s and was stopped; its results are missing." in \
        report.errors
    assert report.not_run["src/users.ts"] == ["semgrep timed out after 5 s and was stopped; "
                                              "its results are missing"]
    assert report.examined["src/users.ts"] == ["oxlint", "detect-secrets"]


def test_a_tool_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("QUORUM_DISABLE_ANALYZERS", "semgrep, hadolint")
    report = run_analyzers(MIXED[2:4])
    assert set(report.tools) == {"shellcheck", "detect-secrets"}
    assert report.not_run == {
        "deploy.sh": ["semgrep is turned off (QUORUM_DISABLE_ANALYZERS)"],
        "Dockerfile": ["hadolint is turned off (QUORUM_DISABLE_ANALYZERS)"]}


def test_semgrep_runs_offline_with_a_private_home(monkeypatch):
    seen = []
    real = proc.start

    def spy(argv, **kwargs):
        seen.append((list(argv), kwargs))
        return real(argv, **kwargs)

    monkeypatch.setattr(analyzers.runner.proc, "start", spy)
    run_analyzers(MIXED[:1])
    [(argv, kwargs)] = [(a, k) for a, k in seen if Path(a[0]).name == "semgrep"]
    assert {"--metrics=off", "--disable-version-check", "--quiet", "--json"} <= set(argv)
    # our folders, never the registry: only those of the files present (MIXED[0] is TypeScript)
    configs = [argv[i + 1] for i, a in enumerate(argv) if a == "--config"]
    assert configs and all(Path(c).parent == RULES for c in configs)
    assert {Path(c).name for c in configs} >= {"javascript", "javascript_taint"}
    assert not {"go", "java", "bash", "php", "ruby", "csharp", "kotlin",
                "python_taint"} & {Path(c).name for c in configs}
    assert kwargs["env"]["SEMGREP_ENABLE_VERSION_CHECK"] == "0"
    assert kwargs["env"]["SEMGREP_SEND_METRICS"] == "off"
    home = kwargs["home"]
    assert home and Path(home).name == "semgrep"
    assert kwargs["env"]["XDG_CONFIG_HOME"].startswith(home)
    assert not Path(home).exists()  # the run's temporary directory is gone


def test_suppression_comments_of_the_change_are_ignored():
    """A suppression comment is part of the untrusted change: reviewers see what it hides."""
    inputs = [
        AnalyzerInput("a.js", "export function f(x) {\n  // eslint-disable-next-line no-debugger"
                      "\n  debugger;\n  return eval(x); // nosemgrep\n}\n", kind="javascript"),
        AnalyzerInput("b.sh", "#!/bin/bash\n# shellcheck disable=SC2086\nrm -rf $1\n",
                      kind="shell"),
        AnalyzerInput("Dockerfile", "# hadolint ignore=DL3006\nFROM ubuntu\n",
                      kind="dockerfile"),
    ]
    report = run_analyzers(inputs)
    assert report.errors == []
    found = {(e["file"], e["rule"], e["line"]) for e in report.evidence}
    assert {("a.js", "no-debugger", 3), ("a.js", "js-eval-injection", 4),
            ("b.sh", "SC2086", 3), ("Dockerfile", "DL3006", 2)} <= found
