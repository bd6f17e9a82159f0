"""The Markdown export of a finished review: a report in which untrusted text cannot create
structure (escaping in ``markdown_text``)."""

from __future__ import annotations

from ..schema import SEVERITIES
from .common import (
    also_at,
    analyzers_ran,
    as_line,
    notes_for,
    ordered,
    select_findings,
    severity_counts,
    severity_of,
    source_fields,
    triage_text,
    verdict_fields,
)
from .markdown_text import md_block, md_code, md_fence, md_inline

_VERDICT_LABELS = {
    "approve": "Approve",
    "needs_discussion": "Needs discussion",
    "request_changes": "Request changes",
}


def _location(finding: dict) -> str:
    place = md_code(finding.get("file")) or "(no file)"
    line = as_line(finding.get("line"))
    if line is not None and line >= 1:
        place += f":{line}"
        end_line = as_line(finding.get("end_line"))
        if end_line is not None and end_line > line:
            place += f"–{end_line}"
    return place


def _verdict_label(value) -> str:
    if isinstance(value, str) and value in _VERDICT_LABELS:
        return _VERDICT_LABELS[value]
    return md_inline(value) if value else "none"


def _number(value, fmt: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "unknown"
    try:
        return format(value, fmt)
    except ValueError:  # e.g. a float where a count ("d") is expected
        return "unknown"


def _analyzer_text(a: dict) -> str:
    name = md_inline(a["name"]) + (f" {md_inline(a['version'])}" if a["version"] else "")
    n = a["findings"]
    found = "no finding" if not n else f"{n} finding{'s' if n != 1 else ''}"
    return f"{name} ({'imported SARIF; ' if a['imported'] else ''}{found})"


def _md_header(review: dict, only_accepted: bool, findings: list[dict]) -> list[str]:
    out = [f"# {md_inline(review.get('title')) or 'Code review'}", ""]
    source = source_fields(review)
    source_text = md_inline(source["label"]) or "unknown"
    if source["kind"]:
        source_text += f" ({md_inline(source['kind'])})"
    out.append(f"- **Source:** {source_text}")
    if review.get("created_at"):
        out.append(f"- **Created:** {md_inline(review['created_at'])}")
    if review.get("status"):
        out.append(f"- **Status:** {md_inline(str(review['status']).replace('_', ' '))}")
    out.append(f"- **Triage:** {md_inline(triage_text(review))}")
    verdict = verdict_fields(review)
    out.append(f"- **Proposed verdict:** {_verdict_label(verdict['proposed'])}")
    if verdict["final"]:
        final = f"- **Final verdict:** {_verdict_label(verdict['final'])}"
        if verdict["decided_by"]:
            final += f", decided by {md_inline(verdict['decided_by'])}"
        out.append(final)
        if verdict["override_reason"]:
            out.append(f"- **Override reason:** {md_inline(verdict['override_reason'])}")
    else:
        out.append("- **Final verdict:** not decided yet")
    ran = analyzers_ran(review, findings)
    if ran is not None:  # from the review's analysis record: what really ran
        out.append("- **Analyzers that ran:** "
                   + (", ".join(_analyzer_text(a) for a in ran) or "none"))
    if review.get("tool_version"):
        out.append(f"- **Quorum version:** {md_inline(review['tool_version'])}")
    if only_accepted:
        out.append("- **Export:** accepted findings only")
    out.append("")
    if review.get("offline"):
        source = ("the results of the analyzers that ran (listed above)" if ran is not None
                  else "the analyzers' results")
        out += [f"**Offline review:** no language model was used; Quorum's offline model "
                f"restated {source} as findings.", ""]
    return out


def _md_finding(finding: dict) -> list[str]:
    key = md_inline(finding.get("key"))
    title = md_inline(finding.get("title")) or "Untitled finding"
    out = [f"#### {key + ' · ' if key else ''}{title}", ""]
    out.append(f"- **Location:** {_location(finding)}")
    others = also_at(finding)
    if others:
        out.append(f"- **Also at:** {', '.join(_location(o) for o in others)}")
    out.append(f"- **Category:** {md_inline(finding.get('category')) or 'unknown'}")
    reviewers = [md_inline(r) for r in finding.get("reviewers") or ()]
    out.append(f"- **Reviewers:** {', '.join(reviewers) if reviewers else 'none recorded'}")
    confidence = finding.get("confidence")
    out.append(f"- **Confidence:** {_number(confidence, '.0%')}")
    decision = md_inline(finding.get("decision")) or "pending"
    if finding.get("decided_by"):
        decision += f" by {md_inline(finding['decided_by'])}"
    if finding.get("comment"):
        decision += f": {md_inline(finding['comment'])}"
    out.append(f"- **Decision:** {decision}")
    evidence = []
    for item in finding.get("evidence") or ():
        if isinstance(item, dict):
            rule, tool = md_code(item.get("rule")), md_inline(item.get("tool"))
            evidence.append(f"{rule} ({tool})" if rule and tool else rule or tool)
    if any(evidence):
        out.append(f"- **Evidence:** {', '.join(e for e in evidence if e)}")
    out.append("")
    description = md_block(finding.get("description"))
    if description:
        out += [description, ""]
    suggestion = str(finding.get("suggestion") or "").strip("\r\n")
    if suggestion.strip():
        if "\n" in suggestion or "\r" in suggestion:
            out += ["**Suggestion:**", "", md_fence(suggestion), ""]
        else:
            out += [f"**Suggestion:** {md_inline(suggestion)}", ""]
    return out


def _md_dropped(dropped: list[dict]) -> list[str]:
    out = ["## Dropped findings", ""]
    for finding in dropped:
        key = md_inline(finding.get("key"), at_start=True)
        title = md_inline(finding.get("title"), at_start=not key) or "Untitled finding"
        line = f"- {key + ' · ' if key else ''}{title} ({_location(finding)})"
        if finding.get("drop_reason"):
            line += f": {md_inline(finding['drop_reason'])}"
        out.append(line)
    return out + [""]


def _md_coverage(coverage: list[dict]) -> list[str]:
    out = ["## Coverage", ""]
    if not coverage:
        return out + ["Every file in the change was reviewed in full.", ""]
    for item in coverage:
        state = ("reviewed" if item.get("reason") == "examined" else
                 "reviewed in part" if item.get("reviewed") else "not reviewed")
        line = f"- {md_code(item.get('path'), at_start=True) or '(unnamed file)'}: {state}"
        if item.get("reason"):
            line += f", {md_inline(item['reason'])}"
        if item.get("detail"):
            line += f" ({md_inline(item['detail'])})"
        out.append(line)
    return out + [""]


def _md_reviewers(reviewers: dict) -> list[str]:
    out = ["## Reviewers", ""]
    if not reviewers:
        return out + ["No reviewer information.", ""]
    for name, info in reviewers.items():
        if not isinstance(info, dict):
            continue
        status = md_inline(info.get("status")) or "unknown"
        line = f"- **{md_inline(name)}:** {status}"
        details = []
        if info.get("model"):
            details.append(f"model {md_inline(info['model'])}")
        if info.get("findings") is not None:
            details.append(f"{_number(info['findings'], 'd')} findings")
        if info.get("tokens") is not None:
            details.append(f"{_number(info['tokens'], ',')} tokens")
        if info.get("cost_usd") is not None:
            details.append(f"USD {_number(info['cost_usd'], '.4f')}")
        if details:
            line += f" ({', '.join(details)})"
        if info.get("error"):
            line += f"; error: {md_inline(info['error'])}"
        out.append(line)
    return out + [""]


def to_markdown(review: dict, *, only_accepted: bool = False) -> str:
    """The review as a Markdown report in which untrusted text cannot create structure."""
    findings = select_findings(review, only_accepted)
    out = _md_header(review, only_accepted, findings)

    summary = md_block(review.get("summary"))
    out += ["## Summary", "", summary or "No summary.", ""]
    notes = [n for n in notes_for(review, findings, only_accepted) if n.strip()]
    out += [f"- {md_inline(note, at_start=True)}" for note in notes]
    if notes:
        out.append("")

    counts = severity_counts(findings)
    out += ["## Findings by severity", ""]
    out += [f"- {severity.title()}: {counts[severity]}" for severity in SEVERITIES]
    out += [f"- **Total:** {len(findings)}", ""]

    out += ["## Findings", ""]
    if not findings:
        out += ["No accepted findings." if only_accepted else "No findings.", ""]
    for severity in (*SEVERITIES, None):
        group = [
            f
            for f in findings
            if (severity_of(f) == severity)
            or (severity is None and severity_of(f) not in SEVERITIES)
        ]
        if not group:
            continue
        heading = severity.title() if severity else "Other"
        out += [f"### {heading} ({len(group)})", ""]
        for finding in group:
            out += _md_finding(finding)

    if not only_accepted:
        dropped = ordered(review.get("dropped"))
        if dropped:
            out += _md_dropped(dropped)

    out += _md_coverage([c for c in review.get("coverage") or () if isinstance(c, dict)])
    out += _md_reviewers(review.get("reviewers") or {})

    totals = review.get("totals") or {}
    out += [
        "## Totals",
        "",
        f"- Tokens: {_number(totals.get('tokens'), ',')}",
        f"- Cost: USD {_number(totals.get('cost_usd'), '.4f')}",
        "",
    ]
    return "\n".join(out)
