"""The review-rules guardian: one ``checker`` call for every rule that applies to the change,
over the added code of the files each rule covers, reporting violations as findings that
name the rule. A rule with a ``pattern`` is also checked deterministically (``check``),
with or without a model; the two are joined, one finding per place.

The offline model reads no code: it checks no rule and says so (``not_checked``), so a rule
without a pattern is reported as *not checked*, never as passed. Plain Python, no Django.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from common.secret_keys import mask_lines

from ..pipeline.diffs.hunks import numbered_patch

SCHEMA = "GuardianAnswer"
RULES = "Rules"
OFFLINE_REASON = "the offline model reads no code"


def _lower(value):
    return value.strip().lower() if isinstance(value, str) else value


class Violation(BaseModel):
    rule: str = Field(min_length=1, max_length=60, description="The id of the rule broken.")
    file: str = Field(min_length=1, max_length=1000)
    line: int | None = Field(default=None, ge=0)
    end_line: int | None = Field(default=None, ge=0)
    kind: Literal["security", "bug", "performance", "maintainability", "style",
                  "documentation", "tests"] = "maintainability"
    title: str = Field(min_length=1, max_length=300)
    description: str = ""
    suggestion: str = ""
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)

    _norm = field_validator("kind", mode="before")(_lower)


class NotChecked(BaseModel):
    rule: str = Field(min_length=1, max_length=60)
    reason: str = ""


class GuardianAnswer(BaseModel):
    findings: list[Violation] = Field(default_factory=list)
    not_checked: list[NotChecked] = Field(default_factory=list)


SYSTEM = """You are the guardian of a team's review rules. Each rule is a plain-language
requirement with an id, a severity and the files it covers. Check the lines this change adds
in those files against each rule, and report every place that breaks one: the rule's id in
`rule`, the file and new-file line exactly as shown, a title that names the rule, a
description of how the code breaks it, a concrete suggestion that follows the rule, and a
confidence from 0 to 1. Report only clear breaks of the rules as written, not general advice,
and only in the files listed for that rule. If you cannot judge a rule from what is shown,
list it in `not_checked` with the reason. An empty list of findings means every rule holds."""


def _fenced(data) -> str:
    return "```json\n" + json.dumps(data, indent=1, ensure_ascii=False) + "\n```"


def messages(label: str, files: list[dict], rules: list[tuple[dict, list[str]]],
             budget: int) -> tuple[list[dict[str, str]], list[str]]:
    """The guardian's prompt and the paths left out for size."""
    listed = [{k: r[k] for k in ("id", "title", "severity", "path_glob", "text")}
              for r, _ in rules]
    by_path: dict[str, list[str]] = {}
    for rule, paths in rules:
        for p in paths:
            by_path.setdefault(p, []).append(rule["id"])
    head = f"## Change\n{label}\n\n## {RULES}\n{_fenced(listed)}\n\n## Files\n"
    blocks, left_out, used = [], [], len(head)
    for f in files:
        if f["path"] not in by_path:
            continue
        patch = "\n".join(mask_lines(numbered_patch(f).split("\n")))
        block = (f"### {f['path']} (rules: {', '.join(by_path[f['path']])})\n```diff\n"
                 f"{patch}\n```")
        if used + len(block) > budget and blocks:
            left_out.append(f["path"])
            continue
        blocks.append(block)
        used += len(block)
    body = head + "\n\n".join(blocks) + (
        f"\n\n(Left out for size: {', '.join(left_out)}.)" if left_out else "")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}], left_out


def rule_ref(rule: dict, how: str) -> dict:
    """What a finding keeps of the rule it breaks (``Finding.rule``)."""
    return {"id": rule["id"], "title": rule["title"], "text": rule["text"],
            "source": rule["source"], "how": how}


def _finding(rule: dict, path: str, line: int | None, end_line: int | None, *, how: str,
             title: str, description: str, suggestion: str, confidence: float,
             kind: str = "maintainability") -> dict:
    return {"category": "architecture", "kind": kind, "severity": rule["severity"],
            "file": path, "line": line, "end_line": end_line, "title": title,
            "description": description, "suggestion": suggestion, "confidence": confidence,
            "rules": [], "locations": [], "rule": rule_ref(rule, how)}


def model_findings(answer: GuardianAnswer, rules: list[tuple[dict, list[str]]]) -> list[dict]:
    """The model's violations as finding dicts. A violation naming an unknown rule is left
    out; one in a file the rule does not cover is returned with ``drop_reason`` set."""
    known = {r["id"]: (r, set(paths)) for r, paths in rules}
    out = []
    for v in answer.findings:
        if v.rule.strip() not in known:
            continue
        rule, paths = known[v.rule.strip()]
        title = v.title.strip()
        if rule["title"].lower() not in title.lower():
            title = f"Breaks rule \u201c{rule['title']}\u201d: {title}"
        f = _finding(rule, v.file, v.line, v.end_line, how="model", title=title[:300],
                     description=v.description, suggestion=v.suggestion or
                     f"Follow the rule: {rule['text']}", confidence=v.confidence, kind=v.kind)
        if v.file not in paths:
            f["drop_reason"] = "names a file the rule does not cover"
        out.append(f)
    return out


def pattern_findings(rule: dict, hits: dict[str, list[int]], taken: set[tuple[str, int]],
                     compiled_text: str) -> list[dict]:
    """One finding per file for a pattern rule's hits that no model finding covers already;
    the other matching lines of the file go in ``locations``."""
    out = []
    for path, lines in hits.items():
        free = [n for n in lines if (path, n) not in taken]
        if not free:
            continue
        f = _finding(
            rule, path, free[0], None, how="pattern",
            title=f"Breaks rule \u201c{rule['title']}\u201d",
            description=(f"Line {free[0]}" + (f" and {len(free) - 1} more match" if len(free) > 1
                                              else " matches")
                         + f" the rule's pattern `{compiled_text}`. The rule: "
                         f"{rule['text']}"),
            suggestion=f"Change the code so it follows the rule: {rule['text']}",
            confidence=0.9)
        f["locations"] = [{"file": path, "line": n, "end_line": None} for n in free[1:]]
        out.append(f)
    return out


def covered(findings: list[dict]) -> set[tuple[str, str, int]]:
    """(rule id, file, line) of every line the model's findings cover."""
    out = set()
    for f in findings:
        if f.get("line"):
            end = max(int(f["line"]), int(f.get("end_line") or f["line"]))
            out |= {(f["rule"]["id"], f["file"], n) for n in range(int(f["line"]), end + 1)}
    return out


# --- the offline model ------------------------------------------------------------------------
def offline(msgs) -> dict:
    """Checks nothing, and says so for every rule it was given."""
    from agents_app.llm.offline import sections

    from ..pipeline.offline_review import _json

    rules = _json(sections(msgs).get(RULES, ""))
    return {"findings": [], "not_checked": [
        {"rule": str(r.get("id")), "reason": OFFLINE_REASON}
        for r in (rules if isinstance(rules, list) else ()) if isinstance(r, dict)
        and r.get("id")]}


def register() -> None:
    from agents_app.llm import offline as offline_model

    offline_model.register(SCHEMA, offline)

