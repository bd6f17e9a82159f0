"""The code-review pattern with scripted fakes: no Django, no network, no analyzers (the
files here are reviewed from the ``review`` stage on; the analyzers have their own tests)."""

from __future__ import annotations

import json
import threading

import pytest

from agents_app.patterns.base import Decision, InvalidDecision, ModelError
from agents_app.patterns.testing import FunctionModel, QueueModel
from reviews_app.pipeline import synthesis
from reviews_app.pipeline.pattern import TRIAGE_GATE, CodeReview
from reviews_app.pipeline.pattern.helpers import batches

P = CodeReview()

APP = ["import sqlite3", "", "def find(db, uid):",
       "    return db.execute(\"select * from users where id = %s\" % uid)", "",
       "def total(xs):", "    t = 0", "    for x in xs:", "        t = t + x", "    return t"]


def file_dict(path="app/users.py", lines=APP, content=None):
    return {"path": path, "old_path": None, "status": "added", "language": "Python",
            "lexer": "python", "is_python": True,
            "hunks": [{"header": f"@@ -0,0 +1,{len(lines)} @@", "lines": [
                {"kind": "add", "old": None, "new": i, "text": t}
                for i, t in enumerate(lines, 1)]}],
            "added": len(lines), "removed": 0, "content": content,
            "mode": "heavy" if content else "light", "clipped": False,
            "no_newline_at_end": False}


def new_state(files=None, **options):
    files = files or [file_dict()]
    return P.initial_state("Add user lookup", {
        "input": {"label": "Add user lookup", "files": files, "coverage": [],
                  "total_files": len(files)},
        **options})


def finding(category, severity, line, title, *, file="app/users.py", confidence=0.9,
            suggestion="Use a parameterised query: db.execute(sql, (uid,))", **extra):
    return {"category": category, "severity": severity, "file": file, "line": line,
            "title": title, "description": f"{title} (details)", "suggestion": suggestion,
            "confidence": confidence, **extra}


def reviewer_of(messages) -> str:
    return messages[-1]["content"].split("## Reviewer\n", 1)[1].split("\n", 1)[0]


def run_to_gate(model, state=None, **options):
    """Run review → reflect → synthesize; return the synthesize result (at the gate)."""
    state = state or new_state(**options)
    stage, result = "review", None
    events = []
    while stage != "close":
        result = P.run_stage(stage, state, model)
        events += result.events
        if result.outcome:
            return result, events
        state, stage = result.state, result.next_stage
    return result, events


class Script:
    """A function fake answering by role: reviewers from ``found``, reflections from
    ``amend``, the synthesizer from ``synth``. Anything callable is called with messages."""

    def __init__(self, found=None, amend=None, synth=None, verify=None, check=None):
        self.found = found or {}
        self.amend = amend or {}
        self.synth = synth or {"duplicates": [], "verdict": "approve", "summary": "Fine."}
        self.verify = verify  # the verifier's answer; none: every finding kept unchanged
        self.check = check or {}  # the checker's answers by call key: crossfile, guardian

    def __call__(self, messages, info):
        if info.role == "verifier":
            reply = self.verify or {"checks": []}
            return reply(messages) if callable(reply) else reply
        if info.role == "synthesizer":
            return self.synth(messages) if callable(self.synth) else self.synth
        if info.role == "checker":  # change-level checks: no findings unless scripted
            reply = self.check.get(info.key, {"findings": []})
            return reply(messages) if callable(reply) else reply
        who = reviewer_of(messages)
        if info.key and info.key.startswith("reflect:"):
            reply = self.amend.get(who, {"amendments": []})
        else:
            reply = self.found.get(who, {"findings": []})
        return reply(messages) if callable(reply) else reply


SQLI = finding("security", "high", 4, "SQL injection through string formatting", rules=["S608"])
SQLI_ARCH = finding("architecture", "medium", 4, "SQL built by string formatting",
                    confidence=0.7, rules=["S608"])
LOOP = finding("style", "low", 7, "Use sum() instead of a manual loop",
               suggestion="return sum(xs)")


def test_happy_path_reviewers_reflect_synthesize_and_wait_at_the_gate():
    model = FunctionModel(Script(found={"security": {"findings": [SQLI]},
                                        "style": {"findings": [LOOP]}},
                                 synth={"duplicates": [], "verdict": "request_changes",
                                        "summary": "Parameterise the query before merging."}))
    result, events = run_to_gate(model)
    assert result.gate is not None and result.gate.kind == TRIAGE_GATE
    assert result.next_stage == "close"
    roles = model.roles()
    # The cross-file checker runs in the reviewers' batch (no rules: no guardian call).
    assert sorted(roles[:4]) == ["architecture", "checker", "security", "style"]
    # Reflection: security and style each see the other's finding; architecture found
    # nothing, but it also reads its colleagues (its own list is empty).
    assert sorted(roles[4:7]) == ["architecture", "security", "style"]
    assert roles[7:] == ["verifier", "synthesizer"]  # one safeguard call: one file
    [record] = result.records
    assert [f["key"] for f in record.kept] == ["SEC-1", "STY-1"]  # strongest first
    assert record.verdict == "request_changes" and record.rule_verdict == "request_changes"
    assert record.summary == "Parameterise the query before merging."
    kinds = [e.kind for e in events]
    assert kinds.count("reviewer_done") == 3 and "review_synthesized" in kinds
    # The reviewer prompt carries the numbered change and the reviewer's name.
    sec_prompt = next(c for c in model.history if c.role == "security").prompt
    assert "db.execute(" in sec_prompt and "app/users.py" in sec_prompt


def test_decide_accept_and_close_completes_with_the_verdict():
    model = FunctionModel(Script(found={"security": {"findings": [SQLI]}},
                                 synth={"duplicates": [], "verdict": "request_changes",
                                        "summary": "s"}))
    result, _ = run_to_gate(model)
    decided = P.decide(TRIAGE_GATE, result.state, Decision("accept", author="alice"))
    assert decided.records[0].verdict == "request_changes" and decided.records[0].author == "alice"
    closed = P.run_stage("close", decided.state, model)
    assert closed.outcome == "completed"
    assert "request changes" in closed.answer and "alice" in closed.answer


def test_override_needs_a_different_verdict_and_a_reason():
    model = FunctionModel(Script(found={"style": {"findings": [LOOP]}}))
    result, _ = run_to_gate(model)
    state = result.state
    assert state["result"]["verdict"] == "approve"
    with pytest.raises(InvalidDecision, match="why"):
        P.decide(TRIAGE_GATE, state, Decision("override", edits={"verdict": "request_changes"}))
    with pytest.raises(InvalidDecision, match="already"):
        P.decide(TRIAGE_GATE, state, Decision("override", feedback="x",
                                              edits={"verdict": "approve"}))
    with pytest.raises(InvalidDecision, match="Choose"):
        P.decide(TRIAGE_GATE, state, Decision("override", feedback="x", edits={"verdict": "?"}))
    with pytest.raises(InvalidDecision):
        P.decide(TRIAGE_GATE, state, Decision("approve"))
    ok = P.decide(TRIAGE_GATE, state, Decision("override", feedback="Team policy",
                                               edits={"verdict": "needs_discussion"},
                                               author="bob"))
    rec = ok.records[0]
    assert (rec.action, rec.verdict, rec.reason) == ("override", "needs_discussion",
                                                     "Team policy")


def test_a_reviewer_that_raises_degrades_the_review_and_says_which():
    def boom(messages):
        raise ModelError("provider returned 500 twice")

    model = FunctionModel(Script(found={"architecture": boom, "security": {"findings": [SQLI]}}))
    result, events = run_to_gate(model)
    assert result.gate is not None  # the review goes on
    reviewers = result.state["reviewers"]
    assert reviewers["architecture"]["status"] == "failed"
    assert "provider returned 500 twice" in reviewers["architecture"]["error"]
    assert reviewers["security"]["status"] == "ok"
    failed = [e for e in events if e.kind == "reviewer_failed"]
    assert len(failed) == 1 and "architecture" in failed[0].message
    assert "architecture" not in [c.role for c in model.history[3:]]  # not asked to reflect


def test_a_reviewer_that_times_out_is_reported_and_does_not_hold_the_others():
    release, finished = threading.Event(), threading.Event()

    def slow(messages):
        release.wait(10)
        finished.set()
        return {"findings": []}

    model = FunctionModel(Script(found={"style": slow, "security": {"findings": [SQLI]}}))
    state = new_state(reviewer_timeout=0.3)
    result = P.run_stage("review", state, model)
    assert not finished.is_set(), "the stage waited for the reviewer past its timeout"
    release.set()
    assert result.next_stage == "reflect"
    style = result.state["reviewers"]["style"]
    assert style["status"] == "timeout" and "no answer within" in style["error"]
    assert any(e.kind == "reviewer_failed" and "style" in e.message for e in result.events)


def test_a_reviewer_answering_invalid_json_fails_alone():
    model = FunctionModel(Script(found={"security": lambda m: "Sure! Here are my findings: none",
                                        "style": {"findings": [LOOP]}}))
    result = P.run_stage("review", new_state(), model)
    sec = result.state["reviewers"]["security"]
    assert sec["status"] == "failed" and "ReviewerFindings" in sec["error"]
    assert result.state["reviewers"]["style"]["status"] == "ok"


def test_no_reviewer_succeeding_fails_the_review_with_every_reason():
    def down(messages):
        raise ModelError("connection refused")

    model = FunctionModel(Script(found={"security": down, "architecture": down, "style": down}))
    result = P.run_stage("review", new_state(), model)
    assert result.outcome == "failed"
    for name in ("security", "architecture", "style"):
        assert f"{name}: connection refused" in result.error
    assert result.records[0].reviewers["style"]["status"] == "failed"


def test_reviewers_and_reflections_overlap_in_time():
    # Each phase's calls meet at a barrier, which breaks unless they run at once: four
    # latencies on the critical path (reviews with the cross-file check, reflections, the
    # safeguard's one call for this one-file change, synthesis), not nine.
    phases = {"review": threading.Barrier(4, timeout=10),
              "reflect": threading.Barrier(3, timeout=10)}
    calls: list[str] = []
    lock = threading.Lock()
    script = Script(found={"security": {"findings": [SQLI]}, "style": {"findings": [LOOP]},
                           "architecture": {"findings": [SQLI_ARCH]}})

    def meeting(messages, info):
        if info.role not in ("synthesizer", "verifier"):
            phases["reflect" if (info.key or "").startswith("reflect:") else "review"].wait()
        with lock:
            calls.append(f"{info.role}:{info.key}")
        return script(messages, info)

    model = FunctionModel(meeting)
    result, _ = run_to_gate(model)
    assert result.gate is not None
    assert len(calls) == 9  # 3 reviewers + cross-file check + 3 reflections + safeguard + synthesis
    assert "checker:crossfile" in calls[:4]
    assert calls[-2:] == ["verifier:verify:0", "synthesizer:synthesis"]
    assert not any(b.broken for b in phases.values())


def test_amendment_kinds_add_upgrade_downgrade_retract():
    extra = finding("architecture", "medium", 9, "Accumulator loop hides intent",
                    suggestion="return sum(xs)")
    model = FunctionModel(Script(
        found={"security": {"findings": [SQLI]}, "architecture": {"findings": [SQLI_ARCH]},
               "style": {"findings": [LOOP]}},
        amend={
            "architecture": {"amendments": [
                {"action": "add", "reason": "missed it", "finding": extra},
                {"action": "upgrade", "target": "STY-1", "severity": "medium",
                 "reason": "hot path"},
            ]},
            "security": {"amendments": [
                {"action": "downgrade", "target": "ARC-1", "severity": "low",
                 "reason": "covered by SEC-1"},
                {"action": "retract", "target": "STY-1", "reason": "not mine to judge"},
            ]},
            "style": {"amendments": [
                {"action": "retract", "target": "STY-1", "reason": "sum() is not clearer here"},
            ]},
        }))
    result = P.run_stage("review", new_state(), model)
    result = P.run_stage("reflect", result.state, model)
    by_key = {f["key"]: f for f in result.state["findings"]}
    assert by_key["ARC-2"]["title"] == "Accumulator loop hides intent"  # add
    assert by_key["ARC-2"]["status"] == "kept" and by_key["ARC-2"]["reviewer"] == "architecture"
    assert by_key["ARC-1"]["severity"] == "low"  # downgrade by a colleague
    assert any("downgraded from medium to low by security" in h
               for h in by_key["ARC-1"]["history"])
    sty = by_key["STY-1"]
    assert sty["severity"] == "medium" and "architecture" in sty["reviewers"]  # upgrade
    # security may not retract style's finding; style retracts its own.
    assert any("security disputes it" in h for h in sty["history"])
    assert sty["status"] == "dropped" and sty["drop_reason"].startswith("retracted by style")
    notes = result.state["amendment_notes"]
    assert any("cannot retract STY-1" in n for n in notes)


def test_an_upgrade_that_lowers_severity_is_ignored_with_a_note():
    findings = synthesis.number_findings("security", [dict(SQLI)])
    notes = synthesis.apply_amendments(findings, {"style": [
        {"action": "upgrade", "target": "SEC-1", "severity": "low", "reason": "x"},
        {"action": "downgrade", "target": "NOPE-9", "severity": "low", "reason": "x"}]})
    assert findings[0]["severity"] == "high"
    assert any("does not match" in n for n in notes) and any("unknown finding" in n for n in notes)


def test_reflection_is_skipped_with_a_note_when_there_is_nothing_to_read():
    model = FunctionModel(Script(found={"security": {"findings": [SQLI]}}))
    result = P.run_stage("review", new_state(), model)
    result = P.run_stage("reflect", result.state, model)
    refl = result.state["reflection"]
    assert refl["security"]["status"] == "skipped"  # its colleagues found nothing
    assert refl["architecture"]["status"] == "ok"  # it reads security's finding
    skipped = [e for e in result.events if e.kind == "reflection_skipped"]
    assert len(skipped) == 1 and "no colleague findings" in skipped[0].message
    assert sorted(c.role for c in model.history[4:]) == ["architecture", "style"]


def test_duplicates_across_reviewers_merge_keeping_the_strongest():
    model = FunctionModel(Script(found={"security": {"findings": [SQLI]},
                                        "architecture": {"findings": [SQLI_ARCH]}},
                                 synth={"duplicates": [], "verdict": "request_changes",
                                        "summary": "s"}))
    result, _ = run_to_gate(model)
    rec = result.records[0]
    assert [f["key"] for f in rec.kept] == ["SEC-1"]
    kept = rec.kept[0]
    assert kept["severity"] == "high" and kept["reviewers"] == ["security", "architecture"]
    [dup] = [f for f in rec.dropped if f["key"] == "ARC-1"]
    assert dup["duplicate_of"] == "SEC-1" and "duplicate of SEC-1" in dup["drop_reason"]


def test_findings_on_different_lines_are_not_merged_even_if_the_model_says_so():
    far = finding("architecture", "medium", 9, "Loop could overflow", suggestion="Use sum")
    model = FunctionModel(Script(
        found={"security": {"findings": [SQLI]}, "architecture": {"findings": [far]}},
        synth={"duplicates": [{"keep": "SEC-1", "merge": ["ARC-1"], "reason": "same"}],
               "verdict": "request_changes", "summary": "s"}))
    result, _ = run_to_gate(model)
    rec = result.records[0]
    assert {f["key"] for f in rec.kept} == {"SEC-1", "ARC-1"}
    assert any("not on the same lines" in n for n in rec.notes)


def test_threshold_empty_and_identical_suggestions_are_dropped_with_reasons():
    weak = finding("security", "medium", 4, "Maybe a timing issue", confidence=0.3)
    empty = finding("architecture", "medium", 6, "Function name is vague", suggestion="  ")
    same = finding("style", "low", 9, "Odd accumulation", suggestion="        t = t + x")
    model = FunctionModel(Script(found={"security": {"findings": [weak]},
                                        "architecture": {"findings": [empty]},
                                        "style": {"findings": [same]}}))
    result, _ = run_to_gate(model, min_confidence=0.5)
    rec = result.records[0]
    assert rec.kept == []
    reasons = {f["key"]: f["drop_reason"] for f in rec.dropped}
    assert reasons["SEC-1"] == "below the confidence threshold (0.30 < 0.50)"
    assert reasons["ARC-1"].startswith("no suggestion")
    assert reasons["STY-1"] == "the suggestion is identical to the existing code"
    assert rec.verdict == "approve"


def test_a_finding_on_a_file_outside_the_change_is_dropped():
    stray = finding("security", "critical", 1, "Secret in settings", file="config/settings.py")
    model = FunctionModel(Script(found={"security": {"findings": [stray, SQLI]}}))
    result = P.run_stage("review", new_state(), model)
    [dropped] = [f for f in result.state["findings"] if f["status"] == "dropped"]
    assert dropped["file"] == "config/settings.py"
    assert dropped["drop_reason"] == "names a file that is not part of this change"


@pytest.mark.parametrize(("severities", "model_verdict", "expected"), [
    (["critical"], "approve", "request_changes"),
    (["high", "low"], "needs_discussion", "request_changes"),
    (["medium"], "approve", "needs_discussion"),
    (["medium"], "request_changes", "request_changes"),  # the model may be stricter
    (["low", "info"], "approve", "approve"),
    (["low"], "needs_discussion", "needs_discussion"),
    ([], "approve", "approve"),
])
def test_verdict_rules(severities, model_verdict, expected):
    found = [finding("security", s, 2 + 3 * i, f"Problem number {i} of kind {s}")
             for i, s in enumerate(severities)]
    model = FunctionModel(Script(found={"security": {"findings": found}},
                                 synth={"duplicates": [], "verdict": model_verdict,
                                        "summary": "s"}))
    result, _ = run_to_gate(model)
    assert result.records[0].verdict == expected
    assert result.state["result"]["model_verdict"] == model_verdict


def test_a_failing_synthesizer_falls_back_to_the_rules_and_a_generated_summary():
    def broken(messages):
        raise ModelError("synthesizer overloaded")

    model = FunctionModel(Script(found={"security": {"findings": [SQLI]}}, synth=broken))
    result, events = run_to_gate(model)
    rec = result.records[0]
    assert rec.verdict == "request_changes"
    assert "1 high" in rec.summary
    assert any(e.kind == "synthesizer_failed" for e in events)
    assert result.state["result"]["synthesizer_error"] == "synthesizer overloaded"


def test_queue_model_sees_each_stage_in_order():
    """With a queue fake the calls are strictly scripted: one batch (three reviewers and the
    cross-file check; ``{"findings": []}`` fits both answers), no findings anywhere, so
    reflection is skipped for everyone and the synthesizer is the last call."""
    model = QueueModel({"findings": []}, {"findings": []}, {"findings": []}, {"findings": []},
                       {"duplicates": [], "verdict": "approve", "summary": "Clean change."})
    result, events = run_to_gate(model)
    assert result.records[0].summary == "Clean change."
    assert model.roles()[-1] == "synthesizer" and len(model.history) == 5
    assert sorted(model.roles()[:4]) == ["architecture", "checker", "security", "style"]
    assert sum(e.kind == "reflection_skipped" for e in events) == 3


def test_large_changes_are_split_into_prompt_batches_per_reviewer():
    files = [file_dict(f"pkg/m{i}.py") for i in range(6)]
    parts = batches(files, 1200)
    assert 1 < len(parts) <= 6 and sum(len(p) for p in parts) == 6
    model = FunctionModel(Script())
    P.run_stage("review", new_state(files, max_prompt_chars=1200), model)
    # one cross-file call over the whole change, whatever the number of reviewer batches
    assert len(model.history) == 3 * len(parts) + 1
    assert [c.key for c in model.history if c.role == "checker"] == ["crossfile"]
    keys = {c.key for c in model.history}
    assert f"security:{len(parts) - 1}" in keys


def test_heavy_mode_gives_reviewers_the_whole_file():
    content = "\n".join(["# header line", *APP])
    model = FunctionModel(Script())
    P.run_stage("review", new_state([file_dict(content=content)]), model)
    prompt = model.history[0].prompt
    assert "The whole new file:" in prompt and "# header line" in prompt


def test_offline_reviewers_turn_analyzer_evidence_into_labelled_findings():
    from reviews_app.pipeline import offline_review

    ev = [{"tool": "bandit", "rule": "B608", "category": "security", "severity": "high",
           "confidence": 0.7, "file": "app/users.py", "line": 4, "end_line": 4,
           "message": "Possible SQL injection", "url": "", "on_changed_line": True,
           "fix": "Pass values as query parameters."},
          {"tool": "ruff", "rule": "E711", "category": "style", "severity": "low",
           "confidence": 0.7, "file": "app/users.py", "line": 9, "end_line": 9,
           "message": "Comparison to None", "url": "", "on_changed_line": True,
           "fix": "Use is None."}]
    body = "## Reviewer\nsecurity\n\n## Analyzer evidence\n```json\n" + json.dumps(ev) + "\n```"
    answer = offline_review.reviewer([{"role": "user", "content": body}])
    [f] = answer["findings"]
    assert f["rules"] == ["B608"] and f["severity"] == "high" and f["line"] == 4
    assert "no language model" in f["description"]
    assert f["suggestion"] == "Pass values as query parameters."


def test_a_review_missing_a_reviewer_cannot_approve():
    def down(messages):
        raise ModelError("missing credentials")

    model = FunctionModel(Script(found={"security": down, "style": {"findings": [LOOP]}}))
    result, _ = run_to_gate(model)
    rec = result.records[0]
    assert rec.verdict == "needs_discussion"  # the rules alone would approve a low finding
    assert rec.summary.startswith("Incomplete review: the security reviewer did not finish.")
    assert any("Incomplete review" in n for n in rec.notes)


def test_offline_reflection_upgrades_overlapping_findings_but_not_style_notes():
    from reviews_app.pipeline import offline_review

    def body(own, others):
        return [{"role": "user", "content":
                 "## Reviewer\nx\n\n## Your findings\n```json\n" + json.dumps(own) + "\n```\n\n"
                 "## Colleagues' findings\n```json\n" + json.dumps(others) + "\n```"}]

    risky = {"key": "SEC-1", "reviewer": "security", "category": "security",
             "severity": "critical", "file": "a.py", "line": 5}
    arch = {"key": "ARC-1", "category": "architecture", "severity": "low", "file": "a.py",
            "line": 5}
    style = {"key": "STY-1", "category": "style", "severity": "info", "file": "a.py", "line": 5}
    [up] = offline_review.reflection(body([arch], [risky]))["amendments"]
    assert (up["action"], up["target"], up["severity"]) == ("upgrade", "ARC-1", "critical")
    assert offline_review.reflection(body([style], [risky]))["amendments"] == []


# --- coverage: only what was really examined counts as reviewed --------------------------------
TS = ["const key = 'sk_live_51HqLyjWDarjtT1zdp7dcXYZabc';",
      "export function find(db, id) {",
      "  return db.query(`select * from users where id = ${id}`);", "}"]


def ts_file(path="src/users.ts"):
    f = file_dict(path, TS)
    f.update(language="TypeScript", lexer="typescript", is_python=False)
    return f


def rb_file(path="src/users.rb"):
    """A file of a language no analyzer of ours reads."""
    f = file_dict(path, ["def find(db, id)", "  db.query(\"select * from users where id = #{id}\")",
                         "end"])
    f.update(language="Ruby", lexer="ruby", is_python=False)
    return f


def model_only(path):
    return {"path": path, "reason": "model_only", "reviewed": True, "detail": "(from the parser)"}


def approving():
    return FunctionModel(Script(synth={"duplicates": [], "verdict": "approve",
                                       "summary": "Looks fine."}))


def test_a_file_no_analyzer_reads_and_only_the_offline_model_saw_is_not_reviewed():
    state = new_state([rb_file()], offline_roles=["security", "architecture", "style"])
    state["coverage"] = [model_only("src/users.rb")]
    state["analysis"] = {"evidence": [], "errors": [], "tools": {"detect-secrets": "1.5.0"},
                         "files": 1, "examined": [], "kinds": {"src/users.rb": "other"},
                         "examined_by": {"src/users.rb": ["detect-secrets", "secrets"]}}
    model = approving()
    result, _ = run_to_gate(model, state)
    rec = result.records[0]
    assert rec.verdict == "needs_discussion" and rec.rule_verdict == "needs_discussion"
    [entry] = rec.coverage
    assert (entry["path"], entry["reason"], entry["reviewed"]) == ("src/users.rb",
                                                                   "not_examined", False)
    assert "checked for secrets only: no analyzer reads Ruby" in entry["detail"]
    assert "offline model, which reads no code" in entry["detail"]
    assert (entry["analyzers"], entry["reviewers"]) == (["detect-secrets", "secrets"], [])
    assert rec.summary.startswith("Incomplete review: 1 file not examined by any analyzer "
                                  "or model — src/users.rb: checked for secrets only: no "
                                  "analyzer reads Ruby")
    assert any(n.startswith("Incomplete review: 1 file not examined") for n in rec.notes)
    assert result.state["coverage"] == rec.coverage
    # the synthesizer is told the rules do not allow approve
    synth = next(c for c in model.history if c.role == "synthesizer")
    assert "## Verdict by the rules\nneeds_discussion" in synth.prompt


def test_a_file_a_model_read_is_reviewed_and_may_be_approved():
    state = new_state([ts_file()])
    state["coverage"] = [model_only("src/users.ts")]
    result, _ = run_to_gate(approving(), state)
    rec = result.records[0]
    assert rec.verdict == "approve"
    assert rec.coverage == [{"path": "src/users.ts", "reason": "model_only", "reviewed": True,
                             "analyzers": [], "reviewers": ["security", "architecture", "style"],
                             "detail": "Read by the security, architecture, style reviewers "
                                       "only, without static analysis: no analyzer ran on it."}]
    assert not rec.summary.startswith("Incomplete")


def test_a_python_file_the_analyzers_checked_counts_with_the_offline_model():
    state = new_state(offline_roles=["security", "architecture", "style"])
    state["analysis"] = {"evidence": [], "errors": [], "tools": {"ruff": "0.1", "bandit": "1"},
                         "files": 1, "examined": ["app/users.py"]}
    result, _ = run_to_gate(approving(), state)
    rec = result.records[0]
    assert rec.verdict == "approve"
    assert [(c["reason"], c["reviewed"]) for c in rec.coverage] == [("analyzers_only", True)]


def test_a_python_file_whose_analyzers_failed_and_no_model_read_is_not_reviewed():
    state = new_state(offline_roles=["security", "architecture", "style"])
    state["analysis"] = {"evidence": [], "errors": ["ruff timed out after 60 s and was stopped"],
                         "tools": {}, "files": 1, "examined": []}
    result, _ = run_to_gate(approving(), state)
    rec = result.records[0]
    assert rec.verdict == "needs_discussion"
    [entry] = rec.coverage
    assert entry["reason"] == "not_examined" and "ruff timed out" in entry["detail"]


def test_files_in_a_batch_every_reviewer_failed_on_are_not_reviewed():
    files = [file_dict(f"pkg/m{i}.py") for i in range(4)]
    parts = batches(files, 1200)
    assert len(parts) > 1
    lost = {f["path"] for f in parts[-1]}

    def flaky(messages):
        if any(p in messages[-1]["content"] for p in lost):
            raise ModelError("provider returned 500 twice")
        return {"findings": []}

    model = FunctionModel(Script(found={r: flaky for r in ("security", "architecture",
                                                           "style")}))
    result, _ = run_to_gate(model, new_state(files, max_prompt_chars=1200))
    rec = result.records[0]
    assert {r["status"] for r in result.state["reviewers"].values()} == {"partial"}
    assert rec.verdict == "needs_discussion"
    not_examined = {c["path"] for c in rec.coverage if c["reason"] == "not_examined"}
    assert not_examined == lost
    detail = next(c["detail"] for c in rec.coverage if c["reason"] == "not_examined")
    assert "security (partial)" in detail


@pytest.mark.parametrize("reason", ["clipped", "over_file_limit", "over_byte_limit",
                                    "unreadable", "not_utf8", "nul_bytes"])
def test_any_part_left_unexamined_prevents_approve(reason):
    """Also bytes replaced with U+FFFD (not UTF-8, NUL): the review never read them."""
    state = new_state()
    state["coverage"] = [{"path": "big.py", "reason": reason,
                          "reviewed": reason in ("clipped", "not_utf8", "nul_bytes"),
                          "detail": "cut"}]
    result, _ = run_to_gate(approving(), state)
    rec = result.records[0]
    assert rec.verdict == "needs_discussion"
    assert f"big.py ({reason.replace('_', ' ')})" in rec.summary


@pytest.mark.parametrize("reason", ["binary", "deleted", "generated", "rename_only",
                                    "mode_only"])
def test_files_with_nothing_to_review_do_not_prevent_approve(reason):
    state = new_state()
    state["coverage"] = [{"path": "x.bin", "reason": reason, "reviewed": False, "detail": "-"}]
    result, _ = run_to_gate(approving(), state)
    assert result.records[0].verdict == "approve"


def test_a_reviewer_that_timed_out_makes_the_review_incomplete():
    release = threading.Event()

    def slow(messages):
        release.wait(5)
        return {"findings": []}

    model = FunctionModel(Script(found={"architecture": slow},
                                 synth={"duplicates": [], "verdict": "approve",
                                        "summary": "Fine."}))
    try:
        result, _ = run_to_gate(model, new_state(reviewer_timeout=0.3))
    finally:
        release.set()
    rec = result.records[0]
    assert result.state["reviewers"]["architecture"]["status"] == "timeout"
    assert rec.verdict == "needs_discussion"
    assert "architecture reviewer did not finish" in rec.summary


def test_an_empty_new_file_has_nothing_to_examine_and_does_not_prevent_approve():
    empty = file_dict("pkg/__init__.py", [])
    empty.update(hunks=[], added=0)
    blank = ts_file("web/blank.ts")
    for ln in blank["hunks"][0]["lines"]:
        ln["text"] = "  "
    state = new_state([empty, blank], offline_roles=["security", "architecture", "style"])
    result, _ = run_to_gate(approving(), state)
    rec = result.records[0]
    assert rec.verdict == "approve" and rec.coverage == []


def test_synthesis_run_again_gives_the_same_coverage():
    state = new_state([ts_file()], offline_roles=["security", "architecture", "style"])
    state["coverage"] = [model_only("src/users.ts")]
    first, _ = run_to_gate(approving(), state)
    again = P.run_stage("synthesize", {**first.state, "findings": []}, approving())
    assert again.records[0].coverage == first.records[0].coverage
    assert [c["reason"] for c in again.records[0].coverage] == ["not_examined"]
