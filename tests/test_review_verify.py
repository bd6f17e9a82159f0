"""The verify stage (seed 003's quality stages) with scripted fakes: the safeguard keeps,
corrects or discards each finding with a reason, severity follows the written rubric, every
finding gets a kind, repeats are clustered into one finding with every location, and the
offline stand-in is deterministic. No Django, no analyzers (the end-to-end offline case
runs ruff and bandit like test_review_dedup)."""

from __future__ import annotations

import threading
import time
import typing

from agents_app.llm import offline as offline_model
from agents_app.patterns.testing import FunctionModel
from reviews_app.pipeline import offline_review
from reviews_app.pipeline.quality import cluster, prompt, rubric, summary
from reviews_app.pipeline.schema import KINDS
from tests.test_review_dedup import offline_review_of, python_file
from tests.test_review_pipeline import (
    LOOP,
    SQLI,
    Script,
    file_dict,
    finding,
    new_state,
    run_to_gate,
)

STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"


def checks(*items):
    return {"checks": list(items)}


def trail(f, stage=None):
    return [q for q in f.get("quality") or [] if stage is None or q["stage"] == stage]


def by_key(result):
    return {f["key"]: f for f in result.state["findings"]}


def review(verify, found=None, **options):
    model = FunctionModel(Script(found=found or {"security": {"findings": [SQLI]},
                                                 "style": {"findings": [LOOP]}},
                                 verify=verify))
    result, events = run_to_gate(model, **options)
    return result, events, model


# --- safeguard: keep / correct / discard -----------------------------------------------------------
def test_keep_leaves_the_finding_as_it_was_and_says_why():
    result, events, model = review(checks(
        {"key": "SEC-1", "verdict": "keep", "reason": "uid is formatted into the SQL"},
        {"key": "STY-1", "verdict": "keep", "reason": "a manual sum"}))
    f = by_key(result)
    assert f["SEC-1"]["status"] == "kept" and f["SEC-1"]["line"] == 4
    assert f["SEC-1"]["title"] == SQLI["title"]
    assert trail(f["SEC-1"], "safeguard") == [{"stage": "safeguard", "action": "keep",
                                               "reason": "uid is formatted into the SQL"}]
    # One verifier call for the one file, with the code at the finding's line in the prompt.
    [call] = [c for c in model.history if c.role == "verifier"]
    assert call.key == "verify:0" and "db.execute(" in call.prompt
    assert '"line_exists": true' in call.prompt
    done = next(e for e in events if e.kind == "verify_done")
    assert done.message.startswith("Safeguard: 2 kept, 0 corrected, 0 discarded")


def test_correct_applies_line_title_and_description_and_records_what_they_were():
    result, _, _ = review(checks(
        {"key": "SEC-1", "verdict": "correct", "reason": "the query is built on line 4 only",
         "line": 4, "end_line": 4, "title": "SQL built with % formatting",
         "description": "uid reaches the query unescaped."},
        {"key": "STY-1", "verdict": "correct", "reason": "the loop starts at line 8",
         "line": 8, "end_line": 9}))
    f = by_key(result)
    sec, sty = f["SEC-1"], f["STY-1"]
    assert sec["title"] == "SQL built with % formatting"
    assert sec["description"] == "uid reaches the query unescaped."
    [entry] = trail(sec, "safeguard")
    assert entry["action"] == "correct"
    assert entry["before"]["title"] == SQLI["title"] and "end_line" in entry["before"]
    assert entry["after"]["title"] == "SQL built with % formatting"
    assert (sty["line"], sty["end_line"]) == (8, 9)
    assert trail(sty, "safeguard")[0]["before"] == {"line": 7, "end_line": None}
    assert result.records[0].kept and {k["key"] for k in result.records[0].kept} == {"SEC-1",
                                                                                     "STY-1"}


def test_a_corrected_line_outside_the_file_is_ignored_and_noted():
    result, _, _ = review(checks(
        {"key": "SEC-1", "verdict": "correct", "reason": "moved", "line": 99},
        {"key": "STY-1", "verdict": "correct", "reason": "range", "line": 8, "end_line": 400}))
    f = by_key(result)
    assert f["SEC-1"]["line"] == 4 and f["STY-1"]["line"] == 7
    for key, where in (("SEC-1", "99"), ("STY-1", "8-400")):
        actions = [q["action"] for q in trail(f[key], "safeguard")]
        assert actions == ["keep", "ignored"]
        assert f"corrected line {where} is not a line of the new file" in \
            trail(f[key], "safeguard")[1]["reason"]
        assert f[key]["status"] == "kept"


def test_discard_drops_the_finding_with_the_safeguards_reason_and_it_stays_visible():
    result, _, _ = review(checks(
        {"key": "SEC-1", "verdict": "keep", "reason": "real"},
        {"key": "STY-1", "verdict": "discard", "reason": "sum() would hide the early return"}))
    [record] = result.records
    assert [f["key"] for f in record.kept] == ["SEC-1"]
    [gone] = record.dropped
    assert gone["key"] == "STY-1"
    assert gone["drop_reason"] == "Safeguard: sum() would hide the early return"
    assert trail(gone, "safeguard")[0]["action"] == "discard"


def test_one_bad_field_does_not_void_the_batch():
    result, _, _ = review(checks(
        {"key": "SEC-1", "verdict": "correct", "reason": "r", "line": 0, "title": "T" * 900},
        {"key": "STY-1", "verdict": "discard", "reason": "gone"}))
    f = by_key(result)
    assert f["SEC-1"]["line"] == 4 and f["SEC-1"]["title"] == "T" * 300
    assert f["STY-1"]["status"] == "dropped"


def test_a_committed_key_of_a_known_format_is_never_discarded():
    key = finding("security", "critical", 4, "Live GitHub token committed",
                  rules=["secret-github-token"])
    result, _, _ = review(checks({"key": "SEC-1", "verdict": "discard",
                                  "reason": "the comment says it is a test key"}),
                          found={"security": {"findings": [key]}})
    [f] = result.state["findings"]
    assert f["status"] == "kept"
    assert "never discarded" in trail(f, "safeguard")[0]["reason"]


def test_unknown_keys_are_ignored_and_unanswered_findings_stay_unchanged():
    result, _, _ = review(checks({"key": "NOPE-9", "verdict": "discard", "reason": "x"},
                                 {"key": "SEC-1", "verdict": "keep", "reason": "real"}))
    f = by_key(result)
    assert all(x["status"] == "kept" for x in f.values())
    assert trail(f["STY-1"], "safeguard")[0]["action"] == "unchecked"
    assert "no answer" in trail(f["STY-1"], "safeguard")[0]["reason"]


def test_a_failing_safeguard_call_keeps_every_finding_and_says_so():
    def broken(messages):
        raise RuntimeError("provider down")

    result, events, _ = review(broken)
    f = by_key(result)
    assert {k: v["status"] for k, v in f.items()} == {"SEC-1": "kept", "STY-1": "kept"}
    assert f["SEC-1"]["severity"] == "high" and f["SEC-1"]["line"] == 4
    for x in f.values():
        [entry] = trail(x, "safeguard")
        assert entry["action"] == "unchecked" and "provider down" in entry["reason"]
    failed = [e for e in events if e.kind == "verify_failed"]
    assert failed and "kept unchanged" in failed[0].message
    assert any("could not check 2 finding" in n for n in result.records[0].notes)
    assert result.records[0].verdict == "request_changes"


def test_a_timed_out_safeguard_call_keeps_its_findings():
    def slow(messages):
        time.sleep(1.5)
        return checks({"key": "SEC-1", "verdict": "discard", "reason": "too late"})

    result, events, _ = review(slow, reviewer_timeout=0.5)
    assert by_key(result)["SEC-1"]["status"] == "kept"
    assert any(e.kind == "verify_failed" and "timed out" in e.message for e in events)


def test_model_text_is_masked_for_secrets():
    result, _, _ = review(checks(
        {"key": "SEC-1", "verdict": "correct", "reason": f"key {STRIPE} is live",
         "title": f"Live key {STRIPE}"},
        {"key": "STY-1", "verdict": "discard", "reason": f"see {STRIPE}"}))
    text = repr(result.state["findings"])
    assert STRIPE not in text and "sk_live_" in text


# --- severity by the rubric, kinds --------------------------------------------------------------
def test_the_verifier_sets_severity_by_the_rubric_and_the_verdict_follows():
    result, _, _ = review(checks(
        {"key": "STY-1", "verdict": "keep", "reason": "nit", "severity": "info"}),
        found={"style": {"findings": [LOOP]}})
    [f] = result.state["findings"]
    assert f["severity"] == "info"
    [entry] = trail(f, "severity")
    assert entry["before"] == {"severity": "low"} and entry["after"] == {"severity": "info"}
    medium = dict(LOOP, category="architecture", severity="medium")
    result, _, _ = review(checks(
        {"key": "ARC-1", "verdict": "keep", "reason": "harmless", "severity": "low"}),
        found={"architecture": {"findings": [medium]}})
    assert result.records[0].rule_verdict == "approve"  # medium → low no longer blocks


def test_an_analyzer_backed_injection_is_never_rated_below_high():
    result, _, _ = review(checks(
        {"key": "SEC-1", "verdict": "keep", "reason": "internal tool", "severity": "low"}),
        found={"security": {"findings": [SQLI]}})
    [f] = result.state["findings"]
    assert f["severity"] == "high"
    steps = [(q["before"]["severity"], q["after"]["severity"]) for q in trail(f, "severity")]
    assert steps == [("high", "low"), ("low", "high")]
    assert "at least high" in trail(f, "severity")[1]["reason"]


def test_every_finding_gets_a_kind_and_the_verifier_may_change_it():
    untested = finding("architecture", "medium", 6, "No tests for total()",
                       file="tests/test_users.py")
    files = [file_dict(), file_dict("tests/test_users.py")]
    model = FunctionModel(Script(
        found={"security": {"findings": [SQLI]}, "style": {"findings": [LOOP]},
               "architecture": {"findings": [untested]}},
        verify=checks({"key": "STY-1", "verdict": "keep", "reason": "slow on big lists",
                       "kind": "performance"})))
    result, _ = run_to_gate(model, state=new_state(files))
    f = by_key(result)
    assert f["SEC-1"]["kind"] == "security" and f["ARC-1"]["kind"] == "tests"
    assert f["STY-1"]["kind"] == "performance"
    [entry] = trail(f["STY-1"], "category")
    assert entry["before"] == {"kind": "style"} and entry["after"] == {"kind": "performance"}
    assert set(typing.get_args(prompt.Kind)) == set(KINDS)


def test_default_kinds_from_rules_lens_title_and_path():
    cases = [({"rules": ["S608"], "category": "security"}, "security"),
             ({"rules": ["B608"], "category": "security"}, "security"),
             ({"rules": ["B006"], "category": "architecture"}, "bug"),
             ({"rules": ["PERF401"], "category": "style"}, "performance"),
             ({"rules": ["D103"], "category": "style"}, "documentation"),
             ({"rules": ["C901"], "category": "architecture"}, "maintainability"),
             ({"rules": ["E711"], "category": "style"}, "style"),
             ({"rules": ["secret-github-token"], "category": "security"}, "security"),
             ({"category": "architecture", "title": "Stale docstring"}, "documentation"),
             ({"category": "architecture", "title": "x", "file": "src/a.test.ts"}, "tests"),
             ({"category": "architecture", "title": "Coupled modules"}, "maintainability")]
    for f, kind in cases:
        assert rubric.default_kind(f) == kind, f


def test_the_rubric_names_every_severity_with_examples_and_is_in_the_prompt():
    assert [lvl[0] for lvl in rubric.RUBRIC_LEVELS] == ["critical", "high", "medium", "low",
                                                        "info"]
    assert all(len(lvl[2]) >= 2 for lvl in rubric.RUBRIC_LEVELS)
    system = prompt.system_prompt()
    assert rubric.RUBRIC in system and "documentation" in system


# --- batching ---------------------------------------------------------------------------------------
def test_one_verifier_call_per_file_batch_all_at_once():
    files = [file_dict(f"app/m{i}.py") for i in range(3)]
    found = {"security": {"findings": [dict(SQLI, file=f"app/m{i}.py") for i in range(3)]}}
    barrier = threading.Barrier(3, timeout=10)
    script = Script(found=found)

    def meeting(messages, info):
        if info.role == "verifier":
            barrier.wait()  # breaks unless the three calls run together
        return script(messages, info)

    model = FunctionModel(meeting)
    result, _ = run_to_gate(model, state=new_state(files, max_prompt_chars=100))
    assert not barrier.broken
    assert sorted(c.key for c in model.history if c.role == "verifier") == \
        ["verify:0", "verify:1", "verify:2"]
    assert result.gate is not None


def test_batches_cap_the_findings_per_call():
    items = [dict(SQLI, key=f"SEC-{i}", line=4) for i in range(prompt.MAX_PER_BATCH + 5)]
    parts = prompt.batches(items, [file_dict()], 60_000)
    assert [len(p[1]) for p in parts] == [prompt.MAX_PER_BATCH, 5]


# --- clustering -----------------------------------------------------------------------------------
def _repeat(i, file):
    return {"key": f"STY-{i}", "category": "style", "severity": "low", "file": file,
            "line": i, "end_line": None, "title": f"print() left in `f{i}`", "rules": [],
            "kind": "style", "confidence": 0.8, "reviewers": ["style"], "status": "kept",
            "drop_reason": "", "duplicate_of": ""}


def test_twelve_repeats_become_one_finding_with_twelve_locations():
    items = [_repeat(i, "app/a.py" if i <= 6 else "app/b.py") for i in range(1, 13)]
    other = dict(_repeat(20, "app/a.py"), title="Shadowed builtin `id`", key="STY-20")
    merged = cluster.cluster([*items, other])
    assert merged == 11
    [top] = [f for f in items if f["status"] == "kept"]
    assert top["key"] == "STY-1" and len(top["locations"]) == 12
    assert [(loc["file"], loc["line"]) for loc in top["locations"]][:2] == [("app/a.py", 1),
                                                                           ("app/a.py", 2)]
    assert {loc["file"] for loc in top["locations"]} == {"app/a.py", "app/b.py"}
    assert all(f["drop_reason"] == "Clustered into STY-1" for f in items[1:])
    assert trail(top, "cluster")[0]["after"] == {"locations": 12}
    assert other["status"] == "kept" and "locations" not in other


def test_same_rule_clusters_across_files_different_rules_or_secrets_do_not():
    a = dict(_repeat(1, "a.py"), rules=["S608"], title="SQL injection", category="security")
    b = dict(_repeat(5, "b.py"), rules=["S608"], title="query built from input",
             category="security", severity="high")
    c = dict(_repeat(9, "b.py"), rules=["S105"], title="SQL injection")
    k1 = dict(_repeat(2, "a.ts"), rules=["secret-github-token"], title="key")
    k2 = dict(_repeat(3, "b.sh"), rules=["secret-github-token"], title="key")
    cluster.cluster([a, b, c, k1, k2])
    assert b["status"] == "kept" and a["status"] == "dropped"  # the stronger one leads
    assert a["drop_reason"] == f"Clustered into {b['key']}"
    assert c["status"] == k1["status"] == k2["status"] == "kept"


def test_clustering_in_the_pipeline_and_its_summary_line():
    repeated = [finding("style", "low", n, f"Loop variable `x{n}` shadows", suggestion="rename")
                for n in (7, 8, 9)]
    result, _, _ = review(None, found={"style": {"findings": repeated}})
    [record] = result.records
    assert len(record.kept) == 1 and len(record.kept[0]["locations"]) == 3
    assert [f["drop_reason"] for f in record.dropped] == ["Clustered into STY-1"] * 2
    lines = summary.stage_lines(record.kept, record.dropped)
    assert "Clustering: 2 repeat(s) folded into 1 finding(s)" in lines
    assert lines[0] == "Safeguard: 0 kept, 0 corrected, 0 discarded, 3 unchecked"


# --- the offline stand-in -------------------------------------------------------------------------
def _offline_prompt(items):
    return prompt.messages("t", [file_dict()], items)


def test_offline_stand_in_is_registered_and_discards_only_lines_not_in_the_file():
    offline_review.register()
    handler = offline_model.HANDLERS["SafeguardAnswer"]
    known = prompt.new_lines(file_dict())
    items = [prompt.brief(dict(SQLI, key="SEC-1", severity="medium", kind="security"), known,
                          "x"),
             prompt.brief(dict(LOOP, key="STY-1", line=50, kind="style"), known, None),
             prompt.brief(dict(LOOP, key="STY-2", line=None, kind="style"), known, None)]
    answer = handler(_offline_prompt(items))
    prompt.SafeguardAnswer.model_validate(answer)
    got = {c["key"]: c for c in answer["checks"]}
    assert got["SEC-1"]["verdict"] == "keep" and got["SEC-1"]["severity"] == "high"
    assert got["STY-1"]["verdict"] == "discard" and "line 50" in got["STY-1"]["reason"]
    assert got["STY-2"]["verdict"] == "keep"
    assert handler(_offline_prompt(items)) == answer  # deterministic


def test_offline_review_keeps_real_problems_on_added_lines():
    code = ("import subprocess\n\n\ndef run(cmd, uid):\n"
            "    subprocess.call(\"grep %s /etc/passwd\" % uid, shell=True)\n"
            "    return eval(cmd)\n")
    rec, state = offline_review_of([python_file("app/run.py", code)])
    kept = {tuple(f["rules"]): f for f in rec.kept}
    security = [f for f in rec.kept if f["kind"] == "security"]
    assert {5, 6} <= {f["line"] for f in security}
    assert all(f["severity"] in ("critical", "high") for f in security if f["line"] in (5, 6))
    assert not [f for f in rec.dropped if f["drop_reason"].startswith("Safeguard")]
    assert rec.verdict == "request_changes"
    assert all(trail(f, "safeguard")[0]["action"] == "keep" for f in kept.values())
    assert state["verify"]["calls"] == 1
