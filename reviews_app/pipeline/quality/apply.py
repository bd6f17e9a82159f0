"""Applying the verifier's answers to the findings, in place, with a trail in ``quality``.

Every change a quality stage makes is recorded on the finding as ``{"stage", "action",
"reason", "before": {field: old value}, "after": {field: new value}}``. Nothing the model
says is taken unchecked: a corrected line must be a line of the new file, a severity below
the rubric's floor for an analyzer-backed injection or credential is raised back, a kind must
be one of ``schema.KINDS``, and a finding the model did not answer for stays as it was.
"""

from __future__ import annotations

from common.secret_keys import mask

from ..schema import KINDS, SEVERITY_RANK
from .rubric import default_kind, floor, stronger

SAFEGUARD, SEVERITY, CATEGORY, CLUSTER = "safeguard", "severity", "category", "cluster"


def note(f: dict, stage: str, action: str, reason: str, before: dict | None = None,
         after: dict | None = None) -> None:
    entry = {"stage": stage, "action": action, "reason": mask(reason.strip())[:2000]}
    if before:
        entry["before"] = before
    if after:
        entry["after"] = after
    f.setdefault("quality", []).append(entry)


def set_kinds(findings: list[dict]) -> None:
    """Every finding gets a kind (its own if valid, else the deterministic default)."""
    for f in findings:
        if f.get("kind") not in KINDS:
            f["kind"] = default_kind(f)


def _known_key(f: dict) -> bool:
    """A key the secrets scanner recognised by its format: text in the change (which the
    verifier reads) must not talk the safeguard out of it."""
    return any(str(r).startswith("secret-") and r != "secret-possible"
               for r in f.get("rules") or ())


def unchecked(findings: list[dict], error: str) -> None:
    for f in findings:
        note(f, SAFEGUARD, "unchecked", f"the safeguard call failed ({error}); kept unchanged")


def _correct(f: dict, c: dict, known: set[int] | None) -> tuple[dict, list[str]]:
    """Apply a correction; returns (before, problems with the parts that were ignored)."""
    before: dict = {}
    problems: list[str] = []
    line, end = c.get("line"), c.get("end_line")
    if line is not None or end is not None:
        new_line = line if line is not None else f.get("line")
        new_end = end if end is not None else (f.get("end_line") if line is None else None)
        if new_end is not None and new_line is not None and new_end < new_line:
            new_end = None
        wanted = [n for n in (new_line, new_end) if n is not None]
        if not wanted or known is None or any(n not in known for n in wanted):
            where = "-".join(str(n) for n in wanted) or "?"
            problems.append(f"the corrected line {where} is not a line of the new file, so the "
                            "line was left as it was")
        elif (new_line, new_end) != (f.get("line"), f.get("end_line")):
            before.update(line=f.get("line"), end_line=f.get("end_line"))
            f["line"], f["end_line"] = new_line, new_end
    for field in ("title", "description"):
        text = mask((c.get(field) or "").strip())
        if text and text != f.get(field):
            before[field] = f.get(field)
            f[field] = text
    return before, problems


def apply_checks(findings: list[dict], checks: list[dict],
                 known: dict[str, set[int]]) -> dict[str, int]:
    """Apply one batch's answers to its findings. Returns counts of what happened."""
    counts = dict.fromkeys(("kept", "corrected", "discarded", "unanswered", "severity",
                            "kind"), 0)
    by_key: dict[str, dict] = {}
    for c in checks:
        by_key.setdefault(str(c.get("key", "")).strip(), c)
    for f in findings:
        c = by_key.get(f["key"])
        if c is None:
            counts["unanswered"] += 1
            note(f, SAFEGUARD, "unchecked", "the safeguard gave no answer for it; kept unchanged")
            continue
        reason = (c.get("reason") or "").strip()
        if c["verdict"] == "discard" and _known_key(f):
            counts["kept"] += 1
            note(f, SAFEGUARD, "keep", "a committed key of a known format is never discarded "
                                       f"(the verifier said: {reason or 'no reason'})")
            continue
        if c["verdict"] == "discard":
            counts["discarded"] += 1
            why = reason or "no reason given"
            f["status"] = "dropped"
            f["drop_reason"] = mask(f"Safeguard: {why}")[:2000]
            note(f, SAFEGUARD, "discard", why)
            continue
        if c["verdict"] == "correct":
            before, problems = _correct(f, c, known.get(f["file"]))
            if before:
                counts["corrected"] += 1
                note(f, SAFEGUARD, "correct", reason or "corrected",
                     before=before, after={k: f.get(k) for k in before})
            else:
                counts["kept"] += 1
                note(f, SAFEGUARD, "keep", reason or "kept (the correction changed nothing)")
            for p in problems:
                note(f, SAFEGUARD, "ignored", p)
        else:
            counts["kept"] += 1
            note(f, SAFEGUARD, "keep", reason or "kept")
        sev = c.get("severity")
        if sev in SEVERITY_RANK and sev != f["severity"]:
            counts["severity"] += 1
            note(f, SEVERITY, "change", reason or "by the rubric",
                 before={"severity": f["severity"]}, after={"severity": sev})
            f["severity"] = sev
        kind = c.get("kind")
        if kind in KINDS and kind != f.get("kind"):
            counts["kind"] += 1
            note(f, CATEGORY, "change", f"the verifier sees it as {kind}",
                 before={"kind": f.get("kind")}, after={"kind": kind})
            f["kind"] = kind
    return counts


def apply_floors(findings: list[dict]) -> int:
    """Raise kept findings below the rubric's floor (an analyzer-backed injection or
    credential is at least high). Returns how many were raised."""
    raised = 0
    for f in findings:
        if f["status"] != "kept":
            continue
        least = floor(f)
        if least is None:
            continue
        sev, why = least
        if stronger(sev, f["severity"]) != f["severity"]:
            note(f, SEVERITY, "change", f"the rubric rates {why} at least {sev}",
                 before={"severity": f["severity"]}, after={"severity": sev})
            f["severity"] = sev
            raised += 1
    return raised
