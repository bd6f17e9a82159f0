"""One severity rubric across analyzers (issue 36): problem classes → severity, and two
analyzers' results of one class on the same lines are one finding with both tools' rules."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from common.analyzers import classes
from reviews_app import services
from reviews_app.pipeline import synthesis
from reviews_app.pipeline.quality import rubric
from tests.test_review_dedup import offline_review_of, python_file


@pytest.mark.parametrize(("rule", "cls"), [
    ("S602", "code-execution"), ("B602", "code-execution"), ("B307", "code-execution"),
    ("S307", "code-execution"), ("no-eval", "code-execution"),
    ("js-eval-injection", "code-execution"), ("go-command-injection", "code-execution"),
    ("bash-shell-c-injection", "code-execution"),
    ("javascript.browser.security.eval-detected.eval-injection", "code-execution"),
    ("B608", "sql-injection"), ("php-sql-injection", "sql-injection"),
    ("js-html-injection", "html-injection"), ("java-unsafe-deserialization",
                                              "unsafe-deserialization"),
    ("go-tls-insecure", "tls-disabled"), ("flask-ssrf", "ssrf"),
    ("flask-path-traversal", "path-traversal"), ("S105", "hardcoded-credential"),
    ("k8s-hardcoded-secret-env", "hardcoded-credential"),
    ("sql-hardcoded-password", "hardcoded-credential"), ("php-xxe", "xxe"),
    ("rb-insecure-cookie", ""), ("cs-ldap-injection", ""),
    ("js-weak-crypto", "weak-crypto"), ("S311", "insecure-randomness"),
    ("F401", ""), ("no-unused-vars", ""), ("secret-aws", ""), ("", ""),
])
def test_every_rule_maps_to_its_class(rule, cls):
    assert classes.class_of(rule) == cls


def test_shell_true_on_a_parameter_and_eval_of_input_get_one_severity():
    """bandit graded shell=True critical and eval medium; Semgrep and oxlint their own way."""
    items = [{"tool": "bandit+ruff", "rule": "B602", "category": "security",
              "severity": "critical"},
             {"tool": "bandit+ruff", "rule": "B307", "category": "security",
              "severity": "medium"},
             {"tool": "semgrep", "rule": "js-eval-injection", "category": "security",
              "severity": "high"},
             {"tool": "oxlint", "rule": "no-eval", "category": "architecture",
              "severity": "medium"},
             {"tool": "ruff", "rule": "F401", "category": "architecture", "severity": "low"}]
    for e in items:
        classes.grade(e)
    assert {(e["category"], e["severity"]) for e in items[:4]} == {("security", "critical")}
    assert items[1]["tool_severity"] == "medium" and "tool_severity" not in items[0]
    assert (items[4]["class"], items[4]["severity"]) == ("", "low")  # no class: its own grade


def test_the_class_table_follows_the_written_rubric():
    levels = {sev: " ".join(examples) for sev, _, examples in rubric.RUBRIC_LEVELS}
    assert classes.CLASSES["code-execution"][1] == "critical"
    assert "shell command or passed to eval/exec" in levels["critical"]
    for cls in ("sql-injection", "html-injection", "unsafe-deserialization", "tls-disabled",
                "open-redirect", "hardcoded-credential"):
        assert classes.CLASSES[cls][1] == "high"
    assert {sev for _, sev, _ in classes.CLASSES.values()} <= set(levels)
    assert set(classes.RULES.values()) <= set(classes.CLASSES)
    assert "- code-execution: critical" in classes.table_text()


def finding(key, rules, category, line=3, severity="critical"):
    return {"key": key, "status": "kept", "category": category, "severity": severity,
            "file": "web/app.ts", "line": line, "end_line": line, "title": f"{rules[0]}: eval",
            "confidence": 0.8, "reviewers": [category], "rules": rules}


def test_two_analyzers_on_one_problem_become_one_finding_with_both_tools_evidence():
    semgrep = finding("SEC-1", ["js-eval-injection"], "security")
    oxlint = finding("SEC-2", ["no-eval"], "security")
    elsewhere = finding("SEC-3", ["no-eval"], "security", line=30)
    sql = finding("SEC-4", ["js-sql-injection"], "security")
    assert synthesis.merge_duplicates([semgrep, oxlint, elsewhere, sql]) == 1
    assert oxlint["status"] == "dropped" and oxlint["duplicate_of"] == "SEC-1"
    assert "same problem class code-execution (JS-EVAL-INJECTION and NO-EVAL)" in \
        oxlint["drop_reason"]
    assert semgrep["rules"] == ["js-eval-injection", "no-eval"]
    assert elsewhere["status"] == sql["status"] == "kept"  # other lines, other class
    reported = {("web/app.ts", "js-eval-injection"): {"tool": "semgrep", "url": ""},
                ("web/app.ts", "no-eval"): {"tool": "oxlint", "url": "https://oxc.rs"}}
    row = SimpleNamespace(rules=semgrep["rules"], file="web/app.ts")
    assert services._evidence(row, reported) == [
        {"tool": "semgrep", "rule": "js-eval-injection", "url": ""},
        {"tool": "oxlint", "rule": "no-eval", "url": "https://oxc.rs"}]


SHELL_AND_EVAL = ("import subprocess\n\n\ndef run(cmd, data):\n"
                  "    subprocess.run(cmd, shell=True)\n    return eval(data)\n")


def test_offline_a_review_grades_shell_true_and_eval_alike():
    """Bandit rated line 5 critical and line 6 medium (ruff's table: high)."""
    rec, state = offline_review_of([python_file("app/run.py", SHELL_AND_EVAL)])
    by_line = {f["line"]: f for f in rec.kept if f["category"] == "security"}
    assert by_line[5]["severity"] == by_line[6]["severity"] == "critical"
    evidence = state["analysis"]["evidence"]
    assert {e["class"] for e in evidence if e["line"] in (5, 6)} == {"code-execution"}
