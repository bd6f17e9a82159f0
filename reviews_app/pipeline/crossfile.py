"""The cross-file (pull-request level) check: one ``checker`` call over the whole change that
reports change-level problems only (duplicated implementations across files, inconsistent
error handling between files, configuration drift, changed code without tests or docs).

The prompt lists every file and the changed lines (clipped to ``max_prompt_chars``), plus the
mechanical observations of ``changeset`` as leads. The offline model restates those
observations and nothing else. Plain Python, no Django.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from common.secret_keys import mask_lines

from . import changeset
from .diffs.hunks import numbered_patch
from .schema import Severity

SCHEMA = "CrossFileAnswer"
OBSERVATIONS = "Mechanical observations"
MAX_LOCATIONS = 50
Kind = Literal["security", "bug", "performance", "maintainability", "style", "documentation",
               "tests"]


def _lower(value):
    return value.strip().lower() if isinstance(value, str) else value


class Location(BaseModel):
    file: str = Field(min_length=1, max_length=1000)
    line: int | None = Field(default=None, ge=0)
    end_line: int | None = Field(default=None, ge=0)


class CrossFileFinding(BaseModel):
    """A problem of the change as a whole; ``file``/``line`` is its main place, ``locations``
    the other places it involves."""

    kind: Kind = "maintainability"
    severity: Severity
    file: str = Field(min_length=1, max_length=1000)
    line: int | None = Field(default=None, ge=0)
    end_line: int | None = Field(default=None, ge=0)
    locations: list[Location] = Field(default_factory=list)
    title: str = Field(min_length=1, max_length=300)
    description: str = ""
    suggestion: str = ""
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)

    _norm = field_validator("kind", "severity", mode="before")(_lower)


class CrossFileAnswer(BaseModel):
    findings: list[CrossFileFinding] = Field(default_factory=list)


SYSTEM = """You check a code change as a whole, across its files, beside reviewers who read
each file on its own. Report only problems that need more than one file to see, or that
concern the change as a whole:
- the same logic implemented twice in different files (name both places);
- error handling that differs between files doing the same kind of work (one raises, one
  returns None; one logs, one swallows);
- configuration drift: a setting, environment variable or dependency version added or changed
  in one configuration file or manifest and not in its siblings;
- changed behaviour without tests, or a changed public interface without its documentation.
Do not report problems inside a single file: the other reviewers do that. Each finding has a
kind (maintainability, bug, tests, documentation, security, performance or style), a
severity (critical, high, medium, low, info: most change-level problems are low or medium),
its main file and line exactly as shown, every other place it involves in `locations`
(file, line), a title, a description, a concrete suggestion and a confidence from 0 to 1.
The mechanical observations are leads found by simple rules: keep the ones that are real
problems, drop the others. An empty list is a good answer for a coherent change."""


def _fenced(data) -> str:
    return "```json\n" + json.dumps(data, indent=1, ensure_ascii=False) + "\n```"


def _block(f: dict) -> str:
    patch = "\n".join(mask_lines(numbered_patch(f).split("\n")))
    return f"### {f['path']}\n```diff\n{patch}\n```"


def messages(label: str, files: list[dict], observed: list[dict],
             budget: int) -> tuple[list[dict[str, str]], list[str]]:
    """The checker's prompt, and the paths whose changed lines did not fit in ``budget``
    characters (they are still listed by name)."""
    listing = "\n".join(
        f"- {f['path']} ({f.get('status', 'modified')}, {changeset.kind_of(f['path'])}, "
        f"+{f.get('added', 0)} -{f.get('removed', 0)})" for f in files)
    blocks, left_out, used = [], [], len(listing)
    for f in files:
        block = _block(f)
        if used + len(block) > budget:
            left_out.append(f["path"])
            continue
        blocks.append(block)
        used += len(block)
    shown = [{k: o[k] for k in ("check", "kind", "severity", "file", "line", "end_line",
                                "locations", "title", "description", "suggestion",
                                "confidence")} for o in observed]
    body = (f"## Change\n{label}\n\n## Changed files\n{listing}\n\n"
            f"## {OBSERVATIONS}\n{_fenced(shown) if shown else 'None.'}\n\n"
            "## Changed lines\n" + ("\n\n".join(blocks) or "None shown.")
            + (f"\n\n(Left out for size: {', '.join(left_out)}.)" if left_out else ""))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}], left_out


def to_findings(answer: CrossFileAnswer, paths: set[str]) -> list[dict]:
    """The answer's findings as raw finding dicts (category "architecture": the change-level
    lens; ``kind`` says what the problem is). Locations outside the change or repeating the
    main place are left out; a finding whose own file is not in the change stays, and is
    dropped by the caller with a reason."""
    out = []
    for item in answer.findings:
        data = item.model_dump()
        locations, seen = [], {(data["file"], data["line"])}
        for loc in data.pop("locations"):
            where = (loc["file"], loc["line"])
            if loc["file"] in paths and where not in seen and len(locations) < MAX_LOCATIONS:
                seen.add(where)
                locations.append(loc)
        out.append({**data, "category": "architecture", "locations": locations, "rules": []})
    return out


# --- the offline model ------------------------------------------------------------------------
def offline(msgs) -> dict:
    """Restate the mechanical observations: the offline model reads no code itself."""
    from agents_app.llm.offline import sections

    from .offline_review import _json

    items = _json(sections(msgs).get(OBSERVATIONS, ""))
    findings = []
    for o in items if isinstance(items, list) else ():
        if not isinstance(o, dict) or not o.get("file") or not o.get("title"):
            continue
        findings.append({
            "kind": o.get("kind", "maintainability"), "severity": o.get("severity", "low"),
            "file": o["file"], "line": o.get("line"), "end_line": o.get("end_line"),
            "locations": o.get("locations") or [], "title": o["title"],
            "description": f"{o.get('description', '')} Offline check: a mechanical rule "
                           "found this; no language model read the change.".strip(),
            "suggestion": o.get("suggestion", ""), "confidence": o.get("confidence", 0.6)})
    return {"findings": findings}


def register() -> None:
    from agents_app.llm import offline as offline_model

    offline_model.register(SCHEMA, offline)
