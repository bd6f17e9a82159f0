"""Review exports (reviews_app.pipeline.export): SARIF 2.1.0 against the official schema, the
documented JSON structure, and a Markdown report in which hostile text stays inert."""

import html
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest
from markdown_it import MarkdownIt

from reviews_app.pipeline.export import (
    EXPORT_FORMATS,
    JSON_SCHEMA_VERSION,
    render,
    select_findings,
    to_json,
    to_markdown,
    to_sarif,
)
from reviews_app.pipeline.schema import CATEGORIES, SEVERITIES, SEVERITY_RANK

SARIF_SCHEMA_PATH = Path(__file__).parent / "data" / "sarif-2.1.0-rtm.5.json"

FINDING_KEYS = {
    "key", "category", "severity", "file", "line", "end_line", "title", "description",
    "suggestion", "confidence", "reviewers", "evidence", "decision", "decided_by", "decided_at",
    "comment", "history", "duplicate_of", "locations",
}
REVIEW_KEYS = {
    "id", "title", "tool_version", "source", "created_at", "status", "offline", "verdict",
    "triage", "summary", "notes", "analyzers",
}
TOP_KEYS = {
    "schema_version", "only_accepted", "review", "counts", "findings", "dropped", "coverage",
    "reviewers", "totals",
}


# --------------------------------------------------------------------------- factories


def make_finding(key="F1", *, category="security", severity="high", file="app/views.py",
                 line=10, end_line=None, decision=None, **extra):
    finding = {
        "key": key,
        "category": category,
        "severity": severity,
        "file": file,
        "line": line,
        "end_line": end_line,
        "title": f"Problem {key}",
        "description": f"Description of {key}.",
        "suggestion": "",
        "confidence": 0.8,
        "reviewers": [category],
        "evidence": [{"tool": "bandit", "rule": "B101"}],
        "decision": decision,
        "decided_by": "alice" if decision else None,
        "comment": "",
    }
    finding.update(extra)
    return finding


def make_review(findings=(), dropped=(), **extra):
    review = {
        "id": 42,
        "title": "Review of feature branch",
        "tool_version": "0.1.0",
        "source": {"kind": "diff", "label": "feature.diff"},
        "created_at": "2025-01-02T03:04:05+00:00",
        "status": "done",
        "offline": False,
        "verdict": {"proposed": "request_changes", "final": "request_changes",
                    "decided_by": "alice", "override_reason": ""},
        "summary": "Two security problems and some style nits.",
        "findings": list(findings),
        "dropped": list(dropped),
        "coverage": [{"path": "big.lock", "reason": "too_large", "detail": "9000 lines",
                      "reviewed": False}],
        "reviewers": {
            "security": {"status": "ok", "error": "", "model": "m1", "findings": 2,
                         "tokens": 1200, "cost_usd": 0.012},
            "style": {"status": "failed", "error": "timeout", "model": "m2", "findings": 0,
                      "tokens": 0, "cost_usd": 0.0},
        },
        "totals": {"tokens": 1200, "cost_usd": 0.012},
    }
    review.update(extra)
    return review


def full_findings():
    """Every category x severity, with and without line numbers and end lines, mixed decisions."""
    findings = []
    decisions = ("accepted", "rejected", None)
    n = 0
    for category in CATEGORIES:
        for severity in SEVERITIES:
            n += 1
            line = None if n % 4 == 0 else n * 3
            end_line = line + 2 if line is not None and n % 2 else None
            findings.append(make_finding(
                f"F{n}", category=category, severity=severity, file=f"src/{category}/m{n % 3}.py",
                line=line, end_line=end_line, decision=decisions[n % 3],
            ))
    return findings


# --------------------------------------------------------------------------- SARIF


@pytest.fixture(scope="module")
def sarif_validator():
    with SARIF_SCHEMA_PATH.open(encoding="utf-8") as fh:
        schema = json.load(fh)
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def assert_valid_sarif(validator, log):
    """Valid against the schema, and what the schema cannot check: every result's rule is
    defined, once, where its ruleIndex (and toolComponent) say; every defined rule is used."""
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator.iter_errors(log)]
    assert errors == []
    for run in log["runs"]:
        used = set()
        for result in run["results"]:
            rule = rule_of(log, result, run)
            assert rule["id"] == result["ruleId"]
            component = result.get("rule", {}).get("toolComponent", {}).get("name", "driver")
            used.add((component, rule["id"]))
        components = [("driver", run["tool"]["driver"])] + [
            (ext["name"], ext) for ext in run["tool"].get("extensions", [])]
        assert len({name for name, _ in components}) == len(components)
        defined = [(name, rule["id"]) for name, c in components for rule in c.get("rules", [])]
        assert len(defined) == len(set(defined)), "a rule is defined twice"
        assert set(defined) == used, "a rule is defined but never used"


def rule_of(log, result, run=None):
    """The reportingDescriptor a result refers to (SARIF 3.27.6/3.27.7)."""
    run = run or log["runs"][0]
    ref = result.get("rule")
    if ref and "toolComponent" in ref:
        component = run["tool"]["extensions"][ref["toolComponent"]["index"]]
        assert component["name"] == ref["toolComponent"]["name"]
        assert ref["index"] == result["ruleIndex"] and ref["id"] == result["ruleId"]
    else:
        component = run["tool"]["driver"]
    return component["rules"][result["ruleIndex"]]


def results_of(log):
    assert len(log["runs"]) == 1
    return log["runs"][0]["results"]


def test_sarif_schema_validator_rejects_broken_logs(sarif_validator):
    log = to_sarif(make_review(full_findings()))
    broken_level = json.loads(json.dumps(log))
    broken_level["runs"][0]["results"][0]["level"] = "fatal"
    broken_line = json.loads(json.dumps(log))
    broken_line["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] = {
        "startLine": 0}
    assert not sarif_validator.is_valid(broken_level)
    assert not sarif_validator.is_valid(broken_line)
    assert not sarif_validator.is_valid({"version": "2.1.0"})


def test_sarif_full_review_is_valid(sarif_validator):
    findings = full_findings()
    review = make_review(findings, dropped=[make_finding("D1", drop_reason="duplicate")])
    log = to_sarif(review)
    assert_valid_sarif(sarif_validator, log)
    # The text render is the same log and valid too.
    assert_valid_sarif(sarif_validator, json.loads(render(review, "sarif")))

    assert log["version"] == "2.1.0"
    results = results_of(log)
    assert [r["properties"]["key"] for r in results] == [
        f["key"] for f in select_findings(review, False)]
    assert "D1" not in {r["properties"]["key"] for r in results}

    for result in results:  # every factory finding rests on bandit's B101
        assert rule_of(log, result)["id"] == result["ruleId"] == "B101"
        assert result["properties"]["category"] in CATEGORIES
    assert log["runs"][0]["properties"]["droppedFindings"] == 1

    by_key = {r["properties"]["key"]: r for r in results}
    for finding in findings:
        location = by_key[finding["key"]]["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == finding["file"]
        if finding["line"] is None:
            assert "region" not in location
        else:
            region = location["region"]
            assert region["startLine"] == finding["line"]
            assert region.get("endLine") == finding["end_line"]
    # The failed reviewer is reported, the successful one is not.
    invocation = log["runs"][0]["invocations"][0]
    notes = invocation["toolExecutionNotifications"]
    assert [n["properties"]["reviewer"] for n in notes] == ["style"]
    assert "timeout" in notes[0]["message"]["text"]


def test_sarif_zero_findings_is_valid(sarif_validator):
    review = make_review([], reviewers={}, totals={}, coverage=[], tool_version="")
    log = to_sarif(review)
    assert_valid_sarif(sarif_validator, log)
    assert results_of(log) == []
    assert_valid_sarif(sarif_validator, to_sarif({}))


def test_sarif_only_accepted(sarif_validator):
    findings = full_findings()
    review = make_review(findings)
    log = to_sarif(review, only_accepted=True)
    assert_valid_sarif(sarif_validator, log)
    keys = [r["properties"]["key"] for r in results_of(log)]
    accepted = [f["key"] for f in findings if f["decision"] == "accepted"]
    assert keys and sorted(keys) == sorted(accepted)
    assert {r["properties"]["decision"] for r in results_of(log)} == {"accepted"}
    assert log["runs"][0]["properties"]["onlyAccepted"] is True
    assert len(results_of(to_sarif(review))) == len(findings)


URI_CHARS = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})+$")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("../../etc/passwd", "etc/passwd"),
        ("/abs/path.py", "abs/path.py"),
        ("a b/ü.py", "a%20b/%C3%BC.py"),
        ("<script>alert(1)</script>.py", "%3Cscript%3Ealert%281%29%3C/script%3E.py"),
        ("./src/../../x.py", "src/x.py"),
        ("C:/windows/x.py", "C%3A/windows/x.py"),
        ("..\\..\\win.py", "win.py"),
        ("%2e%2e/q?x#y.py", "%252e%252e/q%3Fx%23y.py"),
    ],
)
def test_sarif_hostile_file_names(sarif_validator, name, expected):
    log = to_sarif(make_review([make_finding(file=name)]))
    assert_valid_sarif(sarif_validator, log)
    uri = results_of(log)[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == expected
    parts = urlsplit(uri)
    assert parts.scheme == "" and parts.netloc == "" and parts.query == "" and parts.fragment == ""
    assert not uri.startswith("/")
    assert URI_CHARS.match(uri)
    for segment in uri.split("/"):
        assert segment not in ("", ".", "..")
        assert unquote(segment) not in ("", ".", "..")
        assert "\\" not in unquote(segment)


@pytest.mark.parametrize("name", ["", None, "..", "../..", "/", "./."])
def test_sarif_file_names_without_path_have_no_location(sarif_validator, name):
    log = to_sarif(make_review([make_finding(file=name)]))
    assert_valid_sarif(sarif_validator, log)
    assert "locations" not in results_of(log)[0]


def test_sarif_severity_levels(sarif_validator):
    expected = {"critical": "error", "high": "error", "medium": "warning", "low": "note",
                "info": "note", "bogus": "warning"}
    findings = [make_finding(sev, severity=sev) for sev in expected]
    log = to_sarif(make_review(findings))
    assert_valid_sarif(sarif_validator, log)
    assert {r["properties"]["key"]: r["level"] for r in results_of(log)} == expected


def test_sarif_regions_ignore_bad_lines(sarif_validator):
    findings = [
        make_finding("A", line=0),
        make_finding("B", line=-3),
        make_finding("C", line=True),
        make_finding("D", line="12"),
        make_finding("E", line=7, end_line=3),
        make_finding("F", line=7, end_line=7),
    ]
    log = to_sarif(make_review(findings))
    assert_valid_sarif(sarif_validator, log)
    regions = {r["properties"]["key"]: r["locations"][0]["physicalLocation"].get("region")
               for r in results_of(log)}
    assert regions == {"A": None, "B": None, "C": None, "D": None, "E": {"startLine": 7},
                       "F": {"startLine": 7, "endLine": 7}}


def test_sarif_rule_ids_are_analyzer_rules_or_stable_model_ids(sarif_validator):
    findings = [
        make_finding("A1", severity="critical", evidence=[{"tool": "bandit+ruff", "rule": "B602",
                     "url": "https://bandit.readthedocs.io/b602.html"}]),
        make_finding("A2", category="style", severity="low", file="src/a.py", line=1,
                     evidence=[{"tool": "ruff", "rule": "F401"}]),
        make_finding("A3", category="style", severity="low", file="src/a.py", line=2,
                     evidence=[{"tool": "ruff", "rule": "F401"}]),
        # Older exports did not name the analyzer: B1xx-B7xx are bandit's, the rest ruff's.
        make_finding("A4", category="style", severity="info", file="src/b.py", line=3,
                     evidence=[{"tool": "analyzer", "rule": "W191"}]),
        make_finding("M1", severity="high", file="src/db.py", line=4, evidence=[],
                     title="SQL injection in get_user"),
        make_finding("M2", severity="high", file="src/db.py", line=9, title="Raw SQL built "
                     "with an f-string", evidence=[{"tool": "model", "rule": "SQLI-1"}]),
        make_finding("M3", category="architecture", severity="medium", file="src/c.py", line=5,
                     evidence=[{"tool": "model", "rule": "B602"}], title="God object"),
    ]
    log = to_sarif(make_review(findings))
    assert_valid_sarif(sarif_validator, log)
    by_key = {r["properties"]["key"]: r for r in results_of(log)}
    assert {k: r["ruleId"] for k, r in by_key.items()} == {
        "A1": "B602", "A2": "F401", "A3": "F401", "A4": "W191",
        "M1": "quorum/security/sql-injection", "M2": "quorum/security/sql-injection",
        # A rule no analyzer reported (tool "model") does not make a model finding B602.
        "M3": "quorum/architecture/general"}
    for result in by_key.values():  # the category is a property, not the rule id
        assert result["properties"]["category"] in CATEGORIES
    tool = log["runs"][0]["tool"]
    assert [r["id"] for r in tool["driver"]["rules"]] == [
        "quorum/security/sql-injection", "quorum/architecture/general"]
    assert {e["name"]: [r["id"] for r in e["rules"]] for e in tool["extensions"]} == {
        "bandit": ["B602"], "ruff": ["F401", "W191"]}
    bandit = tool["extensions"][0]["rules"][0]
    assert bandit["helpUri"] == "https://bandit.readthedocs.io/b602.html"
    assert bandit["properties"]["category"] == "security"
    # Stable: the same kinds of finding, in another run and order, get the same rule ids.
    again = to_sarif(make_review([dict(findings[4], key="X9", title="Possible SQL injection"),
                                  dict(findings[1], key="X8", line=40)]))
    assert {r["ruleId"] for r in results_of(again)} == {"quorum/security/sql-injection", "F401"}


@pytest.mark.parametrize(("category", "title", "rule_id"), [
    ("security", "Hard-coded AWS access key in settings", "quorum/security/hard-coded-secret"),
    ("security", "Missing CSRF token check on delete", "quorum/security/access-control"),
    ("security", "User input passed to subprocess with shell=True",
     "quorum/security/command-injection"),
    ("security", "innerHTML set from location.hash", "quorum/security/cross-site-scripting"),
    ("architecture", "Bare except hides database errors", "quorum/architecture/error-handling"),
    ("architecture", "Hard-coded URL of the billing service", "quorum/architecture/general"),
    ("style", "Unused variable `tmp`", "quorum/style/unused-code"),
])
def test_sarif_model_rule_ids_name_the_kind_of_problem(sarif_validator, category, title,
                                                        rule_id):
    finding = make_finding(category=category, title=title, evidence=[])
    log = to_sarif(make_review([finding]))
    assert_valid_sarif(sarif_validator, log)
    assert results_of(log)[0]["ruleId"] == rule_id


def test_sarif_validates_every_result_shape(sarif_validator):
    findings = [
        make_finding("L1", line=3, end_line=9),
        make_finding("L2", line=None, severity="medium"),  # file-level finding
        make_finding("L3", file="", line=4, severity="low"),  # no file at all
        make_finding("L4", file="..\\..\\etc/pass wd\u202e.py", line=1, severity="info",
                     title="<script>alert(1)</script>\u202egnp.exe\x00", evidence=[],
                     description="`|` back\nticks\r\nand | pipes", suggestion="a\x1bb"),
        make_finding("L5", category="made-up category!", severity="weird", evidence=[]),
        make_finding("L6", decision="rejected", comment="false positive\u2066"),
        make_finding("L7", evidence=[{"tool": "ruff", "rule": "S608",
                                      "url": "javascript:alert(1)"}]),
    ]
    dropped = [make_finding("D1", drop_reason="duplicate of L1", duplicate_of="L1")]
    review = make_review(findings, dropped=dropped)
    for only_accepted in (False, True):
        assert_valid_sarif(sarif_validator, to_sarif(review, only_accepted=only_accepted))
    log = to_sarif(review)
    by_key = {r["properties"]["key"]: r for r in results_of(log)}
    assert set(by_key) == {f["key"] for f in findings}  # dropped findings are not results
    assert "region" not in by_key["L2"]["locations"][0]["physicalLocation"]
    assert "locations" not in by_key["L3"]
    hostile = by_key["L4"]
    assert hostile["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "etc/pass%20wd%E2%80%AE.py"
    assert hostile["message"]["text"].startswith("<script>alert(1)</script>\ufffdgnp.exe\ufffd")
    assert "a\ufffdb" in hostile["message"]["text"] and "\r" not in hostile["message"]["text"]
    assert hostile["ruleId"] == "quorum/security/general"
    assert by_key["L5"]["ruleId"] == "quorum/made-up-category/general"
    assert by_key["L5"]["level"] == "warning"
    assert "\u2066" not in by_key["L6"]["suppressions"][0]["justification"]
    s608 = rule_of(log, by_key["L7"])
    assert s608["id"] == "S608" and "helpUri" not in s608  # only http(s) links
    failed = make_review([], reviewers={"sec\u202e": {"status": "failed", "error": "boom\x07"}})
    note = to_sarif(failed)["runs"][0]["invocations"][0]["toolExecutionNotifications"][0]
    assert note["message"]["text"] == "Reviewer sec\ufffd failed: boom\ufffd"


# --------------------------------------------------------------------------- JSON


def test_json_has_every_documented_key():
    review = make_review(full_findings(), dropped=[make_finding("D1", drop_reason="dup")])
    data = json.loads(to_json(review))
    assert set(data) == TOP_KEYS
    assert data["schema_version"] == JSON_SCHEMA_VERSION == 1
    assert data["only_accepted"] is False
    assert set(data["review"]) == REVIEW_KEYS
    assert set(data["review"]["source"]) == {"kind", "label"}
    assert set(data["review"]["verdict"]) == {"proposed", "final", "decided_by", "decided_at",
                                              "version", "override_reason", "by_rules"}
    assert set(data["counts"]) == set(SEVERITIES)
    assert data["counts"] == dict.fromkeys(SEVERITIES, len(CATEGORIES))
    assert len(data["findings"]) == len(review["findings"])
    for record in data["findings"]:
        assert set(record) == FINDING_KEYS
    for item in data["coverage"]:
        assert set(item) == {"path", "reason", "detail", "reviewed"}
    assert set(data["reviewers"]) == {"security", "style"}
    for info in data["reviewers"].values():
        assert set(info) == {"status", "error", "model", "findings", "tokens", "cost_usd"}
    assert set(data["totals"]) == {"tokens", "cost_usd"}
    assert data["review"]["id"] == 42
    assert data["reviewers"]["style"]["error"] == "timeout"


def test_json_keys_present_for_sparse_review():
    data = json.loads(to_json({"findings": [{"severity": "low"}], "dropped": [{}]}))
    assert set(data) == TOP_KEYS
    assert set(data["review"]) == REVIEW_KEYS
    assert set(data["findings"][0]) == FINDING_KEYS
    assert set(data["dropped"][0]) == FINDING_KEYS | {"drop_reason"}
    record = data["findings"][0]
    assert record["reviewers"] == [] and record["evidence"] == []
    assert record["title"] == "" and record["line"] is None and record["confidence"] is None
    assert data["dropped"][0]["drop_reason"] == ""
    assert data["counts"]["low"] == 1


def test_json_only_accepted_and_dropped():
    findings = full_findings()
    dropped = [make_finding("D2", severity="low", drop_reason="below threshold"),
               make_finding("D1", severity="critical", drop_reason="duplicate of F1")]
    review = make_review(findings, dropped=dropped)

    everything = json.loads(to_json(review))
    assert [d["key"] for d in everything["dropped"]] == ["D1", "D2"]
    assert [d["drop_reason"] for d in everything["dropped"]] == ["duplicate of F1",
                                                                 "below threshold"]
    assert "drop_reason" not in everything["findings"][0]

    accepted = json.loads(to_json(review, only_accepted=True))
    assert accepted["only_accepted"] is True
    assert "dropped" not in accepted
    keys = {f["key"] for f in accepted["findings"]}
    assert keys == {f["key"] for f in findings if f["decision"] == "accepted"}
    assert accepted["counts"] == {
        s: sum(1 for f in findings if f["severity"] == s and f["decision"] == "accepted")
        for s in SEVERITIES
    }
    assert sum(accepted["counts"].values()) < sum(everything["counts"].values())


def test_json_ordering_strongest_first_then_file_then_line():
    findings = [
        make_finding("a", severity="low", file="b.py", line=1),
        make_finding("b", severity="critical", file="z.py", line=5),
        make_finding("c", severity="medium", file="a.py", line=9),
        make_finding("d", severity="critical", file="a.py", line=20),
        make_finding("e", severity="critical", file="a.py", line=3),
        make_finding("f", severity="info", file="a.py", line=1),
        make_finding("g", severity="high", file="a.py", line=None),
    ]
    data = json.loads(to_json(make_review(findings)))
    assert [f["key"] for f in data["findings"]] == ["e", "d", "b", "g", "c", "a", "f"]
    ranks = [SEVERITY_RANK[f["severity"]] for f in data["findings"]]
    assert ranks == sorted(ranks)


def test_json_round_trip():
    review = make_review(full_findings(), title='Quote " backslash \\ ü \u2028 <tag>')
    text = render(review, "json")
    assert text == to_json(review)
    data = json.loads(text)
    assert data["review"]["title"] == review["title"]
    assert json.loads(json.dumps(data)) == data
    by_key = {f["key"]: f for f in data["findings"]}
    for finding in review["findings"]:
        expected = {k: finding.get(k) for k in FINDING_KEYS}
        expected.update(history=[], duplicate_of="")  # absent list / text fields export empty
        # one place: its own (a cluster lists each of its places, see below)
        expected["locations"] = [{"file": finding["file"], "line": finding["line"],
                                  "end_line": finding["end_line"], "key": ""}]
        if expected["decision"] is None:  # unknown text fields export as ""
            expected["decision"] = ""
        assert by_key[finding["key"]] == expected


# --------------------------------------------------------------------------- Markdown

HOSTILE = (
    "<script>alert(1)</script> <img src=x onerror=alert(1)> "
    "[link](javascript:alert(1)) <javascript:alert(2)> *em* _em_ ~~del~~ `code`"
)
HOSTILE_LINES = "# heading\n| table | x |\n|---|---|\n| a | b |\n> quote\n    indented\n" + HOSTILE
SUGGESTION = (
    "Replace it with:\n```\n<script>alert(1)</script>\n````\n~~~\n"
    "[x](javascript:alert(1))\n```python\nprint('x')"
)
EXPECTED_H2 = ["Summary", "Findings by severity", "Findings", "Dropped findings", "Coverage",
               "Reviewers", "Totals"]


def hostile_review():
    findings = [
        make_finding(
            "<script>K1</script>", severity="critical", file="<img src=x onerror=alert(1)>.py",
            title="Title\n    indented\n# heading\n" + HOSTILE, description=HOSTILE_LINES, suggestion=SUGGESTION,
            reviewers=["<script>r</script>", "[r](javascript:alert(1))"],
            evidence=[{"tool": "<img src=x onerror=1>", "rule": "[x](javascript:1)"}],
            decision="accepted", decided_by="<script>u</script>", comment="c\n\n" + HOSTILE_LINES,
            category="<script>c</script>",
        ),
        make_finding("K2", severity="low", file="| table |/[a](javascript:alert(1)).py",
                     title="| table |", suggestion="one line ``` " + HOSTILE, decision="accepted"),
    ]
    dropped = [make_finding("D1", title=HOSTILE, file="<script>.py", drop_reason=HOSTILE)]
    return make_review(
        findings, dropped=dropped, title="# heading " + HOSTILE, summary=HOSTILE_LINES,
        source={"kind": "<script>k</script>", "label": "[l](javascript:alert(1))"},
        status="<img src=x onerror=alert(1)>", tool_version="<script>v</script>",
        created_at="[c](javascript:alert(1))",
        verdict={"proposed": "<script>p</script>", "final": "[f](javascript:alert(1))",
                 "decided_by": "<img src=x onerror=1>", "override_reason": HOSTILE},
        coverage=[{"path": "<script>p</script>", "reason": HOSTILE, "detail": "| table |",
                   "reviewed": True}],
        reviewers={"<script>n</script>": {"status": "failed", "error": HOSTILE,
                                          "model": "[m](javascript:alert(1))", "findings": 1,
                                          "tokens": 3, "cost_usd": 0.5}},
    )


def render_html(md):
    return MarkdownIt("commonmark").render(md)


def inline_code(md):
    """The contents of the inline code spans a CommonMark parser finds in ``md``."""
    return [child.content for token in MarkdownIt("commonmark").parse(md)
            if token.type == "inline" for child in token.children or ()
            if child.type == "code_inline"]


FENCE = re.compile(r"^(`{3,})text\n(.*?)\n\1$", re.MULTILINE | re.DOTALL)


def test_markdown_raw_output_has_no_html_or_javascript_links():
    md = to_markdown(hostile_review())
    # The multi-line suggestion is verbatim inside its fence (code is never interpreted);
    # everything else must be free of raw tags and links.
    fences = FENCE.findall(md)
    assert [body for _, body in fences] == [SUGGESTION]
    md = FENCE.sub("", md)
    assert "alert" in md  # the hostile text is there, only escaped
    # Raw tags only inside inline code spans (file names, shown as written, never as HTML).
    tag = re.compile(r"<\s*(script|img)", re.IGNORECASE)
    in_code = [c for c in inline_code(md) if tag.search(c)]
    assert in_code == ["<img src=x onerror=alert(1)>.py", "<script>.py", "<script>p</script>"]
    assert len(tag.findall(md)) == sum(len(tag.findall(c)) for c in in_code)
    outside_code = md
    for code in inline_code(md):
        outside_code = outside_code.replace(f"`{code}`", "")
    assert not tag.search(outside_code)
    # Link syntax only with its brackets escaped (a backslash before "]").
    assert not re.search(r"(?<!\\)\]\(\s*<?\s*javascript:", outside_code, re.IGNORECASE)
    assert not re.search(r"<javascript:", outside_code, re.IGNORECASE)


def test_markdown_rendered_html_is_inert():
    md = to_markdown(hostile_review())
    rendered = render_html(md)
    lowered = rendered.lower()
    assert "<script" not in lowered
    assert "<img" not in lowered
    assert 'href="javascript:' not in lowered
    assert "<a " not in lowered
    assert "<table" not in lowered
    assert "<blockquote" not in lowered
    assert "<em>" not in lowered
    # One fenced block (the suggestion), no indented code; inline code only for file names,
    # rule ids and the text's own `code` pairs, each exactly as written.
    assert lowered.count("<pre><code") == 1
    inline = [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", rendered)]
    assert set(inline) == {"code", "<img src=x onerror=alert(1)>.py", "[x](javascript:1)",
                           "| table |/[a](javascript:alert(1)).py", "B101", "<script>.py",
                           "<script>p</script>"}
    # Only the report's own headings exist.
    assert len(re.findall(r"<h1>", rendered)) == 1
    assert re.findall(r"<h2>(.*?)</h2>", rendered) == EXPECTED_H2
    assert re.findall(r"<h3>(.*?)</h3>", rendered) == ["Critical (1)", "Low (1)"]
    assert len(re.findall(r"<h4>", rendered)) == 2
    # The hostile text is shown as text.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    assert "[link](javascript:alert(1))" in rendered


def test_markdown_suggestion_stays_in_one_fenced_block():
    md = to_markdown(hostile_review())
    rendered = render_html(md)
    blocks = re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", rendered, re.DOTALL)
    assert len(blocks) == 1
    assert html.unescape(blocks[0]) == SUGGESTION + "\n"
    # What follows the fence is normal Markdown again.
    after = rendered.split("</code></pre>", 1)[1]
    assert "<h4>" in after and "<h2>Dropped findings</h2>" in after


@pytest.mark.parametrize("fence", ["```", "`````", "~~~", "    ```", "```````````"])
def test_markdown_fence_cannot_be_closed_by_suggestion(fence):
    suggestion = f"a = 1\n{fence}\n# not a heading\n<script>x</script>"
    review = make_review([make_finding(suggestion=suggestion)])
    rendered = render_html(to_markdown(review))
    blocks = re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", rendered, re.DOTALL)
    assert [html.unescape(b) for b in blocks] == [suggestion + "\n"]
    assert "<script" not in rendered


def test_markdown_hidden_characters_are_replaced():
    md = to_markdown(make_review([make_finding(title="a\u202eb\u200bc\x00d")]))
    assert "\u202e" not in md and "\u200b" not in md and "\x00" not in md
    assert "a\ufffdb\ufffdc\ufffdd" in md
    # Line breaks in one-line fields become plain spaces.
    md = to_markdown(make_review([make_finding(title="line one\r\n  line\ttwo\n")]))
    assert "\n#### F1 · line one line two\n" in md


def test_markdown_content_and_only_accepted():
    findings = full_findings()
    review = make_review(findings, dropped=[make_finding("D1", drop_reason="dup")])
    md = to_markdown(review)
    rendered = render_html(md)
    assert re.findall(r"<h3>(.*?)</h3>", rendered) == [f"{s.title()} (3)" for s in SEVERITIES]
    assert "Dropped findings" in md and "D1" in md
    assert "<strong>Total:</strong> 15" in rendered
    assert "`src/security/m1.py`:3–5" in md  # F1: line 3, end line 5

    accepted = to_markdown(review, only_accepted=True)
    assert "Dropped findings" not in accepted and "D1" not in accepted
    accepted_keys = {f["key"] for f in findings if f["decision"] == "accepted"}
    shown = set(re.findall(r"^#### (F\d+) ", accepted, re.MULTILINE))
    assert shown == accepted_keys
    assert "accepted findings only" in accepted

    assert "No accepted findings." in to_markdown(make_review([make_finding()]),
                                                  only_accepted=True)
    assert "No findings." in to_markdown(make_review([]))


def test_markdown_tolerates_odd_numbers():
    review = make_review(reviewers={"r": {"status": "ok", "findings": 2.0, "tokens": "many",
                                          "cost_usd": None}})
    md = to_markdown(review)
    assert "- **r:** ok (unknown findings, unknown tokens)" in md
    assert "many" not in md


# --------------------------------------------------------------------------- dispatch


def test_export_formats():
    assert set(EXPORT_FORMATS) == {"markdown", "json", "sarif"}
    assert EXPORT_FORMATS["markdown"][0] == "text/markdown"
    assert EXPORT_FORMATS["json"][0] == "application/json"
    assert EXPORT_FORMATS["sarif"][0] == "application/sarif+json"
    for mime, extension in EXPORT_FORMATS.values():
        assert re.fullmatch(r"[a-z]+/[a-z+.-]+", mime)
        assert re.fullmatch(r"[a-z]+", extension)


def test_render_dispatch():
    review = make_review(full_findings())
    assert render(review, "markdown") == to_markdown(review)
    assert render(review, "markdown", only_accepted=True) == to_markdown(review,
                                                                         only_accepted=True)
    assert json.loads(render(review, "json", only_accepted=True))["only_accepted"] is True
    assert json.loads(render(review, "sarif")) == to_sarif(review)


@pytest.mark.parametrize("fmt", ["html", "", "MARKDOWN", "sarif ", None])
def test_render_unknown_format(fmt):
    with pytest.raises(ValueError, match="unknown export format"):
        render(make_review(), fmt)


@pytest.mark.parametrize("fmt", sorted(EXPORT_FORMATS))
def test_malformed_values_do_not_crash(fmt):
    odd = {"key": None, "severity": ["high"], "category": None, "file": 123, "line": "12",
           "end_line": True, "title": None, "confidence": "high", "reviewers": None,
           "evidence": ["text", {"tool": "ruff"}], "decision": None}
    review = {"findings": [odd, "not a dict"], "dropped": [odd],
              "verdict": {"proposed": ["x"], "final": {"a": 1}},
              "reviewers": {"a": {"findings": 2.5, "tokens": "x"}, "b": "not a dict"},
              "coverage": ["x", {"path": None}]}
    text = render(review, fmt)
    assert text


# --------------------------------------------------------------------------- selection


def test_select_findings_orders_and_filters():
    findings = [
        make_finding("low", severity="low", decision="accepted"),
        make_finding("crit", severity="critical", decision="rejected"),
        make_finding("high", severity="high", decision="accepted"),
        make_finding("odd", severity="whatever", decision="accepted"),
        make_finding("pending", severity="medium", decision=None),
    ]
    review = make_review(findings)
    selected = select_findings(review, only_accepted=False)
    assert [f["key"] for f in selected] == ["crit", "high", "pending", "low", "odd"]
    accepted = select_findings(review, only_accepted=True)
    assert [f["key"] for f in accepted] == ["high", "low", "odd"]
    # The dicts are the review's own, the list is new.
    assert all(any(s is f for f in findings) for s in selected)
    assert selected is not review["findings"]
    selected.clear()
    assert len(review["findings"]) == 5
    assert [f["key"] for f in review["findings"]] == [f["key"] for f in findings]


def test_select_findings_ignores_dropped_and_non_dicts():
    review = make_review([make_finding("k"), "junk", None],
                         dropped=[make_finding("d", decision="accepted")])
    assert [f["key"] for f in select_findings(review, False)] == ["k"]
    assert select_findings(review, True) == []
    assert select_findings({}, False) == []
    assert select_findings({"findings": None}, True) == []


def test_rejected_findings_carry_a_sarif_suppression(sarif_validator):
    review = make_review(full_findings())
    for f in review["findings"]:
        f["decision"] = "pending"
    review["findings"][0].update(decision="rejected", decided_by="alice", comment="false alarm")
    log = to_sarif(review)
    assert_valid_sarif(sarif_validator, log)
    results = log["runs"][0]["results"]
    suppressed = [r for r in results if r.get("suppressions")]
    assert len(suppressed) == 1
    assert suppressed[0]["properties"]["key"] == review["findings"][0]["key"]
    assert "alice" in suppressed[0]["suppressions"][0]["justification"]
    assert "false alarm" in suppressed[0]["suppressions"][0]["justification"]


# --------------------------------------------------------------------------- Markdown as written


def plain_text(rendered):
    return html.unescape(re.sub(r"<[^>]+>", "", rendered))


def test_markdown_reads_as_written_raw_and_rendered():
    finding = make_finding(
        "F1", file="src/my_file.py", line=6, title="F401: `os` imported but unused in my_file.py",
        description="Call __init__() with a_b and 2 * 3 = 6 (see docs).\n"
                    "Use C:\\Users\\me\\app.py; 50% of #12 & more - ok.",
        suggestion="Remove `import os` (line 1).",
        evidence=[{"tool": "ruff", "rule": "F401"}])
    review = make_review([finding], title="feature/my_branch: fix (part 1) - v2.0",
                         summary="First line.\nSecond: x = a-b + c.", tool_version="0.1.0",
                         coverage=[{"path": "docs/read_me.md", "reason": "generated",
                                    "detail": "", "reviewed": False}])
    md = to_markdown(review)
    # Raw: nothing escaped that needs no escaping.
    assert md.startswith("# feature/my_branch: fix (part 1) - v2.0\n")
    assert "\n#### F1 · F401: `os` imported but unused in my_file.py\n" in md
    assert "- **Location:** `src/my_file.py`:6\n" in md
    assert "- **Quorum version:** 0.1.0\n" in md
    assert "- **Created:** 2025-01-02T03:04:05+00:00\n" in md
    assert "- **Evidence:** `F401` (ruff)\n" in md
    assert "- `docs/read_me.md`: not reviewed, generated\n" in md
    assert "**Suggestion:** Remove `import os` (line 1).\n" in md
    # Rendered: the intended text, code as code, no stray backslashes.
    rendered = render_html(md)
    assert re.findall(r"<h1>(.*?)</h1>", rendered) == ["feature/my_branch: fix (part 1) - v2.0"]
    assert re.findall(r"<h4>(.*?)</h4>", rendered) == [
        "F1 · F401: <code>os</code> imported but unused in my_file.py"]
    assert "<strong>Location:</strong> <code>src/my_file.py</code>:6" in rendered
    assert "<li><code>docs/read_me.md</code>: not reviewed, generated</li>" in rendered
    assert "<strong>Evidence:</strong> <code>F401</code> (ruff)" in rendered
    assert "<code>import os</code>" in rendered
    text = plain_text(rendered)
    assert "Call __init__() with a_b and 2 * 3 = 6 (see docs).\n" in text
    assert "Use C:\\Users\\me\\app.py; 50% of #12 & more - ok." in text
    assert "First line.\nSecond: x = a-b + c." in text
    assert text.count("\\") == 3  # the Windows path's own backslashes, nothing else


@pytest.mark.parametrize("text", [
    "a | b |\n|---|---|\n| c | d |",  # a GFM table
    "`` `| x |` ``\n|-|-|",
    "~~gone~~ and ~tilde~",
    "<script>alert(1)</script>\n\n<div onclick=x>",
    "1. one\n2) two\n- item\n+ item\n> quote\n===\n---\n***",
    "```\nfence\n```\n~~~",
    "&lt;script&gt; &#60;b&#62; &amp;",
    "trailing backslash \\\nhard break?  \nnext",
    "[ref]: javascript:alert(1)\n[ref] ![img](x.png) <http://x.y> www.example.com",
])
def test_markdown_untrusted_text_cannot_make_structure(text):
    finding = make_finding("F1", title=text, description=text, comment=text,
                           file=f"src/{text}.py", suggestion=text.replace("\n", " "))
    review = make_review([finding], summary=text, title=text,
                         coverage=[{"path": text, "reason": text, "detail": text,
                                    "reviewed": False}])
    md = to_markdown(review)
    rendered = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md)
    for tag in ("<table", "<s>", "<del", "<script", "<div", "<a ", "<img", "<blockquote",
                "<ol", "<hr", "<pre", "<h5", "<h6", "<em"):
        assert tag not in rendered, (tag, md)
    # The report's own structure is intact: headings, and one list per section.
    assert len(re.findall(r"<h1>", rendered)) == len(re.findall(r"<h4>", rendered)) == 1
    assert re.findall(r"<h2>(.*?)</h2>", rendered) == [
        "Summary", "Findings by severity", "Findings", "Coverage", "Reviewers", "Totals"]
    # Entities in the text are shown as typed, not decoded into markup.
    if "&lt;" in text:
        assert "&amp;lt;script&amp;gt;" in rendered and "&amp;#60;b&amp;#62;" in rendered


def test_a_clustered_findings_other_places_reach_markdown_and_sarif(sarif_validator):
    """QA: the page said "Also at app/users.py:11" but the exports named only line 5, so CI
    annotations missed the second place."""
    clustered = make_finding("SEC-1", file="app/users.py", line=5, locations=[
        {"file": "app/users.py", "line": 5, "end_line": None, "key": "SEC-1"},
        {"file": "app/users.py", "line": 11, "end_line": 12, "key": "SEC-2"},
        {"file": "../../etc/passwd`|", "line": 3, "end_line": None, "key": "SEC-3"},
        "not a place", {"line": 4}])
    review = make_review([clustered])
    md = to_markdown(review)
    # A file name with a backtick gets a longer code span (md_code), so it cannot end it early.
    assert "- **Also at:** `app/users.py`:11–12, ``../../etc/passwd`|``:3\n" in md, md
    assert md.count("**Also at:**") == 1
    log = to_sarif(review)
    sarif_validator.validate(log)
    (result,) = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 5
    related = result["relatedLocations"]
    assert [r["physicalLocation"]["region"] for r in related] == [
        {"startLine": 11, "endLine": 12}, {"startLine": 3}]
    assert related[1]["physicalLocation"]["artifactLocation"]["uri"] == "etc/passwd%60%7C"
    assert [r["id"] for r in related] == [1, 2]
    # Issue 36: each place is one of the result's locations too (the problem is at every one).
    assert [(loc["physicalLocation"]["artifactLocation"]["uri"],
             loc["physicalLocation"]["region"]) for loc in result["locations"]] == [
        ("app/users.py", {"startLine": 5}), ("app/users.py", {"startLine": 11, "endLine": 12}),
        ("etc/passwd%60%7C", {"startLine": 3})]


def test_the_json_export_lists_every_place_a_cluster_holds():
    """Issue 36: a JSON consumer saw one line; the other places only under "dropped"."""
    clustered = make_finding("SEC-1", file="app/users.py", line=5, locations=[
        {"file": "app/users.py", "line": 5, "end_line": None, "key": "SEC-1"},
        {"file": "app/users.py", "line": 11, "end_line": 12, "key": "SEC-2"},
        {"file": "app/admin.py", "line": 3, "end_line": None, "key": "SEC-3"}, "not a place"])
    alone = make_finding("F1", file="app/views.py", line=10)
    data = json.loads(to_json(make_review([clustered, alone])))
    by_key = {f["key"]: f for f in data["findings"]}
    assert by_key["SEC-1"]["locations"] == [
        {"file": "app/users.py", "line": 5, "end_line": None, "key": ""},
        {"file": "app/users.py", "line": 11, "end_line": 12, "key": "SEC-2"},
        {"file": "app/admin.py", "line": 3, "end_line": None, "key": "SEC-3"}]
    assert by_key["F1"]["locations"] == [
        {"file": "app/views.py", "line": 10, "end_line": by_key["F1"]["end_line"], "key": ""}]


def test_a_finding_without_other_places_has_no_also_at():
    review = make_review([make_finding("F1", locations=[
        {"file": "app/views.py", "line": 10, "end_line": None, "key": "F1"}])])
    assert "Also at" not in to_markdown(review)
    assert "relatedLocations" not in to_sarif(review)["runs"][0]["results"][0]


# --------------------------------------------------------------------------- what ran, what shows

RAN = [{"id": "semgrep", "name": "semgrep", "version": "1.185.0", "imported": False},
       {"id": "oxlint", "name": "oxlint", "version": "1.89.0", "imported": False},
       {"id": "detect-secrets", "name": "detect-secrets", "version": "1.5.0",
        "imported": False},
       {"id": "secrets", "name": "Quorum's secret key formats", "version": "",
        "imported": False},
       {"id": "gitleaks", "name": "gitleaks", "version": "", "imported": True}]


def test_markdown_names_the_analyzers_that_ran_with_what_each_found():
    """An offline review of JavaScript: Semgrep, oxlint and the secrets scanners ran, ruff and
    bandit did not. The report names those that ran (from the review's analysis record) and
    how many of the exported findings each produced; it does not name ruff or bandit."""
    findings = [make_finding("F1", evidence=[{"tool": "semgrep", "rule": "js-sql-injection"}]),
                make_finding("F2", evidence=[{"tool": "semgrep", "rule": "js-html-injection"}]),
                make_finding("F3", evidence=[{"tool": "secrets", "rule": "stripe-key"},
                                             {"tool": "detect-secrets", "rule": "Stripe"}]),
                make_finding("F4", category="style", severity="low",
                             evidence=[{"tool": "oxlint", "rule": "eslint(no-var)"}])]
    md = to_markdown(make_review(findings, offline=True, analyzers=RAN))
    text = render_html(md)
    assert ("<li><strong>Analyzers that ran:</strong> semgrep 1.185.0 (2 findings), "
            "oxlint 1.89.0 (1 finding), detect-secrets 1.5.0 (1 finding), Quorum’s secret key "
            "formats (1 finding), gitleaks (imported SARIF; no finding)</li>") \
        in text.replace("&#8217;", "’").replace("'", "’")
    assert "ruff" not in md and "bandit" not in md
    assert "restated the results of the analyzers that ran" in md
    # Only what is exported counts: the accepted-only report of F4 alone.
    findings[3]["decision"] = "accepted"
    accepted = to_markdown(make_review(findings, offline=True, analyzers=RAN),
                           only_accepted=True)
    assert "semgrep 1.185.0 (no finding)" in accepted and "oxlint 1.89.0 (1 finding)" in accepted
    # A review recorded before the analyzers were: no list, and no made-up one.
    old = to_markdown(make_review(findings, offline=True))
    assert "Analyzers that ran" not in old and "ruff" not in old and "bandit" not in old
    none = to_markdown(make_review(findings, analyzers=[]))
    assert "- **Analyzers that ran:** none" in none


def test_json_lists_the_analyzers_that_ran():
    data = json.loads(to_json(make_review([], analyzers=RAN)))
    assert data["review"]["analyzers"] == [
        {"name": a["name"], "version": a["version"], "imported": a["imported"]} for a in RAN]


def test_an_accepted_only_export_leaves_out_notes_on_findings_it_does_not_show():
    findings = [make_finding("F1", decision="accepted"), make_finding("F2", decision="rejected"),
                make_finding("F3"), make_finding("F10", decision="accepted")]
    notes = ["security upgraded F2 to critical.", "style downgraded F10 to low.",
             "security upgraded F1 to high.", "security added F3: Problem F3",
             "The synthesizer grouped D1 with F1, but they are not on the same lines; kept "
             "apart.", "Incomplete review: the style reviewer did not finish."]
    review = make_review(findings, dropped=[make_finding("D1", drop_reason="dup")],
                         notes=notes)
    kept_notes = ["style downgraded F10 to low.", "security upgraded F1 to high.",
                  "Incomplete review: the style reviewer did not finish."]
    assert json.loads(to_json(review))["review"]["notes"] == notes
    assert json.loads(to_json(review, only_accepted=True))["review"]["notes"] == kept_notes
    full, accepted = to_markdown(review), to_markdown(review, only_accepted=True)
    assert all(n in full for n in notes)
    assert [n for n in notes if n in accepted] == kept_notes
