"""Deduplication merges findings about the same problem only, and analyzer rules have a
deliberate category and severity: style nits never decide the verdict on their own."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agents_app import engine
from agents_app.patterns.testing import FunctionModel
from common.analyzers import AnalyzerInput, rules, run_analyzers, suggestion_for
from reviews_app import services
from reviews_app.models import Review
from reviews_app.pipeline import fold, offline_review, synthesis
from reviews_app.pipeline.pattern import CodeReview
from reviews_app.pipeline.quality.offline import verifier as offline_verifier

P = CodeReview()


def offline_brain(messages, info):
    """The offline model's review, called directly (no gateway): analyzer results restated."""
    if info.role == "synthesizer":
        return offline_review.synthesis(messages)
    if info.role == "verifier":
        return offline_verifier(messages)
    if info.key and info.key.startswith("reflect:"):
        return offline_review.reflection(messages)
    return offline_review.reviewer(messages)


def python_file(path: str, text: str) -> dict:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return {"path": path, "old_path": None, "status": "added", "language": "Python",
            "lexer": "python", "is_python": True,
            "hunks": [{"header": f"@@ -0,0 +1,{len(lines)} @@", "lines": [
                {"kind": "add", "old": None, "new": i, "text": t}
                for i, t in enumerate(lines, 1)]}],
            "added": len(lines), "removed": 0, "content": text, "mode": "heavy",
            "clipped": False, "no_newline_at_end": False}


def offline_review_of(files: list[dict]):
    """Every stage of the review with the offline brain: (synthesized record, final state)."""
    state = P.initial_state("t", {"input": {"label": "t", "files": files, "coverage": [],
                                            "total_files": len(files)}})
    model = FunctionModel(offline_brain)
    stage = "analyze"
    while True:
        result = P.run_stage(stage, state, model)
        assert not result.outcome, result.error
        state, stage = result.state, result.next_stage
        if result.records and hasattr(result.records[-1], "kept"):
            return result.records[-1], state


TABBED = "def f(x):\n\tif x:\n\t\ty = 1\n\t\treturn y\n\treturn 0\n"


@pytest.mark.parametrize("whole", [True, False], ids=["whole-file", "diff-only"])
def test_a_tab_indented_file_keeps_one_w191_finding_per_line(whole):
    """Each tab-indented line is its own W191 result; neighbouring lines 1 apart used to
    chain (line 2 ~ 3 ~ 4 ~ 5) into a single finding. Duplicate merging keeps them apart;
    clustering then makes them one finding that lists every line as a location."""
    file = python_file("app/tabs.py", TABBED)
    if not whole:
        file.update(content=None, mode="light")
    rec, _ = offline_review_of([file])
    w191 = [f for f in rec.kept if "W191" in f["rules"]]
    assert len(w191) == 1
    [top] = w191
    assert sorted(loc["line"] for loc in top["locations"]) == [2, 3, 4, 5]
    clustered = [f for f in rec.dropped if "W191" in f["rules"]]
    assert sorted(f["line"] for f in [top, *clustered]) == [2, 3, 4, 5]
    assert all(f["drop_reason"] == f"Clustered into {top['key']}" for f in clustered)
    for f in [top, *clustered]:
        assert (f["category"], f["severity"]) == ("style", "low")
        assert f"line {f['line']}" in f["suggestion"] and "tabs" in f["suggestion"]
    # Formatting nits alone do not make the change need a discussion.
    assert rec.verdict == "approve"


def finding(key, category, line, title, rules=(), severity="medium", end_line=None, **kw):
    return {"key": key, "category": category, "severity": severity, "file": "a.py",
            "line": line, "end_line": end_line, "title": title, "rules": list(rules),
            "confidence": 0.8, "reviewer": category, "reviewers": [category],
            "status": "kept", "drop_reason": "", "duplicate_of": "", "history": [], **kw}


def kept_keys(findings):
    return sorted(f["key"] for f in findings if f["status"] == "kept")


def test_different_rules_on_the_same_line_are_different_problems():
    findings = [finding("STY-1", "style", 3, "Multiple imports on one line", ["E401"]),
                finding("STY-2", "style", 3, "`os` imported but unused", ["F401"]),
                finding("SEC-1", "security", 3, "Import of subprocess", ["S404"])]
    assert synthesis.merge_duplicates(findings) == 0
    assert kept_keys(findings) == ["SEC-1", "STY-1", "STY-2"]


def test_neighbouring_findings_of_one_rule_do_not_chain():
    findings = [finding(f"STY-{n}", "style", n, "Line too long", ["E501"]) for n in range(1, 8)]
    assert synthesis.merge_duplicates(findings) == 0
    # Overlapping spans of one rule are one problem, merged into the strongest.
    findings = [finding("SEC-1", "security", 4, "SQL built with %", ["S608"], "high"),
                finding("ARC-1", "architecture", 3, "SQL string formatting", ["S608"],
                        end_line=5)]
    assert synthesis.merge_duplicates(findings) == 1
    assert kept_keys(findings) == ["SEC-1"]


def test_same_category_and_similar_text_on_overlapping_lines_merge():
    findings = [finding("SEC-1", "security", 7, "SQL injection through string formatting",
                        severity="high"),
                finding("SEC-2", "security", 7, "Possible SQL injection via string formatting"),
                finding("SEC-3", "security", 9, "SQL injection through string formatting"),
                finding("SEC-4", "security", 7, "Hard-coded password in the query")]
    assert synthesis.merge_duplicates(findings) == 1
    assert kept_keys(findings) == ["SEC-1", "SEC-3", "SEC-4"]


def test_a_dropped_duplicate_names_the_finding_it_duplicates():
    findings = [finding("ARC-1", "architecture", 4, "SQL string formatting", ["S608"]),
                finding("SEC-1", "security", 4, "SQL injection through string formatting",
                        ["S608"], "high")]
    synthesis.merge_duplicates(findings)
    dup = findings[0]
    assert dup["duplicate_of"] == "SEC-1"
    assert dup["drop_reason"] == ("duplicate of SEC-1 \u201cSQL injection through string "
                                  "formatting\u201d at a.py:4 (same rule S608 on the same "
                                  "lines)")


def test_the_synthesizer_cannot_merge_findings_of_different_rules():
    findings = [finding("SEC-1", "security", 4, "Shell injection", ["B602"], "high"),
                finding("SEC-2", "security", 4, "Subprocess imported", ["B404"], "low")]
    notes = synthesis.apply_model_duplicates(
        findings, [{"keep": "SEC-1", "merge": ["SEC-2"], "reason": "same line"}])
    assert kept_keys(findings) == ["SEC-1", "SEC-2"]
    assert any("different analyzer rules" in n for n in notes)


MESSY = """import os, sys
import subprocess


def handler(cursor, uid, x, cmd):
\tsubprocess.call(cmd, shell=True)
\ty = eval(x)
\tcursor.execute("select * from t where id = %s" % uid)
\tpassword = "hunter2"
\ttry:
\t\tpass
\texcept Exception:
\t\tpass
\tif x == None:
\t\treturn y, password, f"done"
"""


def test_a_messy_file_drops_no_finding_as_a_duplicate_of_a_different_rule():
    rec, _ = offline_review_of([python_file("app/messy.py", MESSY)])
    kept = {f["key"]: f for f in rec.kept}
    assert len(rec.kept) >= 12
    for f in rec.dropped:
        if f["duplicate_of"]:
            keeper = kept[f["duplicate_of"]]
            assert set(f["rules"]) <= set(keeper["rules"]), (f, keeper)
    # One W191 finding (clustering) that lists every tab-indented line.
    [w191] = [f for f in rec.kept if "W191" in f["rules"]]
    assert [loc["line"] for loc in w191["locations"]] == [6, 7, 8, 9, 10, 11, 12, 13, 14, 15]


# --- the rule policy ---------------------------------------------------------------------------
NITS = 'import os\n\n\ndef f(x):\n    name = f"static"\n    return "{}".format(x) + name\n'


def test_formatting_and_f_string_nits_are_style_low_and_fix_texts_name_the_code():
    report = run_analyzers([AnalyzerInput(path="m.py", text=NITS)])
    ev = {e["rule"]: e for e in report.evidence}
    assert (ev["F541"]["category"], ev["F541"]["severity"]) == ("style", "low")
    assert (ev["UP032"]["category"], ev["UP032"]["severity"]) == ("style", "low")
    assert (ev["F401"]["category"], ev["F401"]["severity"]) == ("architecture", "low")
    assert suggestion_for(ev["F401"]).startswith("Remove the unused import `os` on line 1")
    assert "on line 5" in suggestion_for(ev["F541"])
    for e in report.evidence:
        text = suggestion_for(e)
        assert e["rule"] not in text, text  # what to change, not the rule's name again


@pytest.mark.parametrize(("rule", "expected"), [
    ("W191", ("style", "low")), ("E501", ("style", "low")), ("E111", ("style", "low")),
    ("F541", ("style", "low")), ("UP031", ("style", "low")), ("N802", ("style", "low")),
    ("SIM108", ("style", "low")), ("F821", ("architecture", "medium")),
    ("F523", ("architecture", "medium")), ("B006", ("architecture", "medium")),
    ("BLE001", ("architecture", "low")), ("C901", ("architecture", "low")),
    ("E999", ("architecture", "high")), ("S602", ("security", "high")),
    ("S105", ("security", "medium")), ("S101", ("security", "info")),
    ("S324", ("security", "medium")),
])
def test_the_ruff_rule_table(rule, expected):
    assert rules.rule_policy(rules.RUFF_RULES, rule) == expected


def test_shell_true_fix_says_what_to_change():
    text = "import subprocess\n\n\ndef run(cmd):\n    subprocess.call(cmd, shell=True)\n"
    report = run_analyzers([AnalyzerInput(path="r.py", text=text)])
    [shell] = [e for e in report.evidence if e["rule"] == "B602"]
    fix = suggestion_for(shell)
    assert "as a list" in fix and "drop shell=True" in fix and "line 5" in fix


def test_style_findings_never_decide_the_verdict_alone():
    """However a (model) reviewer rates a style finding, it does not block on its own."""
    style = [finding("STY-1", "style", 2, "Tabs", ["W191"], "medium"),
             finding("STY-2", "style", 5, "f-string without placeholders", ["F541"], "high")]
    assert synthesis.rule_verdict(style) == "approve"
    assert synthesis.rule_verdict([*style, finding("ARC-1", "architecture", 9, "Bug")]) == \
        "needs_discussion"


# --- the page lists what a dropped duplicate duplicates ------------------------------------------
SQL_DIFF = '''diff --git a/app/q.py b/app/q.py
new file mode 100644
--- /dev/null
+++ b/app/q.py
@@ -0,0 +1,3 @@
+def find(db, uid):
+    sql = "select * from users where id = %s" % uid
+    return db.execute(sql)
'''


@pytest.mark.django_db(transaction=True)
def test_the_page_shows_which_finding_a_dropped_duplicate_duplicates(scripted, alice):
    def model(messages, info):
        if info.schema == "ReviewerFindings" and info.role in ("security", "architecture"):
            return {"findings": [{
                "category": info.role, "severity": "high" if info.role == "security" else "low",
                "file": "app/q.py", "line": 2,
                "title": ("SQL injection through string formatting" if info.role == "security"
                          else "Query text built with %"),
                "description": "d", "suggestion": "db.execute(sql, (uid,))",
                "confidence": 0.9 if info.role == "security" else 0.7,
                "rules": ["S608"]}]}
        return scripted.offline_like(messages, info)

    scripted.fn = model
    inp = services.from_text(SQL_DIFF)
    run = engine.run_inline(services.start_review(
        alice, inp, services.prepare(inp), enqueue=False,
        models={"security": "scripted/main", "architecture": "scripted/main",
                "style": "offline/default", "synthesizer": "offline/default"}).pk)
    review = Review.objects.get(run=run)
    dup = review.findings.get(key="ARC-1")
    assert not dup.kept and dup.duplicate_of == "SEC-1"
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("review_detail", args=[run.pk])).content.decode()
    assert ("duplicate of SEC-1 \u201cSQL injection through string formatting\u201d at "
            "app/q.py:2") in page


# --- a style finding whose fix keeps a security problem is folded into it ------------------------
ORDERS = ('import sqlite3\n\n\ndef order(db, oid):\n'
          '    return db.execute("select * from orders where id = %s" % oid)\n')


def test_a_format_nit_on_an_injection_line_is_folded_into_the_security_finding():
    """ruff's UP031 ("use format specifiers instead of percent format") on the line of bandit's
    B608 suggests an f-string: the query is still built from the value, so its fix keeps the
    injection. It is folded into the security finding, and both say why."""
    rec, _ = offline_review_of([python_file("shop/orders.py", ORDERS)])
    [sql] = [f for f in rec.kept if "B608" in f["rules"]]
    assert not [f for f in rec.kept if "UP031" in f["rules"]]
    [nit] = [f for f in rec.dropped if "UP031" in f["rules"]]
    assert nit["drop_reason"].startswith(f"folded into {sql['key']} \u201c")
    assert "shop/orders.py:5" in nit["drop_reason"] and "keeps the injection" in \
        nit["drop_reason"]
    assert nit["duplicate_of"] == ""  # not a duplicate: another rule, made moot
    [step] = [q for q in nit["quality"] if q["stage"] == "fold"]
    assert (step["action"], step["into"]) == ("fold", sql["key"])
    [took] = [q for q in sql["quality"] if q["stage"] == "fold"]
    assert took["action"] == "absorb" and took["key"] == nit["key"]
    assert rec.verdict == "request_changes"


@pytest.mark.parametrize(("style", "security", "folded"), [
    # An f-string suggested on the line of a shell command built with %: folded.
    (finding("STY-1", "style", 5, "Use an f-string instead of % formatting", ["UP032"],
             "low", suggestion="f\"grep {uid} /etc/passwd\""),
     finding("SEC-1", "security", 5, "subprocess call with shell=True", ["B602"], "high"),
     True),
    # A model's style finding (no rule) saying the same thing in words: folded.
    (finding("STY-1", "style", 5, "Prefer an f-string over %-formatting", (), "low",
             suggestion="Write the query as an f-string."),
     finding("SEC-1", "security", 5, "SQL injection through string formatting", (), "high"),
     True),
    # A template literal suggested where JavaScript concatenates SQL: folded.
    (finding("STY-1", "style", 5, "Unexpected string concatenation", ["prefer-template"],
             "low", suggestion="Use a template literal."),
     finding("SEC-1", "security", 5, "SQL built from input", ["js-sql-injection"], "high"),
     True),
    # The style suggestion itself parameterises the query: it does not keep the problem.
    (finding("STY-1", "style", 5, "Use format specifiers", ["UP031"], "low",
             suggestion="Pass oid as a query parameter instead of formatting it."),
     finding("SEC-1", "security", 5, "SQL injection", ["B608"], "high"), False),
    # A security finding that is not an injection (a weak hash): the nit stays.
    (finding("STY-1", "style", 5, "Use format specifiers", ["UP031"], "low",
             suggestion="Replace with format specifiers on line 5."),
     finding("SEC-1", "security", 5, "Use of weak MD5 hash", ["B324"], "high"), False),
    # Another line: the nit stays.
    (finding("STY-1", "style", 9, "Use format specifiers", ["UP031"], "low",
             suggestion="Replace with format specifiers on line 9."),
     finding("SEC-1", "security", 5, "SQL injection", ["B608"], "high"), False),
    # A style nit about something else on the injection line: it stays.
    (finding("STY-1", "style", 5, "Line too long", ["E501"], "low",
             suggestion="Wrap the line."),
     finding("SEC-1", "security", 5, "SQL injection", ["B608"], "high"), False),
])
def test_which_style_findings_are_folded_into_a_security_finding(style, security, folded):
    findings = [style, security]
    assert fold.fold_style_into_security(findings) == int(folded)
    assert security["status"] == "kept"
    assert (style["status"] == "dropped") is folded
    if folded:
        assert style["drop_reason"].startswith("folded into SEC-1 \u201c")
    else:
        assert style["drop_reason"] == "" and not style.get("quality")
