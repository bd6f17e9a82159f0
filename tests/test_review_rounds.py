"""Earlier rounds at synthesis (reviews_app/pipeline/rounds.py): rejected fingerprints are not
raised again for the same code, open findings are carried, and those whose code changed are
resolved (mechanically, then by the synthesizer role's check; offline too)."""

from __future__ import annotations

import json

from agents_app.llm import offline
from agents_app.patterns.testing import FunctionModel
from reviews_app.pipeline import fingerprint, rounds
from reviews_app.pipeline.pattern.helpers import code_lookup
from tests.test_review_pipeline import APP, Script, file_dict, finding, new_state, run_to_gate

SHA = "c0ffee1234567890"
OLD_SQL = APP[3]  # the line the SQL injection finding pointed at


def carried(key="SEC-1", *, file="app/users.py", line=4, code=OLD_SQL, rules=("S608",),
            category="security", title="SQL injection through string formatting", **extra):
    f = finding(category, "high", line, title, file=file, rules=list(rules))
    f.update(key=key, reviewer=category, reviewers=[category], history=[], review=41,
             code=code, **extra)
    f["fingerprint"] = fingerprint.fingerprint(f, code)
    return f


def state_with(files, **options):
    s = new_state(files)
    s["options"].update(pull_request={"head_sha": SHA, "previous_round": 1}, **options)
    return s


def kept(findings, **match):
    return [f for f in findings if f["status"] == "kept"
            and all(f.get(k) == v for k, v in match.items())]


def stamped(files, *found):
    code_at = code_lookup(files)
    out = [dict(f, key=f"SEC-{i}", reviewer=f["category"], reviewers=[f["category"]],
                history=[], status="kept", drop_reason="", duplicate_of="")
           for i, f in enumerate(found, 1)]
    fingerprint.stamp(out, code_at)
    return out, code_at


# --- suppressed ---------------------------------------------------------------------------------
def test_a_rejected_finding_is_not_raised_again_for_the_same_code_but_is_for_changed_code():
    files = [file_dict()]
    sqli = finding("security", "high", 4, "SQL injection", rules=["S608"])
    [first], code_at = stamped(files, sqli)
    suppressed = [{"fingerprint": first["fingerprint"], "review": 17, "key": "SEC-1",
                   "reason": "intended: a fixture"}]
    # Same code, other wording and lines moved by nothing: dropped, naming review and reason.
    again, code_at = stamped(files, dict(sqli, title="Query built with %"))
    notes = rounds.apply(again, state_with(files, suppressed=suppressed), code_at)
    assert again[0]["status"] == "dropped"
    assert again[0]["drop_reason"] == "rejected by a person in review 17 (intended: a fixture)"
    assert "not raised again" in notes[0]
    # The line changed: a new fingerprint, so the finding is raised again.
    changed = APP[:3] + ['    return db.execute("select * from users where id = " + uid)'] + APP[4:]
    files2 = [file_dict(lines=changed)]
    again2, code_at2 = stamped(files2, sqli)
    rounds.apply(again2, state_with(files2, suppressed=suppressed), code_at2)
    assert again2[0]["status"] == "kept" and not again2[0]["drop_reason"]


# --- carried ------------------------------------------------------------------------------------
def test_a_finding_in_an_untouched_file_is_carried_with_a_new_key():
    files = [file_dict(path="app/other.py", lines=["x = 1"])]
    mine, code_at = stamped(files, finding("security", "low", 1, "Magic number",
                                           file="app/other.py"))
    c = carried()
    notes = rounds.apply(mine, state_with(files, carried=[c]), code_at)
    [moved] = [f for f in mine if f.get("carried_from")]
    assert moved["carried_from"] == "41:SEC-1" and moved["status"] == "kept"
    assert moved["key"] == "SEC-2"  # SEC-1 is this round's own finding
    assert moved["line"] == 4 and moved["fingerprint"] == c["fingerprint"]
    assert not moved.get("resolution")
    assert "carried from round 1 (41:SEC-1)" in moved["history"][-1]
    assert "1 open finding(s) of round 1 carried" in notes[-1]


def test_unchanged_code_in_a_touched_file_stays_open_and_follows_its_lines():
    lines = ["# a header line", "", *APP]  # the old code moved down by two lines
    files = [file_dict(lines=lines, content="\n".join(lines))]
    mine, code_at = stamped(files)
    rounds.apply(mine, state_with(files, carried=[carried()]), code_at)
    [moved] = mine
    assert moved["status"] == "kept" and moved["line"] == 6 and not moved.get("resolution")
    assert "unchanged" in moved["history"][-1]


def fixed_files():
    lines = APP[:3] + ['    return db.execute("select * from users where id = ?", (uid,))'] \
        + APP[4:]
    return [file_dict(lines=lines, content="\n".join(lines))]


def test_code_gone_and_no_finding_there_is_resolved_as_implemented():
    files = fixed_files()
    mine, code_at = stamped(files)
    rounds.apply(mine, state_with(files, carried=[carried()]), code_at)
    [done] = mine
    assert done["status"] == "dropped" and done["resolution"] == "implemented"
    assert done["drop_reason"] == f"resolved in {SHA[:12]}: implemented"
    assert done["carried_from"] == "41:SEC-1"


def test_the_same_rule_still_firing_nearby_is_partially():
    files = fixed_files()
    mine, code_at = stamped(files, finding("security", "medium", 5, "Still formats SQL",
                                           rules=["S608"]))
    rounds.apply(mine, state_with(files, carried=[carried()]), code_at)
    [old] = [f for f in mine if f.get("carried_from")]
    assert old["status"] == "kept" and old["resolution"] == "partially"
    assert "SEC-1 still reports the S608 problem nearby" in old["history"][-1]


def test_part_of_the_old_code_remaining_is_partially():
    files = fixed_files()
    mine, code_at = stamped(files)
    two = "\n".join(APP[2:4])  # "def find…" stays, the query line is gone
    rounds.apply(mine, state_with(files, carried=[carried(code=two, line=3)]), code_at)
    assert mine[0]["resolution"] == "partially" and mine[0]["status"] == "kept"


def test_the_same_fingerprint_found_again_is_not_implemented_and_merged():
    files = [file_dict()]
    mine, code_at = stamped(files, finding("security", "high", 4, "SQLi again", rules=["S608"]))
    c = carried()
    assert mine[0]["fingerprint"] == c["fingerprint"]
    rounds.apply(mine, state_with(files, carried=[c]), code_at)
    assert len(mine) == 1  # merged into this round's finding, no second card
    assert mine[0]["carried_from"] == "41:SEC-1" and mine[0]["resolution"] == "not"
    assert "not implemented" in mine[0]["history"][-1]


def test_a_deleted_file_resolves_its_findings():
    s = state_with([file_dict(path="app/other.py", lines=["x = 1"])], carried=[carried()])
    s["coverage"] = [{"path": "app/users.py", "reason": "deleted", "reviewed": False,
                      "detail": "deleted"}]
    findings: list[dict] = []
    rounds.apply(findings, s, code_lookup(s["files"]))
    assert findings[0]["resolution"] == "implemented" and findings[0]["status"] == "dropped"


def test_a_carried_finding_rejected_since_is_not_carried():
    c = carried()
    s = state_with([file_dict(path="b.py", lines=["y = 2"])], carried=[c],
                   suppressed=[{"fingerprint": c["fingerprint"], "review": 42, "key": "SEC-1",
                                "reason": ""}])
    findings: list[dict] = []
    rounds.apply(findings, s, code_lookup(s["files"]))
    assert findings == []


# --- the check by the synthesizer role, scripted and offline ---------------------------------------
def test_the_scripted_check_overrides_the_guess_and_is_recorded():
    asked = []

    def synth(messages):
        if "## Suggestions to check" in messages[-1]["content"]:
            body = messages[-1]["content"].split("```json\n", 1)[1].rsplit("\n```", 1)[0]
            items = json.loads(body)
            asked.extend(items)
            return {"items": [{"key": items[0]["key"], "status": "not",
                               "reason": "the placeholder is still built by hand"}]}
        return {"duplicates": [], "verdict": "approve", "summary": "Fine."}

    model = FunctionModel(Script(synth=synth))
    state = state_with(fixed_files(), carried=[carried()])
    result, _ = run_to_gate(model, state=state)
    [record] = result.records
    [old] = [f for f in record.kept if f.get("carried_from")]
    assert old["resolution"] == "not" and old["status"] == "kept"
    assert "checked against c0ffee123456: not (the placeholder" in old["history"][-1]
    assert asked[0]["guess"] == "implemented" and OLD_SQL.strip() in asked[0]["code_before"]
    assert "(uid,)" in asked[0]["code_now"]
    calls = [c for c in model.history if c.key == rounds.CHECK_KEY]
    assert len(calls) == 1 and calls[0].role == "synthesizer"
    # The carried high finding still counts for the verdict.
    assert record.rule_verdict == "request_changes"


def test_a_failing_check_leaves_the_guess_and_says_so():
    def synth(messages):
        if "## Suggestions to check" in messages[-1]["content"]:
            raise RuntimeError("provider down")
        return {"duplicates": [], "verdict": "approve", "summary": "Fine."}

    result, _ = run_to_gate(FunctionModel(Script(synth=synth)),
                            state=state_with(fixed_files(), carried=[carried()]))
    [record] = result.records
    [old] = [f for f in record.dropped if f.get("carried_from")]
    assert old["resolution"] == "implemented"
    assert any("mechanical comparison decides" in n for n in record.notes)


def test_the_offline_model_answers_the_check_with_the_guess():
    f = carried()
    f["resolution"] = "partially"
    msgs = rounds.check_messages([(dict(f, key="SEC-9"), dict(f, why="part remains",
                                                               file_now=None))])
    answer = json.loads(offline.reply("synthesizer", "ImplementedCheck", msgs))
    assert answer["items"] == [{"key": "SEC-9", "status": "partially", "reason":
                                "offline model: kept the mechanical comparison's answer "
                                "(part remains)"}]
    rounds.ImplementedCheck.model_validate(answer)


def test_the_check_prompt_masks_secrets():
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    f = carried(code=f'API_KEY = "{key}"')
    f["resolution"] = "implemented"
    msgs = rounds.check_messages([(f, dict(f, why="gone", file_now=None))])
    assert key not in msgs[-1]["content"]


# --- rules -------------------------------------------------------------------------------------
def test_repository_rules_reach_the_reviewers_for_their_paths_only():
    rules = [{"text": "Queries go through db.query()", "scope": "path", "path_glob": "app/**",
              "severity": "high"},
             {"text": "No prints in lib", "scope": "path", "path_glob": "lib/**",
              "severity": "low"}]
    model = FunctionModel(Script())
    run_to_gate(model, state=new_state(rules=rules))
    prompt = next(c for c in model.history if c.role == "security").prompt
    assert "## Repository rules" in prompt and "Queries go through db.query()" in prompt
    assert "No prints in lib" not in prompt
    msgs = [{"role": "user", "content": "x"}]
    assert rounds.with_rules(msgs, rules, {"docs/a.md"}) == msgs
