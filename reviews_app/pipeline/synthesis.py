"""The deterministic half of the review: numbering findings, applying reflection amendments,
merging duplicates, dropping weak or empty findings, ordering, and the verdict rules.

The synthesizer model proposes duplicate groups, a verdict and a summary; everything it
proposes passes through the checks here, so a model cannot merge findings that are not on
the same lines, nor approve a change that the rules say needs changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from common.analyzers.classes import class_of

from .schema import SEVERITY_RANK, VERDICT_RANK

PREFIX = {"security": "SEC", "architecture": "ARC", "style": "STY"}
LINE_TOLERANCE = 2  # lines apart that still count as "the same place"
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of in on to for is are be with and or not this that it its by at "
                  "from as use uses using may can could should".split())

Finding = dict[str, Any]


# --- numbering ----------------------------------------------------------------------------------
def number_findings(reviewer: str, raw: list[dict], start: int = 1) -> list[Finding]:
    """Give a reviewer's findings stable keys (SEC-1, …) and the bookkeeping fields."""
    prefix = PREFIX.get(reviewer, reviewer[:3].upper())
    out = []
    for i, f in enumerate(raw, start):
        out.append({**f, "key": f"{prefix}-{i}", "reviewer": reviewer, "reviewers": [reviewer],
                    "history": [], "status": "kept", "drop_reason": "", "duplicate_of": ""})
    return out


def prefix_of(reviewer: str) -> str:
    return PREFIX.get(reviewer, reviewer[:3].upper())


def after_carried(carried: list[dict] | None, prefix: str) -> int:
    """The first number a round may give keys with ``prefix``: past those of the findings it
    carries from earlier rounds, which keep their keys (a person should not meet SEC-1 as a
    new finding while the SEC-1 they accepted last round is still open)."""
    head = prefix + "-"
    nums = [int(k[len(head):]) for c in carried or () if isinstance(c, dict)
            for k in [str(c.get("key") or "")] if k.startswith(head) and k[len(head):].isdigit()]
    return max(nums, default=0) + 1


def next_index(findings: list[Finding], reviewer: str) -> int:
    prefix = PREFIX.get(reviewer, reviewer[:3].upper()) + "-"
    nums = [int(f["key"][len(prefix):]) for f in findings if f["key"].startswith(prefix)]
    return max(nums, default=0) + 1


# --- reflection amendments ------------------------------------------------------------------------
def apply_amendments(findings: list[Finding], amendments: dict[str, list[dict]]) -> list[str]:
    """Apply each reviewer's amendments in reviewer order, in place. Returns notes on what was
    applied or ignored (an amendment naming a missing finding, an "upgrade" to a weaker
    severity, a retraction of someone else's finding)."""
    notes: list[str] = []
    by_key = {f["key"]: f for f in findings}
    for reviewer, items in amendments.items():
        for a in items:
            action, reason = a["action"], a.get("reason", "").strip()
            if action == "add":
                new = a.get("finding")
                if not new:
                    notes.append(f"{reviewer}: an 'add' without a finding was ignored.")
                    continue
                [added] = number_findings(reviewer, [new], next_index(findings, reviewer))
                added["history"].append(f"added by {reviewer} on reflection: {reason}")
                findings.append(added)
                by_key[added["key"]] = added
                notes.append(f"{reviewer} added {added['key']}: {added['title']}")
                continue
            target = by_key.get(a.get("target", "").strip())
            if target is None:
                notes.append(f"{reviewer}: {action} of unknown finding "
                             f"{a.get('target')!r} was ignored.")
                continue
            if action == "retract":
                if target["reviewer"] != reviewer:
                    target["history"].append(f"{reviewer} disputes it: {reason}")
                    notes.append(f"{reviewer} cannot retract {target['key']} (raised by "
                                 f"{target['reviewer']}); kept and noted as disputed.")
                    continue
                if target["status"] == "kept":
                    target["status"] = "dropped"
                    target["drop_reason"] = f"retracted by {reviewer}: {reason}"
                    notes.append(f"{reviewer} retracted {target['key']}.")
                continue
            new_sev = a.get("severity")
            if new_sev not in SEVERITY_RANK:
                notes.append(f"{reviewer}: {action} of {target['key']} without a severity "
                             "was ignored.")
                continue
            stronger = SEVERITY_RANK[new_sev] < SEVERITY_RANK[target["severity"]]
            if (action == "upgrade") != stronger or new_sev == target["severity"]:
                notes.append(f"{reviewer}: {action} of {target['key']} to {new_sev} does not "
                             f"match its severity ({target['severity']}); ignored.")
                continue
            target["history"].append(f"{action}d from {target['severity']} to {new_sev} by "
                                     f"{reviewer}: {reason}")
            target["severity"] = new_sev
            if action == "upgrade" and reviewer not in target["reviewers"]:
                target["reviewers"].append(reviewer)
            notes.append(f"{reviewer} {action}d {target['key']} to {new_sev}.")
    return notes


# --- duplicates -----------------------------------------------------------------------------------
def _span(f: Finding) -> tuple[int, int] | None:
    if not f.get("line"):
        return None
    start = int(f["line"])
    end = int(f.get("end_line") or start)
    return start, max(start, end)


def same_place(a: Finding, b: Finding, tolerance: int = LINE_TOLERANCE) -> bool:
    if a["file"] != b["file"]:
        return False
    sa, sb = _span(a), _span(b)
    if sa is None or sb is None:
        return sa is None and sb is None
    return sa[0] <= sb[1] + tolerance and sb[0] <= sa[1] + tolerance


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def overlap(a: Finding, b: Finding) -> bool:
    """Same file and at least one line in common (no tolerance: neighbouring lines are
    different places, or a file with one result per line would collapse into one)."""
    return same_place(a, b, tolerance=0)


def _rules(f: Finding) -> set[str]:
    return {str(r).upper() for r in f.get("rules") or [] if str(r).strip()}


def _similar_text(a: Finding, b: Finding) -> bool:
    wa, wb = _words(a["title"]), _words(b["title"])
    return bool(wa and wb and len(wa & wb) / len(wa | wb) >= 0.5)


def same_problem(a: Finding, b: Finding) -> str:
    """Why ``a`` and ``b`` describe the same problem, or "" if they do not: they rest on the
    same analyzer rule, or (neither names a rule the other lacks) they are of the same
    category with similar titles. Findings on different rules are different problems."""
    ra, rb = _rules(a), _rules(b)
    if ra & rb:
        return f"same rule {sorted(ra & rb)[0]}"
    # Two analyzers' rules for one problem class (Semgrep's js-eval-injection and oxlint's
    # no-eval): one finding, with both tools' rules as its evidence.
    ca = {c: r for r in sorted(ra) if (c := class_of(r))}
    cb = {c: r for r in sorted(rb) if (c := class_of(r))}
    if shared := sorted(ca.keys() & cb.keys()):
        return f"same problem class {shared[0]} ({ca[shared[0]]} and {cb[shared[0]]})"
    if ra and rb:
        return ""
    if a["category"] == b["category"] and _similar_text(a, b):
        return f"same {a['category']} problem, similar title"
    return ""


def _strength(f: Finding) -> tuple:
    return (SEVERITY_RANK[f["severity"]], -float(f.get("confidence") or 0), f["key"])


def _where(f: Finding) -> str:
    span = _span(f)
    if span is None:
        return f["file"]
    return f"{f['file']}:{span[0]}" + (f"-{span[1]}" if span[1] > span[0] else "")


def _merge_group(group: list[Finding], why: str | dict[str, str]) -> None:
    """Drop all but the strongest of ``group``; each dropped finding names the one it
    duplicates (key, title and place) and why (one reason, or one per key)."""
    keep = min(group, key=_strength)
    title = keep["title"] if len(keep["title"]) <= 80 else keep["title"][:79] + "…"
    for other in group:
        if other is keep:
            continue
        reason = why.get(other["key"], "") if isinstance(why, dict) else why
        other["status"] = "dropped"
        other["duplicate_of"] = keep["key"]
        other["drop_reason"] = (f"duplicate of {keep['key']} \u201c{title}\u201d at "
                                f"{_where(keep)} ({reason})")
        for r in other["reviewers"]:
            if r not in keep["reviewers"]:
                keep["reviewers"].append(r)
        keep["confidence"] = max(float(keep["confidence"]), float(other["confidence"]))
        keep.setdefault("merged", []).append(other["key"])
        keep["rules"] = list(dict.fromkeys([*(keep.get("rules") or []),
                                            *(other.get("rules") or [])]))


def merge_duplicates(findings: list[Finding]) -> int:
    """Merge kept findings that describe the same problem on overlapping lines. Returns the
    number dropped.

    Each finding is compared with the strongest finding of a group only, never with the
    other members: "A is like B and B is like C" must not make A and C one finding (that is
    how one tab-indented file became a single W191 finding)."""
    kept = sorted((f for f in findings if f["status"] == "kept"), key=_strength)
    groups: dict[str, list[tuple[Finding, list[Finding], dict[str, str]]]] = {}
    for f in kept:
        in_file = groups.setdefault(f["file"], [])
        for keep, members, why in in_file:
            reason = overlap(keep, f) and same_problem(keep, f)
            if reason:
                members.append(f)
                why[f["key"]] = f"{reason} on the same lines"
                break
        else:
            in_file.append((f, [f], {}))
    merged = 0
    for _, members, why in (g for in_file in groups.values() for g in in_file):
        if len(members) > 1:
            _merge_group(members, why)
            merged += len(members) - 1
    return merged


def apply_model_duplicates(findings: list[Finding], groups: list[dict]) -> list[str]:
    """Apply the synthesizer's duplicate groups, but only where the findings are kept and on
    the same lines of the same file."""
    by_key = {f["key"]: f for f in findings if f["status"] == "kept"}
    notes = []
    for g in groups:
        keep = by_key.get(g.get("keep", ""))
        if keep is None:
            continue
        members = [keep]
        for k in g.get("merge") or []:
            other = by_key.get(k)
            if other is None or other is keep:
                continue
            if not same_place(keep, other):
                notes.append(f"The synthesizer grouped {k} with {keep['key']}, but they are not "
                             "on the same lines; kept apart.")
                continue
            if _rules(keep) and _rules(other) and not _rules(keep) & _rules(other):
                notes.append(f"The synthesizer grouped {k} with {keep['key']}, but they rest "
                             "on different analyzer rules; kept apart.")
                continue
            members.append(other)
        if len(members) > 1:
            reason = (g.get("reason") or "").strip()
            _merge_group(members, f"synthesizer: {reason}" if reason else "synthesizer")
            for m in members:
                if m["status"] == "dropped":
                    by_key.pop(m["key"], None)
    return notes


# --- filters ----------------------------------------------------------------------------------------
_FENCE = re.compile(r"^```[^\n]*\n|\n?```\s*$")


def _normal_code(text: str) -> str:
    return " ".join(_FENCE.sub("", text.strip()).split())


def drop_weak(findings: list[Finding], threshold: float,
              code_at: Callable[[str, int | None, int | None], str | None]) -> None:
    """Drop kept findings under the confidence threshold, and those whose suggestion is empty
    or only repeats the code already there."""
    for f in findings:
        if f["status"] != "kept":
            continue
        confidence = float(f.get("confidence") or 0)
        if confidence < threshold:
            f["status"] = "dropped"
            f["drop_reason"] = (f"below the confidence threshold ({confidence:.2f} < "
                                f"{threshold:.2f})")
            continue
        suggestion = (f.get("suggestion") or "").strip()
        if not suggestion:
            f["status"] = "dropped"
            f["drop_reason"] = "no suggestion: nothing for the author to act on"
            continue
        existing = code_at(f["file"], f.get("line"), f.get("end_line"))
        if existing and _normal_code(existing) == _normal_code(suggestion):
            f["status"] = "dropped"
            f["drop_reason"] = "the suggestion is identical to the existing code"


def ordered(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITY_RANK[f["severity"]],
                                           -float(f.get("confidence") or 0), f["file"],
                                           f.get("line") or 0, f["key"]))


# --- verdict ------------------------------------------------------------------------------------------
def verdict_findings(kept: list[Finding]) -> list[Finding]:
    """The findings that count for the verdict rules. Style findings (formatting, naming,
    f-string and modern-syntax nits) are the author's to take or leave: however a reviewer
    rates them, they never on their own make a change need discussion or changes."""
    return [f for f in kept if f.get("category") != "style"]


def rule_verdict(kept: list[Finding], *, incomplete: bool = False) -> str:
    """The mildest verdict the findings allow: a critical or high finding needs changes; a
    medium one needs a discussion; low and info findings alone do not block. An
    ``incomplete`` review (part of the change unexamined, or a reviewer that did not finish)
    is never approve: nobody checked what was missed."""
    ranks = {SEVERITY_RANK[f["severity"]] for f in verdict_findings(kept)}
    if ranks & {SEVERITY_RANK["critical"], SEVERITY_RANK["high"]}:
        return "request_changes"
    if SEVERITY_RANK["medium"] in ranks or incomplete:
        return "needs_discussion"
    return "approve"


def combine_verdicts(rule: str, model: str | None) -> str:
    """The model may be stricter than the rules, never milder."""
    if model not in VERDICT_RANK:
        return rule
    return max(rule, model, key=VERDICT_RANK.__getitem__)


def severity_counts(kept: list[Finding]) -> dict[str, int]:
    counts = dict.fromkeys(SEVERITY_RANK, 0)
    for f in kept:
        counts[f["severity"]] += 1
    return counts
