"""Change-level checks beside the reviewers (pattern/checks.py): the cross-file analysis and
the review-rules guardian, with scripted fakes and with the built-in offline model. No
Django, no network."""

from __future__ import annotations

import time

import pytest

from agents_app.llm import offline
from agents_app.patterns.base import ModelError
from agents_app.patterns.testing import FunctionModel
from reviews_app.pipeline import changeset, offline_review, synthesis
from reviews_app.pipeline.pattern import checks
from reviews_app.rules import check as rulecheck
from tests.test_review_pipeline import APP, SQLI, P, Script, file_dict, new_state, run_to_gate

OFFLINE_ROLES = ["security", "architecture", "style", "checker"]


def offline_model() -> FunctionModel:
    offline_review.register()
    return FunctionModel(lambda messages, info: offline.reply(
        info.role, info.schema.__name__ if info.schema else None, messages))


def code(n_funcs: int, prefix: str = "f", body: int = 5) -> list[str]:
    lines = []
    for i in range(n_funcs):
        lines += [f"def {prefix}{i}(items, limit):", f'    """Step {i} of the batch."""']
        lines += [f"    value_{j} = compute_{prefix}(items, {i}, {j}, limit)" for j in range(body)]
        lines += [f"    return value_{body - 1}", ""]
    return lines


def modified(path: str, added: list[str], *, removed=(), content=None) -> dict:
    f = file_dict(path, added, content=content)
    f["status"] = "modified"
    f["hunks"][0]["lines"] = ([{"kind": "del", "old": i, "new": None, "text": t}
                               for i, t in enumerate(removed, 1)] + f["hunks"][0]["lines"])
    return f


def kept_of(result, reviewer):
    return [f for f in result.records[0].kept if f["reviewer"] == reviewer]


def texts(result) -> str:
    return "\n".join(result.state["result"]["notes"])


# --- cross-file, with a model ----------------------------------------------------------------
def test_a_cross_file_finding_points_at_several_places():
    a = file_dict("app/orders.py", code(2, "order"))
    b = file_dict("app/invoices.py", code(2, "invoice"))
    answer = {"findings": [{
        "kind": "Bug", "severity": "medium", "file": "app/orders.py", "line": 3,
        "locations": [{"file": "app/invoices.py", "line": 5},
                      {"file": "app/orders.py", "line": 3},  # the main place again
                      {"file": "lib/elsewhere.py", "line": 1}],  # not in the change
        "title": "Orders raise on a bad total, invoices return None",
        "description": "Two files handle the same failure differently.",
        "suggestion": "Raise ValueError in both.", "confidence": 0.8}]}
    model = FunctionModel(Script(check={"crossfile": answer}))
    result, events = run_to_gate(model, new_state([a, b]))
    [xf] = kept_of(result, "cross-file")
    assert xf["key"] == "XF-1" and xf["category"] == "architecture" and xf["kind"] == "bug"
    assert xf["locations"] == [{"file": "app/invoices.py", "line": 5, "end_line": None}]
    assert result.records[0].verdict == "needs_discussion"  # medium counts for the verdict
    [call] = [c for c in model.history if c.role == "checker"]
    assert call.key == "crossfile"
    assert "app/orders.py" in call.prompt and "app/invoices.py" in call.prompt
    assert any(e.kind == "check_done" and "1 change-level issue" in e.message for e in events)
    assert result.state["checks"]["crossfile"]["status"] == "ok"


def test_a_cross_file_finding_on_a_file_outside_the_change_is_dropped_with_a_reason():
    answer = {"findings": [{"severity": "low", "file": "lib/other.py", "line": 1,
                            "title": "Duplicate helper", "suggestion": "Share it.",
                            "confidence": 0.9}]}
    result, _ = run_to_gate(FunctionModel(Script(check={"crossfile": answer})))
    [dropped] = [f for f in result.records[0].dropped if f["reviewer"] == "cross-file"]
    assert dropped["drop_reason"] == "names a file that is not part of this change"


def test_the_cross_file_prompt_is_clipped_to_the_budget_but_lists_every_file():
    files = [file_dict(f"pkg/m{i}.py", code(3, f"m{i}")) for i in range(8)]
    model = FunctionModel(Script())
    P.run_stage("review", new_state(files, max_prompt_chars=2500), model)
    [call] = [c for c in model.history if c.role == "checker"]
    assert all(f"- pkg/m{i}.py" in call.prompt for i in range(8))
    assert "Left out for size" in call.prompt and len(call.prompt) < 2500 + 4000


# --- cross-file, offline stand-ins -------------------------------------------------------------
def test_offline_code_without_tests_is_one_low_tests_finding():
    a = file_dict("app/orders.py", code(3, "order"))
    b = file_dict("app/invoices.py", code(2, "invoice"))
    result, events = run_to_gate(offline_model(), new_state([a, b], offline_roles=OFFLINE_ROLES))
    [xf] = kept_of(result, "cross-file")
    assert (xf["kind"], xf["severity"], xf["file"]) == ("tests", "low", "app/orders.py")
    assert xf["locations"] == [{"file": "app/invoices.py", "line": 1, "end_line": None}]
    assert "no language model read" in xf["description"]
    assert synthesis.rule_verdict([xf]) == "approve"  # a low finding does not block
    assert synthesis.rule_verdict([xf], incomplete=True) == "needs_discussion"  # unless
    assert any("mechanical rules only" in e.message for e in events)


def test_offline_no_tests_finding_when_tests_change_or_only_config_and_docs_do():
    a = file_dict("app/orders.py", code(3, "order"))
    t = file_dict("tests/test_orders.py", ["def test_it():", "    assert True"])
    assert changeset.missing_tests([a, t]) == []
    docs = [file_dict("docs/guide.md", ["# Guide", *[f"Line {i}" for i in range(60)]]),
            file_dict("config/app.yaml", [f"key_{i}: {i}" for i in range(60)]),
            file_dict("app/settings_prod.py", code(4, "setting"))]
    assert changeset.observations(docs) == []


def test_offline_a_block_added_to_two_files_is_a_duplicated_implementation():
    block = ["def normalise(record):", "    name = record['name'].strip().lower()",
             "    email = record['email'].strip().lower()",
             "    phone = ''.join(c for c in record['phone'] if c.isdigit())",
             "", "    country = record.get('country') or 'unknown'",
             "    return {'name': name, 'email': email,", "            'phone': phone, "
             "'country': country}"]
    a = file_dict("app/users.py", ["import os", "", *block, "", "X = 1"])
    b = file_dict("app/customers.py", ["# customers", *block])
    result, _ = run_to_gate(offline_model(), new_state([a, b], offline_roles=OFFLINE_ROLES))
    [xf] = kept_of(result, "cross-file")
    assert xf["title"] == "Duplicated implementation across files" and xf["line"] == 3
    assert xf["locations"] == [{"file": "app/customers.py", "line": 2, "end_line": 9}]
    assert "app/customers.py:2" in xf["description"]


def test_offline_small_clean_changes_get_no_change_level_finding():
    small = [file_dict(), file_dict("web/app.ts", ["export const a = 1;", "const b = 2;"]),
             file_dict("README.md", ["# Users", "Look users up by id."])]
    for files in ([small[0]], small):
        result, _ = run_to_gate(offline_model(), new_state(files, offline_roles=OFFLINE_ROLES))
        assert not [f for f in result.records[0].kept + result.records[0].dropped
                    if f["reviewer"] in ("cross-file", "rules")]
        assert result.state["checks"]["crossfile"]["observations"] == 0
    # The same import lines in two files are not a duplicated implementation.
    imports = ["import os", "import re", "import sys", "import json", "import time",
               "import typing", "from pathlib import Path"]
    assert changeset.duplicates([file_dict("a/x.py", imports), file_dict("b/y.py", imports)]) == []


def test_offline_config_drift_needs_a_sibling_whose_whole_content_is_known():
    example = modified(".env.example", ["SENTRY_DSN=", "CACHE_URL=redis://"],
                       content="DEBUG=false\nSENTRY_DSN=\nCACHE_URL=redis://\n")
    prod = file_dict(".env.production", ["DEBUG=false", "CACHE_URL=redis://prod"])  # new file
    [drift] = changeset.config_drift([example, prod])
    assert drift["file"] == ".env.example" and "SENTRY_DSN" in drift["title"]
    assert "CACHE_URL" not in drift["title"]
    assert drift["locations"] == [{"file": ".env.production", "line": None, "end_line": None}]
    unknown = modified(".env.staging", ["DEBUG=true"])  # only its diff is known
    assert changeset.config_drift([example, unknown]) == []
    # A key only edited (removed and added again) is not new.
    edited = modified("config/app.dev.yaml", ["timeout: 5"], removed=["timeout: 3"])
    other = file_dict("config/app.prod.yaml", ["retries: 2"])
    assert changeset.config_drift([edited, other]) == []
    fresh = modified("config/app.dev.yaml", ["timeout: 5"])
    assert [d["file"] for d in changeset.config_drift([fresh, other])] == ["config/app.dev.yaml"]


# --- the guardian, with a model -----------------------------------------------------------------
DB_RULE = {"id": "rule:7", "title": "Queries go through db.query", "text":
           "Every SQL query goes through db.query(), never db.execute().",
           "path_glob": "app/**", "severity": "high", "source": "manual"}
TOML_RULE = {"text": "No print calls. Use logging.", "scope": "path", "path_glob": "**/*.py",
             "severity": "low"}


def test_the_guardian_reports_violations_that_name_the_rule():
    violation = {"findings": [
        {"rule": "rule:7", "file": "app/users.py", "line": 4, "title": "db.execute used",
         "description": "Line 4 calls db.execute.", "suggestion": "db.query(sql, (uid,))",
         "confidence": 0.9},
        {"rule": "rule:99", "file": "app/users.py", "line": 4, "title": "Unknown rule"},
        {"rule": "rule:7", "file": "web/app.ts", "line": 1, "title": "Not covered",
         "suggestion": "x"}]}
    files = [file_dict(), file_dict("web/app.ts", ["export const a = 1;"])]
    model = FunctionModel(Script(check={"guardian": violation}))
    state = new_state(files, review_rules=[DB_RULE], rules=[TOML_RULE])
    result, events = run_to_gate(model, state)
    [rul] = kept_of(result, "rules")
    assert rul["key"] == "RUL-1" and rul["severity"] == "high"  # the rule's severity
    assert "Queries go through db.query" in rul["title"]
    assert rul["rule"] == {"id": "rule:7", "title": DB_RULE["title"], "text": DB_RULE["text"],
                           "source": "manual", "how": "model"}
    [dropped] = [f for f in result.records[0].dropped if f["reviewer"] == "rules"]
    assert dropped["file"] == "web/app.ts" and "does not cover" in dropped["drop_reason"]
    assert result.records[0].verdict == "request_changes"
    [call] = [c for c in model.history if c.key == "guardian"]
    assert call.role == "checker" and "never db.execute()" in call.prompt
    assert "No print calls" in call.prompt and "### web/app.ts" not in call.prompt
    [ev] = [e for e in events if e.kind == "rules_checked"]
    assert "2 apply to this change, 2 checked" in ev.message and "1 broken" in ev.message
    assert "not checked" not in texts(result)


def test_with_a_model_a_pattern_rule_is_also_checked_by_its_pattern_deduped_by_line():
    rule = {**DB_RULE, "pattern": r"db\.execute\("}
    lines = [*APP[:4], "    db.execute('select 1')"]
    model = FunctionModel(Script(check={"guardian": {"findings": [
        {"rule": "rule:7", "file": "app/users.py", "line": 4, "title": "Raw execute",
         "suggestion": "Use db.query.", "confidence": 0.8}]}}))
    result, _ = run_to_gate(model, new_state([file_dict(lines=lines)], review_rules=[rule]))
    found = sorted(kept_of(result, "rules"), key=lambda f: f["line"])
    assert [(f["line"], f["rule"]["how"]) for f in found] == [(4, "model"), (5, "pattern")]
    assert found[1]["locations"] == [] and "matches the rule's pattern" in found[1]["description"]


# --- the guardian, offline ------------------------------------------------------------------------
def test_offline_a_pattern_rule_is_checked_and_a_plain_rule_is_said_not_checked():
    rule = {**DB_RULE, "pattern": r"db\.execute\(", "severity": "medium"}
    lines = [*APP, "    db.execute('delete from t')"]
    state = new_state([file_dict(lines=lines)], review_rules=[rule], rules=[TOML_RULE],
                      offline_roles=OFFLINE_ROLES)
    result, events = run_to_gate(offline_model(), state)
    [rul] = kept_of(result, "rules")
    assert (rul["line"], rul["rule"]["how"], rul["severity"]) == (4, "pattern", "medium")
    assert rul["locations"] == [{"file": "app/users.py", "line": 11, "end_line": None}]
    notes = texts(result)
    assert ("Review rule \u201cNo print calls.\u201d (.quorum.toml rule 1) was not checked: "
            "the offline model reads no code.") in notes
    assert "rule #7" not in notes  # it was checked, by its pattern
    [ev] = [e for e in events if e.kind == "rules_checked"]
    assert "2 apply to this change, 1 checked (1 by their pattern), 1 broken" in ev.message
    assert "1 not checked (the offline model reads no code)" in ev.message
    info = result.state["checks"]["rules"]
    assert info["violated"] == ["rule:7"] and info["not_checked"] == [
        {"id": "toml:1", "reason": "the offline model reads no code"}]


def test_a_bad_pattern_or_one_re2_cannot_run_is_not_used_and_says_so():
    rules = [{**DB_RULE, "id": "rule:1", "title": "Broken", "pattern": "db.execute("},
             {**DB_RULE, "id": "rule:2", "title": "Backref", "pattern": r"(a)\1"}]
    state = new_state(review_rules=rules, offline_roles=OFFLINE_ROLES)
    result, _ = run_to_gate(offline_model(), state)
    notes = texts(result)
    assert "\u201cBroken\u201d (rule #1): its pattern was not used, as it is not a valid " \
           "regular expression" in notes
    # a stored rule saved before RE2 (a backreference) is reported, never run with Python's re
    assert "\u201cBackref\u201d (rule #2): its pattern was not used, as it refers back to a " \
           "group" in notes
    assert "\u201cBroken\u201d (rule #1) was not checked: the offline model reads no code." \
        in notes
    assert not kept_of(result, "rules")


@pytest.mark.parametrize("pattern, problem", [
    ("", "is empty"), ("x" * 301, "longer than 300"), ("a\x00b", "NUL"),
    ("[", "not a valid regular expression"), (r"(a)\1", "refers back to a group"),
    (r"foo(?=bar)", "lookahead"), (r"(?<!x)y", "negative lookbehind"),
    (r"a++", "possessive quantifier"), (r"(?P<n>a)(?P=n)", "named backreferences"),
])
def test_patterns_re2_cannot_run_are_refused(pattern, problem):
    compiled, why = rulecheck.compile_pattern(pattern)
    assert compiled is None and problem in why


@pytest.mark.parametrize("pattern", [r"console\.log\(", r"(\d{1,3}\.){3}\d{1,3}",
                                     r"\bprint\(", r"eval\s*\(.*\)", r"(?i)todo|fixme",
                                     # shapes a backtracking engine hangs on: RE2 runs them
                                     r"(\w+\s?)+$", "(a|ab)*c", r".*a.*b.*c", "(a?){40}a{40}"])
def test_ordinary_patterns_are_used(pattern):
    compiled, why = rulecheck.compile_pattern(pattern)
    assert compiled is not None and why == ""


BACKTRACKING = "(a?){40}a{40}"  # hours with a backtracking engine on a line of 40 a's


def test_a_rule_of_the_backtracking_shape_runs_at_once_and_finds_its_line():
    rule = {**DB_RULE, "pattern": BACKTRACKING, "severity": "medium"}
    lines = [*APP, "    x = '" + "a" * 40 + "'", "    y = '" + "a" * 39 + "'"]
    state = new_state([file_dict(lines=lines)], review_rules=[rule],
                      offline_roles=OFFLINE_ROLES)
    result, _ = run_to_gate(offline_model(), state)
    [rul] = kept_of(result, "rules")
    assert (rul["line"], rul["rule"]["how"]) == (len(APP) + 1, "pattern")
    assert rul["locations"] == []  # 39 a's do not match
    assert result.state["checks"]["rules"]["by_pattern"] == ["rule:7"]
    assert "time limit" not in " ".join(texts(result))


def test_pattern_checks_stop_at_the_time_budget_and_lines_are_capped():
    compiled, _ = rulecheck.compile_pattern(r"needle")
    f = file_dict(lines=["x" * 5000 + "needle", "needle"])
    hits, complete = rulecheck.pattern_hits(compiled, [f], ["app/users.py"], rulecheck.Budget())
    assert hits == {"app/users.py": [2]} and complete  # the long line is read up to 300 chars
    hits, complete = rulecheck.pattern_hits(compiled, [f], ["app/users.py"],
                                            rulecheck.Budget(0.0))
    assert hits == {} and not complete
    slow, _ = rulecheck.compile_pattern(r".*.*x")
    t0 = time.monotonic()
    rulecheck.pattern_hits(slow, [file_dict(lines=["a" * 5000] * 200)], ["app/users.py"],
                           rulecheck.Budget(0.5))
    assert time.monotonic() - t0 < 3


def test_rules_whose_glob_matches_no_file_are_skipped_silently():
    model = FunctionModel(Script())
    rules = [{**DB_RULE, "path_glob": "web/**", "pattern": "x"}]
    result, events = run_to_gate(model, new_state(review_rules=rules,
                                                  rules=[{**TOML_RULE, "path_glob": "*.go"}]))
    assert "guardian" not in [c.key for c in model.history]
    assert not [e for e in events if e.kind == "rules_checked"]
    assert "rule" not in texts(result).lower()
    assert "rules" not in result.state["checks"]


# --- failures -------------------------------------------------------------------------------------
def test_a_failing_checker_never_fails_the_review_and_claims_nothing():
    def down(messages):
        raise ModelError("provider returned 500 twice")

    model = FunctionModel(Script(found={"security": {"findings": [SQLI]}},
                                 check={"crossfile": down, "guardian": down}))
    state = new_state(review_rules=[{**DB_RULE, "pattern": r"db\.execute\("}],
                      rules=[TOML_RULE])
    result, events = run_to_gate(model, state)
    assert result.gate is not None and result.records[0].verdict == "request_changes"
    failed = [e.message for e in events if e.kind == "check_failed"]
    assert any(m.startswith("cross-file check failed: provider returned 500") for m in failed)
    assert any(m.startswith("rules check failed: provider returned 500") for m in failed)
    notes = texts(result)
    assert "The cross-file check failed (provider returned 500 twice)" in notes
    assert ("\u201cNo print calls.\u201d (.quorum.toml rule 1) was not checked: the checker "
            "failed (provider returned 500 twice).") in notes
    assert "rule #7" not in notes  # its pattern still checked it
    assert [f["rule"]["how"] for f in kept_of(result, "rules")] == ["pattern"]
    assert result.state["reviewers"]["security"]["status"] == "ok"
    assert "checker" not in result.state["reviewers"]


def test_a_checker_answer_that_does_not_fit_the_schema_is_a_failed_check():
    model = FunctionModel(Script(check={"crossfile": "Looks fine to me!"}))
    result, events = run_to_gate(model)
    assert result.gate is not None
    assert any(e.kind == "check_failed" and "CrossFileAnswer" in e.message for e in events)
    assert result.state["checks"]["crossfile"]["status"] == "failed"


def test_jobs_add_no_call_for_a_change_without_added_lines():
    f = file_dict(lines=[])
    f["hunks"] = []
    assert checks.jobs(new_state([f]), FunctionModel(Script())) == {}
