"""oxlint: JavaScript and TypeScript correctness. Its ``correctness`` rules are errors and its
``suspicious`` rules warnings; no configuration file of the change is read (``-c`` names an
empty one we write, nested configs and ignore files are off).

How its results are graded (category, severity):

==============================  ==============  ===========================================
oxlint result                   grade           why
==============================  ==============  ===========================================
error (correctness rule)        architecture,   code that is wrong or useless: a real bug
                                medium
warning (suspicious rule)       architecture,   most likely wrong, sometimes intended
                                low
no-unused-vars, no-debugger,    architecture,   clutter, not a bug
no-useless-*, no-empty*         low
parse error of a whole file     architecture,   the file does not parse: nothing else ran
                                high
parse error / unused name in a  (dropped)       an artefact of cutting the file into hunks
fragment
==============================  ==============  ===========================================
"""

from __future__ import annotations

import re
from pathlib import Path

from .base import Tool, item, unit_for

_CODE = re.compile(r"^(?:([\w-]+)\()?([\w/@-]+)\)?$")
LOW_RULES = frozenset({"no-unused-vars", "no-debugger", "no-empty", "no-empty-file",
                       "no-empty-pattern", "no-useless-escape", "no-useless-catch",
                       "no-useless-rename", "no-useless-spread", "no-unused-labels",
                       "no-unused-private-class-members", "no-unused-expressions"})
FRAGMENT_ARTEFACTS = frozenset({"no-unused-vars", "no-unused-private-class-members",
                                "no-unused-labels", "no-empty-file", "no-undef"})
SYNTAX_RULE = "syntax-error"


def _cmd(exe: str, names: list[str], work: Path) -> list[str]:
    config = work / "oxlintrc.json"
    config.write_text("{}\n", encoding="utf-8")
    return [exe, "-c", str(config), "--disable-nested-config", "--no-ignore", "--format",
            "json", "-A", "all", "-D", "correctness", "-W", "suspicious", *names]


def _rule(code: str) -> str:
    m = _CODE.match(code or "")
    return m.group(2) if m else code


def grade(rule: str, level: str) -> tuple[str, str]:
    if rule == SYNTAX_RULE:
        return "architecture", "high"
    if rule in LOW_RULES or level != "error":
        return "architecture", "low"
    return "architecture", "medium"


def parse(data, units, inputs, errors: list[str]) -> list[dict]:
    out: list[dict] = []
    if not isinstance(data, dict):
        return out
    syntax_seen: set[str] = set()
    for d in data.get("diagnostics") or []:
        if not isinstance(d, dict):
            continue
        unit = unit_for(units, d.get("filename"))
        if unit is None:
            continue
        code = str(d.get("code") or "")
        rule = _rule(code) if code else SYNTAX_RULE
        if unit.fragment and rule in FRAGMENT_ARTEFACTS | {SYNTAX_RULE}:
            continue
        if rule == SYNTAX_RULE:
            if unit.name in syntax_seen:
                continue
            syntax_seen.add(unit.name)
        labels = [lb for lb in d.get("labels") or [] if isinstance(lb, dict)]
        spans: list[dict] = [lb["span"] for lb in labels if isinstance(lb.get("span"), dict)]
        lines: list[int] = [s["line"] for s in spans if isinstance(s.get("line"), int)]
        category, severity = grade(rule, str(d.get("severity") or ""))
        message = str(d.get("message") or "")
        if rule == SYNTAX_RULE:
            message = f"The file does not parse: {message}"
        ev = item(unit, inputs, tool="oxlint", rule=rule, category=category,
                  severity=severity, confidence=0.8 if severity != "low" else 0.65,
                  line=min(lines) if lines else None, end=max(lines) if lines else None,
                  message=message, url=str(d.get("url") or "") or None,
                  tool_fix=str(d.get("help") or "") or None)
        if ev is not None:
            out.append(ev)
    return out


OXLINT = Tool(name="oxlint", package="oxlint", kinds=frozenset({"javascript", "typescript"}),
              command=_cmd, parse=parse,
              about="JavaScript, TypeScript: correctness and suspicious-code lints")
