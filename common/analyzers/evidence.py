"""Turning ruff's and bandit's JSON into evidence items: lines mapped back to the new file,
fragment artefacts dropped, the policy's category and severity, secrets masked, and one item
for a finding both tools report."""

from __future__ import annotations

from pathlib import Path

from ..secret_keys import mask
from .fragments import Unit
from .inputs import AnalyzerInput
from .rules import (
    BANDIT_CONFIDENCE,
    BANDIT_RULES,
    BANDIT_SEVERITY,
    CRITICAL_BANDIT,
    FRAGMENT_ARTEFACTS,
    RULE_RE,
    SYNTAX_CODES,
    SYNTAX_RULE,
    ruff_policy,
    rule_parts,
    rule_policy,
)


def _changed(inp: AnalyzerInput, line: int | None, end: int | None) -> bool:
    if inp.changed_lines is None:
        return True
    if line is None:
        return False
    return any(n in inp.changed_lines for n in range(line, max(line, end or line) + 1))


def _mapper(unit: Unit):
    def to_new(n) -> int | None:
        if not isinstance(n, int):
            return None
        if unit.line_map is None:
            return n
        return unit.line_map.get(n)
    return to_new


def _evidence(unit: Unit, inp: AnalyzerInput, *, tool: str, rule: str, category: str,
              severity: str, confidence: float, line: int | None, end: int | None,
              message: str, url: str | None, tool_fix: str | None = None) -> dict:
    if end is not None and line is not None and end < line:
        end = line
    return {"tool": tool, "rule": rule, "category": category, "severity": severity,
            "confidence": confidence, "file": inp.path, "line": line,
            "end_line": end if end is not None else line,
            # bandit quotes the value it flags ("hardcoded password: '...'"): never whole.
            "message": mask(message), "url": url or "",
            "on_changed_line": _changed(inp, line, end),
            "tool_fix": mask(tool_fix) if tool_fix else tool_fix}


def from_ruff(data, units: dict[str, Unit], inputs: list[AnalyzerInput]) -> list[dict]:
    out: list[dict] = []
    syntax_seen: set[str] = set()
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        unit = units.get(Path(str(item.get("filename") or "")).name)
        if unit is None:
            continue
        code = str(item.get("code") or "")
        message = str(item.get("message") or "")
        syntax = code in SYNTAX_CODES or (not RULE_RE.match(code)
                                           and "syntax" in (message + code).lower())
        if syntax and "syntax was added in python" in message.lower():
            continue  # valid on a newer Python than --target-version: not an error we know of
        if syntax:
            # A fragment's syntax errors come from cutting it out; a whole file's is real,
            # reported once (the parser's follow-up errors add nothing).
            if unit.fragment or unit.name in syntax_seen:
                continue
            syntax_seen.add(unit.name)
            code, message = SYNTAX_RULE, f"SyntaxError: {message}"
        if unit.fragment and code in FRAGMENT_ARTEFACTS:
            continue
        to_new = _mapper(unit)
        line = to_new((item.get("location") or {}).get("row"))
        if line is None:
            continue  # a synthetic line of a fragment
        end = to_new((item.get("end_location") or {}).get("row")) or line
        fix = item.get("fix") if isinstance(item.get("fix"), dict) else {}
        prefix, _ = rule_parts(code)
        out.append(_evidence(
            unit, inputs[unit.index], tool="ruff", rule=code, category=ruff_policy(code)[0],
            severity=ruff_policy(code)[1],
            confidence=0.8 if prefix in ("S", "B", "F") or code == SYNTAX_RULE else 0.7,
            line=line, end=end, message=message, url=item.get("url"),
            tool_fix=(fix or {}).get("message") or None))
    return out


def from_bandit(data, units: dict[str, Unit], inputs: list[AnalyzerInput],
                 errors: list[str]) -> list[dict]:
    out: list[dict] = []
    if not isinstance(data, dict):
        return out
    for err in data.get("errors") or []:
        unit = units.get(Path(str((err or {}).get("filename") or "")).name)
        # Fragments that do not parse are expected (see the module notes); a whole file that
        # bandit cannot read has not been security-checked by it, which reviewers should know.
        if unit is not None and not unit.fragment:
            errors.append(f"bandit skipped {inputs[unit.index].path}: "
                          f"{(err or {}).get('reason') or 'it could not be parsed'}.")
    for item in data.get("results") or []:
        if not isinstance(item, dict):
            continue
        unit = units.get(Path(str(item.get("filename") or "")).name)
        if unit is None:
            continue
        to_new = _mapper(unit)
        line = to_new(item.get("line_number"))
        if line is None:
            continue
        ends = [to_new(n) for n in item.get("line_range") or []]
        end = max([n for n in ends if n is not None] or [line])
        rule = str(item.get("test_id") or "")
        sev = str(item.get("issue_severity") or "").upper()
        conf = str(item.get("issue_confidence") or "").upper()
        category, severity = rule_policy(BANDIT_RULES, rule) or (
            "security", BANDIT_SEVERITY.get(sev, "low"))
        if rule in CRITICAL_BANDIT and sev == "HIGH" and conf == "HIGH":
            severity = "critical"
        out.append(_evidence(
            unit, inputs[unit.index], tool="bandit", rule=rule, category=category,
            severity=severity, confidence=BANDIT_CONFIDENCE.get(conf, 0.5), line=line,
            end=end, message=str(item.get("issue_text") or ""), url=item.get("more_info")))
    return out


_SEVERITY_ORDER = ("critical", "high", "medium", "low", "info")


def merge(ruff: list[dict], bandit: list[dict]) -> list[dict]:
    """One item per finding that both tools report (ruff S123 is bandit's B123): bandit's
    text and link, the stronger of the two severities, marked ``bandit+ruff``."""
    kept = []
    for r in ruff:
        prefix, num = rule_parts(r["rule"])
        twin = None
        if prefix == "S":
            for b in bandit:
                if (b["file"] == r["file"] and b["rule"] == f"B{num}"
                        and b["line"] <= (r["end_line"] or r["line"])
                        and r["line"] <= (b["end_line"] or b["line"])
                        and b["tool"] == "bandit"):
                    twin = b
                    break
        if twin is None:
            kept.append(r)
            continue
        twin["tool"] = "bandit+ruff"
        # Bandit grades some injection risks (SQL built with %, eval) only medium; ruff's
        # table rates them high. Keep the stronger grade: the reviewers may downgrade it.
        if _SEVERITY_ORDER.index(r["severity"]) < _SEVERITY_ORDER.index(twin["severity"]):
            twin["severity"] = r["severity"]
        twin["confidence"] = max(twin["confidence"], r["confidence"])
        twin["on_changed_line"] = twin["on_changed_line"] or r["on_changed_line"]
        twin["tool_fix"] = twin["tool_fix"] or r["tool_fix"]
    return kept + bandit
