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
    "suggestion", "confidence", "reviewers", "evidence", "decision", "decided_by", "comment",
}
REVIEW_KEYS = {
    "id", "title", "tool_version", "source", "created_at", "status", "offline", "verdict",
    "triage", "summary",
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
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator.iter_errors(log)]
    assert errors == []


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

    rules = log["runs"][0]["tool"]["driver"]["rules"]
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["ruleId"] == f"quorum/{result['properties']['category']}"

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
                                              "version", "override_reason"}
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
        expected = {k: finding[k] for k in FINDING_KEYS}
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


FENCE = re.compile(r"^(`{3,})text\n(.*?)\n\1$", re.MULTILINE | re.DOTALL)


def test_markdown_raw_output_has_no_html_or_javascript_links():
    md = to_markdown(hostile_review())
    # The multi-line suggestion is verbatim inside its fence (code is never interpreted);
    # everything else must be free of raw tags and links.
    fences = FENCE.findall(md)
    assert [body for _, body in fences] == [SUGGESTION]
    md = FENCE.sub("", md)
    assert "alert" in md  # the hostile text is there, only escaped
    assert not re.search(r"<\s*(script|img)", md, re.IGNORECASE)
    assert not re.search(r"\]\(\s*<?\s*javascript:", md, re.IGNORECASE)
    assert not re.search(r"<javascript:", md, re.IGNORECASE)


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
    # Code only in the one fenced suggestion block; no inline code, no indented code.
    assert lowered.count("<code") == lowered.count("<pre><code") == 1
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
    assert "src/security/m1\\.py:3–5" in md  # F1: line 3, end line 5

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
