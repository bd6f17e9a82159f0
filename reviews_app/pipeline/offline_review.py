"""The offline model's code review: analyzer results restated as findings.

With no provider key, each reviewer turns the analyzer results of its category (ruff and bandit
for Python; semgrep with our rules, oxlint, shellcheck, hadolint; the secrets scanners) into
findings (severity, lines and a concrete fix from the analyzers), reflection upgrades a
finding when a colleague rates the same lines higher, and synthesis follows the verdict
rules. It reads nothing but the prompt's analyzer results, so it is a real, repeatable
review of the languages the analyzers read, that examines no file itself (its run lists ``offline_roles``, and the
coverage counts only what the analyzers read), and it says plainly that no language model
read the change.
"""

from __future__ import annotations

import re

from agents_app.llm.offline import sections
from agents_app.patterns import safe_json

from .prompts import ANALYZERS_RAN
from .schema import SEVERITY_RANK

_JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)
NOTE = "Offline review: restated from a static analyzer result; no language model read this."


def _json(body: str):
    m = _JSON_BLOCK.search(body or "")
    if not m:
        return []
    try:
        return safe_json.loads(m.group(1))
    except ValueError:
        return []


def reviewer(messages) -> dict:
    secs = sections(messages)
    category = (secs.get("Reviewer") or "").strip()
    findings = []
    for e in _json(secs.get("Analyzer evidence", "")):
        if e.get("category") != category:
            continue
        where = f"line {e['line']}" if e.get("line") else "this file"
        findings.append({
            "category": category,
            "severity": e.get("severity", "low"),
            "file": e["file"],
            "line": e.get("line"),
            "end_line": e.get("end_line"),
            "title": f"{e.get('rule', '')}: {e.get('message', '')}"[:200],
            "description": f"{e.get('tool', 'analyzer')} reports {e.get('rule', '')} at {where}: "
                           f"{e.get('message', '').rstrip('.')}. {NOTE}",
            "suggestion": e.get("fix") or "Address the analyzer's report.",
            "confidence": float(e.get("confidence", 0.6)),
            "rules": [e.get("rule", "")] if e.get("rule") else [],
        })
    return {"findings": findings}


def _overlaps(a: dict, b: dict) -> bool:
    if a.get("file") != b.get("file") or not a.get("line") or not b.get("line"):
        return False
    a_end = a.get("end_line") or a["line"]
    b_end = b.get("end_line") or b["line"]
    return a["line"] <= b_end and b["line"] <= a_end


def reflection(messages) -> dict:
    secs = sections(messages)
    own = _json(secs.get("Your findings", ""))
    others = _json(secs.get("Colleagues' findings", ""))
    amendments = []
    for mine in own:
        if mine.get("category") == "style":
            continue  # a readability note does not become urgent because the line is risky
        stronger = [o for o in others if _overlaps(mine, o)
                    and SEVERITY_RANK.get(o.get("severity"), 9) < SEVERITY_RANK[mine["severity"]]]
        if stronger:
            top = min(stronger, key=lambda o: SEVERITY_RANK[o["severity"]])
            amendments.append({
                "action": "upgrade", "target": mine["key"], "severity": top["severity"],
                "reason": f"{top['reviewer']} rates the same lines {top['severity']} "
                          f"({top['key']}); the problems compound."})
    return {"amendments": amendments}


def synthesis(messages) -> dict:
    secs = sections(messages)
    findings = _json(secs.get("Findings", ""))
    verdict = (secs.get("Verdict by the rules") or "approve").strip()
    counts: dict[str, int] = {}
    for f in findings:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    found = ", ".join(f"{counts[s]} {s}" for s in SEVERITY_RANK if s in counts) or "nothing"
    files = len({f["file"] for f in findings})
    ran = secs.get(ANALYZERS_RAN)
    names = [n.strip() for n in (ran or "").split(",") if n.strip() and n.strip() != "none"]
    source = ("the analyzers' results on the changed lines" if ran is None else
              f"the results of the analyzers that ran ({', '.join(names)}) on the changed lines"
              if names else "the results on the changed lines (no analyzer ran)")
    summary = (f"Offline, analyzer-based review: {source}, restated by the built-in offline "
               f"model (no language model read the change). Kept: {found}"
               + (f" across {files} file(s)" if files else "") +
               f". The verdict follows the severity rules: {verdict.replace('_', ' ')}. "
               "Files no analyzer reads were not reviewed (see the coverage): this model "
               "reads no code; set a provider key for a model review.")
    return {"duplicates": [], "verdict": verdict, "summary": summary}


def implemented(messages) -> dict:
    """The check of earlier findings against the new code: the mechanical comparison's guess
    (this model reads no code, so it cannot judge better)."""
    from .rounds import CHECK_SECTION

    items = _json(sections(messages).get(CHECK_SECTION, ""))
    return {"items": [{"key": i.get("key", ""), "status": i.get("guess", "not"),
                       "reason": f"offline model: kept the mechanical comparison's answer "
                                 f"({i.get('why', '')})"}
                      for i in items if isinstance(i, dict)
                      and i.get("guess") in ("implemented", "partially", "not")]}


def register() -> None:
    from agents_app.llm import offline

    from ..rules import guardian
    from . import crossfile
    from .quality.offline import verifier

    offline.register("ReviewerFindings", reviewer)
    offline.register("ReflectionAnswer", reflection)
    offline.register("SynthesisAnswer", synthesis)
    offline.register("ImplementedCheck", implemented)
    offline.register("SafeguardAnswer", verifier)
    crossfile.register()  # the change-level checks (pattern/checks.py)
    guardian.register()
