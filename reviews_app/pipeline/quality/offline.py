"""The offline model's verifier: a deterministic stand-in for the safeguard, severity and
category passes.

It reads no code, so it only discards what it can prove wrong from the prompt: a finding
whose line is not a line of the new file as the change shows it. Everything else is kept
(findings on added lines always are). Severity follows the rubric's floors from the analyzer
rule ids and the title (an injection or a hard-coded credential is at least high; nothing is
lowered), and the kind is the deterministic default from the rules, the lens and the path.
"""

from __future__ import annotations

from agents_app.llm.offline import sections

from ..offline_review import _json
from ..schema import KINDS, SEVERITY_RANK
from .prompt import FINDINGS_SECTION
from .rubric import default_kind, floor, stronger

KEEP = "offline stand-in: its line is part of the new file; no model checked the reasoning"


def verifier(messages) -> dict:
    checks = []
    for item in _json(sections(messages).get(FINDINGS_SECTION, "")):
        if not isinstance(item, dict) or not item.get("key"):
            continue
        kind = item.get("kind") if item.get("kind") in KINDS else default_kind(item)
        check: dict = {"key": str(item["key"]), "kind": kind}
        if item.get("line") and item.get("line_exists") is False:
            check.update(verdict="discard", reason=f"line {item['line']} is not a line of the "
                                                   "new file as the change shows it")
            checks.append(check)
            continue
        sev = item.get("severity") if item.get("severity") in SEVERITY_RANK else "low"
        least = floor({**item, "kind": kind})
        reason = KEEP if item.get("line") else "offline stand-in: a file-level finding, kept"
        if least and stronger(least[0], sev) != sev:
            sev = least[0]
            reason += f"; the rubric rates {least[1]} at least {least[0]}"
        check.update(verdict="keep", reason=reason, severity=sev)
        checks.append(check)
    return {"checks": checks}
