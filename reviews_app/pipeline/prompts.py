"""What the reviewers, their reflections and the synthesizer are told (our own wording).

User messages are made of ``## Section`` blocks; the offline model reads the same sections.
JSON payloads sit in fenced blocks so model and offline brain parse them the same way.
"""

from __future__ import annotations

import json

from common.secret_keys import mask_lines

from ..memories import match as team_memories
from .diffs import numbered_patch

FOCUS = {
    "security": (
        "You review code changes for security. Look for injection (SQL, shell, template, "
        "path), broken authentication or authorization, secrets in code, weak or misused "
        "cryptography, unsafe deserialization, server-side request forgery, and data exposed "
        "in logs or errors."),
    "architecture": (
        "You review code changes for design and correctness. Look for logic errors, error "
        "handling that hides failures, resource leaks, race conditions, tight coupling, "
        "responsibilities in the wrong place, and interfaces that are hard to use correctly."),
    "style": (
        "You review code changes for readability. Look for misleading names, missing or wrong "
        "documentation of public behaviour, needless complexity, dead or duplicated code, and "
        "inconsistency with the surrounding code. Do not report formatting a formatter fixes."),
}

REVIEWER_RULES = """Report only problems in the lines this change adds or modifies, unless the
change makes existing code wrong. Every finding needs: category "{category}", a severity
(critical, high, medium, low or info), the file path exactly as shown, the new-file line
number (and end_line for a range), a short title, a description of the problem and its
consequence, a concrete suggestion (replacement code or a precise instruction, never a
restatement of the current code), and a confidence between 0 and 1. The analyzer results
are evidence, not verdicts: keep the real problems among them (listing their ids in
`rules`), ignore false positives, and add what the analyzers cannot see. An empty list is a
good answer for a clean change."""

REFLECTION_SYSTEM = """You are the {category} reviewer of a code change, reading what your
colleagues found. Reconsider your own findings in their light and answer with amendments:
"upgrade" or "downgrade" a finding's severity (yours or a colleague's) when their context
changes how serious it is; "retract" one of your own findings that turns out to be wrong;
"add" a finding you missed. Name the finding by its id in `target` (not for add) and give a
reason for every amendment. No amendments is a fine answer when nothing changes."""

SYNTHESIZER_SYSTEM = """You write the final code review from the findings of three specialist
reviewers (security, architecture, style), after their cross-examination. Group findings
that describe the same problem at the same place (`duplicates`, by id; the strongest one in
`keep`). Give a verdict: "approve" (nothing needs to change), "request_changes" (something
must change before merging) or "needs_discussion" (a judgement call for the team). The verdict
cannot be milder than the one the rules give. Write a summary of two to five sentences for
the author: what the change does well, what matters most, and what to fix first."""


def _fenced_json(data) -> str:
    return "```json\n" + json.dumps(data, indent=1, ensure_ascii=False) + "\n```"


def _numbered_content(content: str) -> str:
    lines = content.split("\n")
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}} {line}" for i, line in enumerate(lines, 1))


def _masked(text: str) -> str:
    return "\n".join(mask_lines(text.split("\n")))


def file_block(file: dict) -> str:
    """One file for a reviewer. Secrets in it are shortened (``secret_keys``): the reviewers
    need to know a key is there, not its value, and the prompt is kept in the trace."""
    head = f"### {file['path']} ({file['status']}, {file['language'] or 'text'})"
    parts = [head, "Changed lines:", "```diff", _masked(numbered_patch(file)), "```"]
    if file.get("mode") == "heavy" and file.get("content") is not None:
        parts += ["The whole new file:", "```", _masked(_numbered_content(file["content"])),
                  "```"]
    return "\n".join(parts)


def reviewer_messages(category: str, label: str, files: list[dict], evidence: list[dict],
                      memories: list[dict] | None = None) -> list[dict[str, str]]:
    """A reviewer's prompt. ``memories``: the team's active memories (memories/match.py);
    those matching these files are listed under "Team memories" (the section is left out when
    none does)."""
    system = FOCUS[category] + "\n\n" + REVIEWER_RULES.format(category=category)
    remembered = team_memories.prompt_section(memories, [f["path"] for f in files])
    body = (f"## Reviewer\n{category}\n\n## Change\n{label}\n\n"
            + (f"## Team memories\n{remembered}\n\n" if remembered else "")
            + f"## Analyzer evidence\n{_fenced_json(evidence) if evidence else 'None.'}\n\n"
            "## Files\n" + "\n\n".join(file_block(f) for f in files))
    return [{"role": "system", "content": system}, {"role": "user", "content": body}]


def _brief(f: dict) -> dict:
    return {k: f.get(k) for k in ("key", "reviewer", "category", "severity", "file", "line",
                                  "end_line", "title", "description", "suggestion",
                                  "confidence", "rules")}


def reflection_messages(category: str, own: list[dict],
                        colleagues: list[dict]) -> list[dict[str, str]]:
    body = (f"## Reviewer\n{category}\n\n"
            f"## Your findings\n{_fenced_json([_brief(f) for f in own])}\n\n"
            f"## Colleagues' findings\n{_fenced_json([_brief(f) for f in colleagues])}")
    return [{"role": "system", "content": REFLECTION_SYSTEM.format(category=category)},
            {"role": "user", "content": body}]


ANALYZERS_RAN = "Analyzers that ran"  # a section the offline synthesizer reads too


def synthesis_messages(label: str, findings: list[dict], rule_verdict: str,
                       reviewers: dict[str, dict], coverage_notes: list[str],
                       analyzers: list[str] | None = None) -> list[dict[str, str]]:
    status = "\n".join(f"- {name}: {r['status']}" + (f" ({r['error']})" if r.get("error") else "")
                       for name, r in reviewers.items())
    ran = ("" if analyzers is None else
           f"## {ANALYZERS_RAN}\n{', '.join(analyzers) or 'none'}\n\n")
    body = (f"## Change\n{label}\n\n{ran}"
            f"## Findings\n{_fenced_json([_brief(f) for f in findings])}\n\n"
            f"## Verdict by the rules\n{rule_verdict}\n\n"
            f"## Reviewers\n{status}\n\n"
            f"## Coverage\n{chr(10).join(coverage_notes) or 'Every file was reviewed in full.'}")
    return [{"role": "system", "content": SYNTHESIZER_SYSTEM}, {"role": "user", "content": body}]
