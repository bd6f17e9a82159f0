"""Change-level checks that run beside the reviewers, in the same parallel batch: cross-file
(pull-request level) analysis (``crossfile``) and the review-rules guardian (``guardian``).

``jobs`` returns the ``checker`` calls to add to the reviewers' batch (name → callable
returning a ``Reply``); ``collect`` turns their outcomes into findings (numbered ``XF-n`` and
``RUL-n``, with the bookkeeping fields of ``synthesis.number_findings``) and events. A failed
or late check never fails the review: it is reported as an event and a note on the review
(``state["check_notes"]``, shown with the synthesis notes), and a rule that nobody checked is
listed as not checked, never as passed. What each check did is kept in ``state["checks"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents_app.patterns.base import Event, ModelClient
from common import secret_keys

from ...rules import check as rulecheck
from ...rules import guardian
from .. import changeset, crossfile, synthesis
from ..diffs.hunks import added_lines

CROSSFILE = "check:crossfile"
GUARDIAN = "check:rules"
ROLE = "checker"
MAX_NOTES = 10


def _rules(state: dict) -> list[tuple[dict, list[str]]]:
    return rulecheck.applicable(rulecheck.normalise(state["options"]),
                                [f["path"] for f in state["files"]])


def jobs(state: dict, client: ModelClient) -> dict[str, Callable[[], Any]]:
    opts = state["options"]
    budget = int(opts["max_prompt_chars"])
    out: dict[str, Callable[[], Any]] = {}
    checks: dict[str, Any] = {}
    if any(added_lines(f) for f in state["files"]):
        observed = changeset.observations(state["files"])
        msgs, left = crossfile.messages(state["label"], state["files"], observed, budget)
        checks["crossfile"] = {"observations": len(observed), "left_out": left}
        out[CROSSFILE] = lambda: client.complete(ROLE, msgs, schema=crossfile.CrossFileAnswer,
                                                 key="crossfile")
    if rules := _rules(state):
        msgs, left = guardian.messages(state["label"], state["files"], rules, budget)
        checks["rules"] = {"left_out": left}
        out[GUARDIAN] = lambda: client.complete(ROLE, msgs, schema=guardian.GuardianAnswer,
                                                key="guardian")
    state["checks"] = checks
    return out


def collect(state: dict, outcomes: dict[str, Any]) -> tuple[list[dict], list[Event]]:
    findings: list[dict] = []
    events: list[Event] = []
    notes: list[str] = []
    checks = state.setdefault("checks", {})
    if CROSSFILE in outcomes:
        more, ev = _crossfile(state, outcomes[CROSSFILE], notes)
        findings += more
        events += ev
    more, ev = _guardian(state, outcomes.get(GUARDIAN), notes)
    findings += more
    events += ev
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"… and {len(notes) - MAX_NOTES} more notes on the "
                                     "change-level checks."]
    state["check_notes"] = notes
    state["checks"] = checks
    return findings, events


def _offline(state: dict) -> bool:
    return ROLE in set(state["options"].get("offline_roles") or ())


def _drop_outside(findings: list[dict], paths: set[str]) -> None:
    for f in findings:
        if f.get("drop_reason"):
            f["status"] = "dropped"
        elif f["file"] not in paths:
            f["status"] = "dropped"
            f["drop_reason"] = "names a file that is not part of this change"


# --- cross-file --------------------------------------------------------------------------------
def _crossfile(state: dict, outcome, notes: list[str]) -> tuple[list[dict], list[Event]]:
    info = state["checks"].setdefault("crossfile", {})
    info["seconds"] = round(outcome.seconds, 2)
    if outcome.error:
        info.update(status="timeout" if outcome.timed_out else "failed", error=outcome.error)
        notes.append(f"The cross-file check failed ({outcome.error}): duplication across "
                     "files, configuration drift and missing tests were not looked for.")
        return [], [Event("check_failed", f"cross-file check failed: {outcome.error}; the "
                          "review goes on without it.", {"check": "crossfile"})]
    paths = {f["path"] for f in state["files"]}
    raw = [secret_keys.mask_finding(f) for f in crossfile.to_findings(outcome.value.data, paths)]
    found = synthesis.number_findings("cross-file", raw)
    first = synthesis.after_carried(state["options"].get("carried"), "XF")
    for i, f in enumerate(found, first):
        f["key"] = f"XF-{i}"
    _drop_outside(found, paths)
    kept = sum(f["status"] == "kept" for f in found)
    info.update(status="ok", findings=len(found))
    how = (" (mechanical rules only: the offline model reads no code)" if _offline(state)
           else "")
    msg = f"The cross-file check found {kept} change-level issue(s){how}."
    if info.get("left_out"):
        msg += f" Left out for size: {len(info['left_out'])} file(s)."
    return found, [Event("check_done", msg, {"check": "crossfile", "findings": kept})]


# --- review rules ------------------------------------------------------------------------------
def _guardian(state: dict, outcome, notes: list[str]) -> tuple[list[dict], list[Event]]:
    rules = _rules(state)
    if not rules:
        return [], []  # no rule covers this change's files
    info = state["checks"].setdefault("rules", {})
    offline = _offline(state)
    events: list[Event] = []
    failed = ""
    model: list[dict] = []
    not_checked: dict[str, str] = {}
    ids = {r["id"] for r, _ in rules}
    if outcome is None or outcome.error:
        failed = outcome.error if outcome is not None else "not run"
        events.append(Event("check_failed", f"rules check failed: {failed}; rules with a "
                            "pattern are still checked by their pattern.", {"check": "rules"}))
    else:
        answer = outcome.value.data
        model = [secret_keys.mask_finding(f) for f in guardian.model_findings(answer, rules)]
        for item in answer.not_checked:
            if item.rule.strip() in ids:
                not_checked[item.rule.strip()] = (item.reason.strip()
                                                  or "the checker could not judge it")
        if offline:  # never count the offline model as having read the code
            for rid in ids:
                not_checked.setdefault(rid, guardian.OFFLINE_REASON)
    taken = guardian.covered([f for f in model if not f.get("drop_reason")])
    budget = rulecheck.Budget()
    by_pattern: set[str] = set()
    found = list(model)
    for rule, paths in rules:
        if not rule["pattern"]:
            continue
        compiled, why = rulecheck.compile_pattern(rule["pattern"])
        if compiled is None:
            notes.append(f"Review rule {rulecheck.label(rule)}: its pattern was not used, as "
                         f"it {why}.")
            continue
        hits, complete = rulecheck.pattern_hits(compiled, state["files"], paths, budget)
        if complete:
            by_pattern.add(rule["id"])
        else:
            notes.append(f"Review rule {rulecheck.label(rule)}: its pattern check stopped at "
                         "the time limit, so it read only part of the change.")
        mine = {(p, n) for rid, p, n in taken if rid == rule["id"]}
        found += guardian.pattern_findings(rule, hits, mine, rule["pattern"])
    reasons = [f.pop("drop_reason", "") for f in found]  # numbering resets drop_reason
    numbered = synthesis.number_findings("rules", found, synthesis.after_carried(
        state["options"].get("carried"), synthesis.prefix_of("rules")))
    for f, reason in zip(numbered, reasons, strict=True):
        f["drop_reason"] = reason
    _drop_outside(numbered, {f["path"] for f in state["files"]})
    unchecked = []
    for rule, _ in rules:
        by_model = not failed and rule["id"] not in not_checked
        if not by_model and rule["id"] not in by_pattern:
            reason = (f"the checker failed ({failed})" if failed else
                      not_checked.get(rule["id"]) or "its pattern could not be used")
            unchecked.append({"id": rule["id"], "reason": reason})
            notes.append(f"Review rule {rulecheck.label(rule)} was not checked: {reason}.")
    violated = sorted({f["rule"]["id"] for f in numbered if f["status"] == "kept"})
    checked = len(rules) - len(unchecked)
    info.update(applied=len(rules), checked=checked, by_pattern=sorted(by_pattern),
                violated=violated, not_checked=unchecked,
                status="failed" if failed else "ok")
    msg = (f"Review rules: {len(rules)} apply to this change, {checked} checked"
           + (f" ({len(by_pattern)} by their pattern)" if by_pattern else "")
           + f", {len(violated)} broken")
    if unchecked:
        msg += f"; {len(unchecked)} not checked ({unchecked[0]['reason']})"
    events.append(Event("rules_checked", msg + ".", {"check": "rules", "applied": len(rules),
                                                     "checked": checked,
                                                     "violated": len(violated)}))
    return numbered, events
