"""The review-quality benchmark's scoring (tests/benchmarks/review_quality.py) on hand-made
findings, and its command line's refusals (no review is run here)."""

import json

import pytest

from tests.benchmarks import bench_review_quality as bench
from tests.benchmarks import review_quality as rq


def exp(line, file="a.py", kind="sql_injection", sev="high", end=None):
    return {"file": file, "start": line, "end": end or line, "kind": kind,
            "severity_at_least": sev}


def rep(line, file="a.py", sev="high", end=None, status="kept", **more):
    return {"file": file, "line": line, "end_line": end, "severity": sev, "status": status,
            **more}


def case(expected=(), verdict_not="approve", clean=False, negatives=(), language="python"):
    return rq.Case(name="c", language=language, description="", diff_text="",
                   expected=list(expected), verdict_not=verdict_not, clean=clean,
                   negatives=list(negatives))


# --- distance and matching ----------------------------------------------------------------
@pytest.mark.parametrize(("reported", "expected", "want"), [
    ((10, 10), (10, 10), 0),
    ((12, 12), (10, 10), 2),
    ((13, 13), (10, 10), None),     # three lines away: no match
    ((7, 8), (10, 10), 2),
    ((5, 20), (10, 10), 0),         # a range that contains the line
    ((14, 15), (10, 12), 2),        # range to range
    ((8, 8), (10, 12), 2),
    ((7, 7), (10, 12), None),
])
def test_distance_within_two_lines(reported, expected, want):
    item = rq.reported_items([rep(reported[0], end=reported[1])])[0]
    assert rq.distance(item, exp(expected[0], end=expected[1])) == want


def test_distance_needs_same_file_and_a_line():
    assert rq.distance(rq.reported_items([rep(10, file="b.py")])[0], exp(10)) is None
    assert rq.distance(rq.reported_items([rep(None)])[0], exp(10)) is None


def test_each_expected_and_each_report_matched_at_most_once():
    items = rq.reported_items([rep(10), rep(10)])        # the same problem reported twice
    assert rq.match([exp(10)], items) == [(0, 0)]
    s = rq.score_case(case([exp(10)]), [rep(10), rep(10)], "request_changes")
    assert (s["tp"], s["fp"], s["fn"]) == (1, 1, 0)
    items = rq.reported_items([rep(10)])                 # one report, two expected nearby
    assert len(rq.match([exp(9), exp(11)], items)) == 1


def test_matching_is_maximal_not_greedy():
    # The report at 11 is near both; a greedy match giving it to line 10 would leave 12 out.
    items = rq.reported_items([rep(11), rep(9)])
    pairs = rq.match([exp(10), exp(13)], items)
    assert sorted(pairs) == [(0, 1), (1, 0)]


def test_the_nearer_expected_finding_keeps_a_contested_report():
    # Dockerfile-like: expected at 1 and 2, one report at 2: it is the one at line 2.
    items = rq.reported_items([rep(2, file="Dockerfile")])
    pairs = rq.match([exp(1, file="Dockerfile"), exp(2, file="Dockerfile")], items)
    assert pairs == [(1, 0)]


def test_only_kept_findings_of_low_or_above_count():
    findings = [rep(1, sev="info"), rep(2, sev="low"), rep(3, status="dropped"),
                rep(4, sev="bogus"), rep(5, sev="critical")]
    assert [i["start"] for i in rq.reported_items(findings)] == [2, 5]


def test_a_cluster_counts_once_per_distinct_location():
    f = rep(10, locations=[{"file": "a.py", "line": 10}, {"file": "b.py", "line": 3},
                           {"file": "b.py", "line": 3, "end_line": 3}, "junk"])
    items = rq.reported_items([f])
    assert [(i["file"], i["start"]) for i in items] == [("a.py", 10), ("b.py", 3)]
    s = rq.score_case(case([exp(10), exp(3, file="b.py"), exp(40)]), [f], "request_changes")
    assert (s["tp"], s["fp"], s["fn"]) == (2, 0, 1)


# --- metrics ------------------------------------------------------------------------------
def test_metrics_known_values():
    m = rq.metrics(tp=3, fp=1, fn=3)
    assert m["precision"] == pytest.approx(0.75)
    assert m["recall"] == pytest.approx(0.5)
    assert m["f1"] == pytest.approx(0.6)
    assert m["f05"] == pytest.approx(1.25 * 0.75 * 0.5 / (0.25 * 0.75 + 0.5))


def test_nothing_expected_and_nothing_reported_is_na_not_perfect():
    m = rq.metrics(0, 0, 0)
    assert m["precision"] is None and m["recall"] is None
    assert m["f1"] is None and m["f05"] is None
    assert rq.fmt(m["precision"]) == "n/a"


def test_only_false_positives_gives_zero_precision_and_na_recall():
    m = rq.metrics(0, 2, 0)
    assert m["precision"] == 0.0 and m["recall"] is None and m["f1"] is None


def test_no_hit_at_all_gives_zero_f_scores():
    m = rq.metrics(0, 2, 3)
    assert (m["precision"], m["recall"], m["f1"], m["f05"]) == (0.0, 0.0, 0.0, 0.0)


def test_only_misses_gives_na_precision():
    m = rq.metrics(0, 0, 4)
    assert m["precision"] is None and m["recall"] == 0.0 and m["f1"] is None
    assert rq.fmt(0.456) == "0.46"


# --- verdicts, severity, negatives --------------------------------------------------------
@pytest.mark.parametrize(("verdict_not", "clean", "verdict", "want"), [
    ("approve", False, "request_changes", True),
    ("approve", False, "needs_discussion", True),
    ("approve", False, "approve", False),
    ("approve", False, None, False),          # no review at all is not a right verdict
    (None, True, "approve", True),
    (None, True, "needs_discussion", False),
    (None, False, "approve", None),            # no expectation
])
def test_verdict_ok(verdict_not, clean, verdict, want):
    assert rq.verdict_ok(case(verdict_not=verdict_not, clean=clean), verdict) is want


def test_score_case_counts_severity_negatives_and_blocking():
    c = case([exp(10, sev="high"), exp(20, sev="medium")],
             negatives=[{"file": "a.py", "start": 30, "end": 30}])
    s = rq.score_case(c, [rep(10, sev="medium"), rep(20, sev="critical"), rep(30, sev="low"),
                          rep(31, sev="low")], "request_changes")
    assert (s["tp"], s["fp"], s["fn"]) == (2, 2, 0)
    assert s["severity_ok"] == 1            # medium where high was expected does not count
    assert s["on_negatives"] == 1           # exactly on the negative's line, not ±2
    assert s["blocking"] == 2
    assert s["verdict_ok"] is True and s["expects"] == "not_approve"


def test_summarise_by_language_and_verdict_split():
    a = rq.score_case(case([exp(1)]), [rep(1)], "request_changes")
    b = rq.score_case(case(verdict_not=None, clean=True, language="go"), [], "needs_discussion")
    c = rq.score_case(case(verdict_not=None, language="go"), [rep(3)], "approve")
    langs = rq.by_language([a, b, c])
    assert list(langs) == ["go", "python"]
    assert (langs["go"]["tp"], langs["go"]["fp"], langs["go"]["fn"]) == (0, 1, 0)
    assert langs["go"]["verdicts_judged"] == 1 and langs["go"]["verdict_accuracy"] == 0.0
    total = rq.summarise([a, b, c])
    assert (total["flagged_not_approved"], total["flagged"]) == (1, 1)
    assert (total["clean_approved"], total["clean"]) == (0, 1)
    assert rq.summarise([c])["verdict_accuracy"] is None


# --- stages -------------------------------------------------------------------------------
@pytest.mark.parametrize(("reason", "stage"), [
    ("duplicate of SEC-1 “x” at a.py:3", "duplicates"),
    ("below the confidence threshold (0.20 < 0.50)", "confidence"),
    ("retracted by style: not a problem", "reflection"),
    ("names a file that is not part of this change", "file check"),
    ("memory #4: in tests/**, B101 is intended", "memories"),
    ("rejected by a person in review 3", "earlier rounds"),
    ("safeguard: the line does not contain a query", "safeguard"),
    ("Severity pass (rubric): info only", "severity pass"),
    ("", "other"),
    ("!!! something", "other"),
])
def test_stage_from_reason(reason, stage):
    assert rq.stage_from_reason(reason) == stage


def test_removed_by_prefers_the_quality_record():
    f = rep(3, status="dropped", drop_reason="duplicate of SEC-1",
            quality=[{"stage": "severity", "action": "correct"},
                     {"stage": "safeguard", "action": "discard", "reason": "wrong line"}])
    assert rq.removed_by(f) == "safeguard"
    assert rq.removed_by(rep(3, status="dropped", drop_reason="duplicate of SEC-1")) == \
        "duplicates"
    assert rq.removed_by(rep(3, quality=[{"stage": "safeguard", "action": "keep"}])) is None
    assert rq.removed_by(rep(3, status="dropped", quality="junk", drop_reason="")) == "other"


def test_stage_effects_right_wrong_and_redundant_removals():
    c = case([exp(10), exp(20)])
    findings = [
        rep(10),                                                       # found, kept
        rep(10, status="dropped", drop_reason="safeguard: duplicate"),  # redundant
        rep(20, status="dropped", drop_reason="safeguard: not real"),   # wrong: a true finding
        rep(50, status="dropped", drop_reason="safeguard: noise"),      # right
        rep(60, status="dropped", sev="info", drop_reason="safeguard: info"),  # not counted
        rep(70, status="dropped", drop_reason="below the confidence threshold (0.1 < 0.5)"),
        rep(80, quality=[{"stage": "severity", "action": "correct"}]),
    ]
    effects = rq.stage_effects(c, findings)
    assert set(effects) == {"safeguard", "confidence", "severity"}
    sg = effects["safeguard"]
    assert (sg["removed"], sg["right"], sg["wrong"], sg["redundant"]) == (3, 1, 1, 1)
    # had the safeguard kept them: 2 TP, FPs = kept 80 + redundant 10 + noise 50
    assert sg["without"] == {"tp": 2, "fp": 3, "fn": 0}
    assert effects["confidence"]["right"] == 1 and effects["severity"]["changed"] == 1
    assert effects["severity"]["removed"] == 0

    score = rq.score_case(c, findings, "request_changes")
    other = rq.score_case(case([exp(5)]), [rep(5)], "request_changes")
    total = rq.sum_stages([effects, {}], [score, other])
    assert total["safeguard"]["without"]["tp"] == 3       # 2 here + 1 in the untouched case
    assert total["safeguard"]["wrong"] == 1


def test_no_dropped_findings_no_stages():
    assert rq.stage_effects(case([exp(1)]), [rep(1)]) == {}
    assert rq.sum_stages([{}], [rq.score_case(case([exp(1)]), [rep(1)], None)]) == {}


# --- loading cases ------------------------------------------------------------------------
def write_case(folder, meta, diff="diff --git a/a.py b/a.py\n"):
    folder.mkdir(parents=True)
    (folder / "expected.json").write_text(json.dumps(meta))
    if diff is not None:
        (folder / "change.diff").write_text(diff)
    return folder


def test_load_case_reads_line_and_lines(tmp_path):
    folder = write_case(tmp_path / "one", {"language": "Go", "verdict_not": "approve",
                                           "expected": [{"file": "a.go", "line": 3},
                                                        {"file": "a.go", "lines": [5, 7],
                                                         "kind": "xss"}]})
    c = rq.load_case(folder)
    assert c.language == "go"
    assert [(e["start"], e["end"], e["kind"]) for e in c.expected] == [
        (3, 3, "unspecified"), (5, 7, "xss")]


@pytest.mark.parametrize(("meta", "diff", "message"), [
    ({"language": "go"}, None, "missing change.diff"),
    ({"expected": []}, "", "needs a 'language'"),
    ({"language": "go", "expected": [{"file": "a.go"}]}, "", "positive 'line'"),
    ({"language": "go", "expected": [{"file": "a.go", "line": 0}]}, "", "positive 'line'"),
    ({"language": "go", "expected": [{"file": "a.go", "line": True}]}, "", "positive 'line'"),
    ({"language": "go", "expected": [{"file": "a.go", "lines": [5, 2]}]}, "", "in order"),
    ({"language": "go", "expected": [{"line": 2}]}, "", "needs a 'file'"),
    ({"language": "go", "expected": [{"file": "a", "line": 2, "severity_at_least": "huge"}]},
     "", "unknown severity_at_least"),
    ({"language": "go", "verdict_not": "maybe"}, "", "unknown verdict_not"),
    ({"language": "go", "clean": True, "expected": [{"file": "a", "line": 1}]}, "",
     "clean case cannot"),
    ({"language": "go", "expected": "x"}, "", "must be a list"),
])
def test_load_case_refuses_bad_cases(tmp_path, meta, diff, message):
    folder = write_case(tmp_path / "bad", meta, diff)
    with pytest.raises(rq.CaseError, match=message):
        rq.load_case(folder)


def test_load_case_refuses_broken_json(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "expected.json").write_text("{nope")
    (folder / "change.diff").write_text("")
    with pytest.raises(rq.CaseError, match="unreadable"):
        rq.load_case(folder)


def test_load_cases_filters_and_refuses_empty_folders(tmp_path):
    with pytest.raises(rq.CaseError, match="is not a folder"):
        rq.load_cases(tmp_path / "missing")
    with pytest.raises(rq.CaseError, match="no case folders"):
        rq.load_cases(tmp_path)
    write_case(tmp_path / "b", {"language": "go"})
    write_case(tmp_path / "a", {"language": "shell"})
    assert [c.name for c in rq.load_cases(tmp_path)] == ["a", "b"]
    assert [c.name for c in rq.load_cases(tmp_path, language="Go")] == ["b"]


# --- the command line's refusals (before any review runs) ------------------------------------
@pytest.mark.parametrize("argv", [
    ["--cases", "/nonexistent/quorum-cases"],
    ["--language", "cobol"],
    ["--json", "/nonexistent/folder/out.json"],
    ["--json", "."],
    ["--json", ""],
    ["--model", ""],
    ["--model", "gpt\x00x"],
    ["--model", "gpt-4o", "--offline-only"],
])
def test_bad_options_exit_2_with_one_line(argv, capsys):
    assert bench.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("bench_review_quality: error: ")
    assert "Traceback" not in err


def test_unknown_option_exits_2_with_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments: --bogus" in err


def test_a_broken_case_folder_is_refused_in_one_line(tmp_path, capsys):
    write_case(tmp_path / "x", {"language": "go", "expected": [{"file": "a", "line": -1}]})
    assert bench.main(["--cases", str(tmp_path)]) == 2
    assert "case x, expected[0]" in capsys.readouterr().err


# --- the printed report, from made-up review outcomes ---------------------------------------
def test_report_prints_languages_stages_and_kinds(capsys):
    flagged = case([exp(10), exp(20, kind="xss")], language="typescript")
    clean = case(verdict_not=None, clean=True, language="go")
    outcomes = [
        {"findings": [rep(10), rep(20, status="dropped", drop_reason="safeguard: unsure",
                                    quality=[{"stage": "safeguard", "action": "discard"}])],
         "verdict": "request_changes", "error": "", "unexamined": 0, "seconds": 1.0,
         "cost_usd": 0.0},
        {"findings": [], "verdict": None, "error": "the review ended as failed: boom",
         "unexamined": 1, "seconds": 0.5, "cost_usd": 0.0},
    ]
    res = bench.evaluate([flagged, clean], outcomes)
    assert res["kinds"] == {"sql_injection": (1, 1), "xss": (0, 1)}
    assert res["stages"]["safeguard"]["wrong"] == 1
    assert res["stages"]["safeguard"]["without"]["recall"] == 1.0
    bench.print_run("model", {"security": "gpt-x"}, res, details=True)
    out = capsys.readouterr().out
    assert "| typescript | 1 | 1 | 0 | 1 | 1.00 | 0.50 | 0.67 | 0.83 | 1/1 | 1/1 | n/a |" in out
    assert "| go | 1 | 0 | 0 | 0 | n/a | n/a | n/a | n/a | 0/1 | n/a | 0/1 |" in out
    assert "| safeguard | 1 | 0 | 1 | 0 | 0 | 1.00 | 1.00 | 1.00 | 1.00 |" in out
    assert "none (the review ended as failed: boom)" in out
    assert "missed xss at a.py:20" in out
    assert "sql_injection 1/1, xss 0/1" in out


# --- one case through the real pipeline (the offline model) -----------------------------------
@pytest.mark.django_db(transaction=True)
def test_review_case_runs_the_pipeline_to_the_triage_gate(alice):
    from reviews_app import services

    folder = bench.DEFAULT_CASES / "python_sql_shell"
    one = rq.load_case(folder)
    offline = dict.fromkeys(services.ROLES, "offline/default")
    outcome = bench.review_case(alice, one, offline)
    assert outcome["error"] == ""
    assert outcome["verdict"] in rq.VERDICTS
    assert "ruff" in outcome["tools"]
    assert all(f["file"] == "app/reports.py" for f in outcome["findings"])
    score = rq.score_case(one, outcome["findings"], outcome["verdict"])
    assert score["tp"] + score["fn"] == len(one.expected)


@pytest.mark.django_db(transaction=True)
def test_review_case_reports_a_refused_input(alice):
    broken = rq.Case(name="broken", language="python", description="x",
                     diff_text="not a diff at all\n", expected=[])
    outcome = bench.review_case(alice, broken, {})
    assert outcome["verdict"] is None and outcome["findings"] == []
    assert outcome["error"]


def test_dropped_findings_kept_apart_by_a_stage_are_read_too():
    state = {"findings": [rep(1, key="SEC-1"), "junk"],
             "dropped": [rep(2, key="SEC-1", status="dropped"),   # already listed
                         {"key": "SEC-2", "file": "a.py", "line": 3, "severity": "high"},
                         None]}
    got = bench._all_findings(state)
    assert [(f["key"], f["status"]) for f in got] == [("SEC-1", "kept"), ("SEC-2", "dropped")]
    assert bench._all_findings({}) == []


# --- per class, with the OWASP Benchmark score (issue 36) -----------------------------------
def test_per_class_scores_and_tpr_minus_fpr():
    neg = {"file": "a.py", "start": 30, "end": 30, "kind": "path_traversal", "why": "basename"}
    neg2 = {"file": "a.py", "start": 40, "end": 40, "kind": "path_traversal", "why": "allow"}
    c = case([exp(10, kind="path_traversal"), exp(20, kind="ssrf")], negatives=[neg, neg2])
    found = [rep(10, rules=["py-taint-path-traversal"]),      # TP path_traversal
             rep(30, rules=["py-taint-path-traversal"]),      # FP on a negative
             rep(50, title="py-taint-xss: HTML"),             # FP of the kind its rule names
             rep(60, rules=["B999"])]                         # FP of no known kind
    s = rq.score_case(c, found, "request_changes")
    assert s["negative_hits"] == [{"kind": "path_traversal", "flagged": True},
                                  {"kind": "path_traversal", "flagged": False}]
    assert sorted(s["fp_kinds"]) == ["other", "path_traversal", "xss"]
    classes = rq.by_class([s])
    pt = classes["path_traversal"]
    assert (pt["tp"], pt["fp"], pt["fn"]) == (1, 1, 0)
    assert (pt["precision"], pt["recall"], pt["tpr"], pt["fpr"]) == (0.5, 1.0, 1.0, 0.5)
    assert pt["owasp"] == 0.5
    assert classes["ssrf"]["recall"] == 0.0 and classes["ssrf"]["owasp"] is None  # no negatives
    assert classes["xss"]["precision"] == 0.0 and classes["xss"]["recall"] is None
    assert rq.kind_of_finding({"rules": ["rb-sql-injection"]}) == "sql_injection"
    assert rq.kind_of_finding({"title": "js-taint-open-redirect: x"}) == "open_redirect"
    assert rq.kind_of_finding({"rules": ["B602"]}) == "command_injection"
    assert rq.kind_of_finding({"rules": ["py-insecure-cookie"]}) == "insecure_cookie"
    assert rq.kind_of_finding({"rules": ["key-duplicates"]}) == "bug"
    assert rq.kind_of_finding({"title": "template-injection: x"}) == "script_injection"
    assert rq.kind_of_finding({"rules": ["tf-open-admin-port"]}) == "open_port"
    assert rq.kind_of_finding({"rules": ["tf-public-database"]}) == "public_database"
    assert rq.kind_of_finding({"rules": ["k8s-host-path"]}) == "host_path"
    assert rq.kind_of_finding({"rules": ["gha-curl-pipe-shell"]}) == "insecure_download"
    assert rq.kind_of_finding({"rules": ["k8s-hardcoded-secret-env"]}) == "hardcoded_secret"
    assert rq.kind_of_finding({"rules": ["sql-dynamic-sql-injection"]}) == "sql_injection"
    assert rq.kind_of_finding({"rules": ["php-trust-boundary"]}) == "trust_boundary"
    res = bench.evaluate([c], [{"findings": found, "verdict": "request_changes", "error": "",
                                "unexamined": 0, "seconds": 1.0, "cost_usd": 0.0}])
    assert res["classes"]["path_traversal"]["owasp"] == 0.5
