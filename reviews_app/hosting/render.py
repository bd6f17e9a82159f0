"""What Quorum writes on a pull request: the inline comment per finding (with a suggestion the
author can commit, when it applies cleanly), the review event for a verdict, and the one
summary comment. Plain Python, no Django: findings are the plain dicts of the pipeline.

Model output is untrusted. Every text taken from a finding goes through ``_defuse`` (no HTML
comment can open, so nothing can forge our hidden markers or hide text; no @-mention pings
anyone; lengths are capped) and then the export's inert Markdown (``md_inline``/``md_block``:
no HTML, links, images, headings or fences). Only the code of a suggestion block is kept
verbatim, and only when it cannot break out of its fence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..pipeline.coverage import INCOMPLETE_REASONS, by_path, unexamined, unfinished
from ..pipeline.export.common import also_at, is_hidden
from ..pipeline.export.markdown_text import md_block, md_code, md_inline
from ..pipeline.schema import SEVERITIES, SEVERITY_RANK
from .base import FINGERPRINT_MARKER, InlineComment

MAX_TITLE = 200
MAX_TEXT = 3000
MAX_CODE = 4000
MAX_LISTED = 25
MAX_PLACES = 20  # other places of a cluster named in a comment

EVENTS = {"approve": "approve", "request_changes": "request_changes",
          "needs_discussion": "comment"}
VERDICT_WORDS = {"approve": "Approve", "request_changes": "Request changes",
                 "needs_discussion": "Needs discussion"}
_COMMENT_OPEN = re.compile(r"<!--")
_SAFE_URL = re.compile(r"https?://[^\s()<>\[\]`\\\"']+")
_MENTION = re.compile(r"@(?=[A-Za-z0-9_])")
_MARKER = re.compile(re.escape(FINGERPRINT_MARKER).replace(r"\{\}", r"([0-9a-f]{8,64})"))
_FENCE = re.compile(r"(?ms)^[ \t]*(`{3,}|~{3,})[^\n`]*\n(.*?)\n[ \t]*\1[ \t]*$")
_FENCE_LINE = re.compile(r"(?m)^[ \t]*(`{3,}|~{3,})")
_CODE_HINT = re.compile(r"[=(){}\[\];]|^\s*(def|class|return|import|from|if|for|while|"
                        r"const|let|var|function|fn|pub|async|await|raise|try|except)\b")
# A line of prose, not code: inline code in backticks, a sentence's start ("Use the", "Consider
# replacing"), a sentence's end ("… here."), or two sentences.
_PROSE = re.compile(r"(?<!`)`[^`]+`(?!`)|^[A-Z][a-z]+,?\s+[a-z]+\b|[a-z]{2,}[.!?]$|[.!?]\s+[A-Z]")


# --- untrusted text ------------------------------------------------------------------------------
def _defuse(value, limit: int) -> str:
    """Untrusted text without HTML comment delimiters or hidden characters, capped."""
    text = str(value if value is not None else "")
    text = "".join("\ufffd" if is_hidden(c) and c not in "\n\t" else c for c in text)
    while (cleaned := _COMMENT_OPEN.sub("", text)) != text:
        text = cleaned
    if len(text) > limit:
        text = text[:limit].rstrip() + " …"
    return text


def _no_pings(markdown: str) -> str:
    # After escaping (our zero-width space is not untrusted text): "@name" stays readable but
    # notifies nobody.
    return _MENTION.sub("@\u200b", markdown)


def inline(value, limit: int = MAX_TITLE) -> str:
    """Untrusted text as one inert Markdown line."""
    return _no_pings(md_inline(_defuse(value, limit)))


def block(value, limit: int = MAX_TEXT) -> str:
    """Untrusted text as inert Markdown paragraphs."""
    return _no_pings(md_block(_defuse(value, limit)))


def code(value, limit: int = 300) -> str:
    """Untrusted text (a path) as an inline code span."""
    return _no_pings(md_code(_defuse(value, limit)))


def fingerprints_in(body: str) -> set[str]:
    """The fingerprints of Quorum's markers in a comment's text."""
    return set(_MARKER.findall(body or ""))


# --- suggestions ---------------------------------------------------------------------------------
def suggestion_code(text: str) -> tuple[str, str] | None:
    """``(code, prose)`` when a suggestion is code: one fenced block (the prose around it is
    returned apart), or text whose every line looks like code. None when it is prose."""
    text = str(text or "").replace("\r\n", "\n").strip("\n")
    if not text.strip():
        return None
    if _FENCE_LINE.search(text):
        blocks = list(_FENCE.finditer(text))
        if len(blocks) != 1 or _FENCE_LINE.search(text[:blocks[0].start()]
                                                  + text[blocks[0].end():]):
            return None
        m = blocks[0]
        return m.group(2), (text[:m.start()] + "\n" + text[m.end():]).strip()
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if any(_PROSE.search(ln.strip()) for ln in lines):
        return None
    if not any(_CODE_HINT.search(ln) for ln in lines):
        return None
    return text, ""


def diff_lines(files: Iterable[dict], *, added_only: bool = False) -> dict[str, set[int]]:
    """Per path, the new-file line numbers shown in the reviewed diff (added and context
    lines; only added ones with ``added_only``)."""
    kinds = ("add",) if added_only else ("add", "ctx")
    out: dict[str, set[int]] = {}
    for f in files or ():
        lines = {ln["new"] for h in f.get("hunks") or () for ln in h.get("lines") or ()
                 if ln.get("kind") in kinds and isinstance(ln.get("new"), int)}
        if lines:
            out.setdefault(str(f.get("path")), set()).update(lines)
    return out


def _span(f: dict) -> tuple[int, int] | None:
    line = f.get("line")
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        return None
    end = f.get("end_line")
    end = end if isinstance(end, int) and not isinstance(end, bool) and end >= line else line
    return line, end


def _fenced(code_text: str) -> str | None:
    """A ```suggestion block for ``code_text``, or None when the code could forge a marker or
    is too long to post verbatim."""
    if len(code_text) > MAX_CODE or _COMMENT_OPEN.search(code_text):
        return None
    if any(is_hidden(c) and c not in "\n\t" for c in code_text):
        return None
    longest = max((len(m.group()) for m in re.finditer(r"`+", code_text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}suggestion\n{code_text}\n{fence}"


@dataclass
class Comment:
    """An inline comment for one finding, and whether it carries a suggestion block."""

    fingerprint: str
    comment: InlineComment
    suggestion: bool


def inline_comment(f: dict, lines: dict[str, set[int]]) -> Comment | None:
    """The inline comment for finding ``f``, or None when its line is not on the reviewed
    diff (the provider would refuse it; the summary lists it instead). ``lines``: from
    ``diff_lines``. A suggestion block only when its whole range is on the diff."""
    span = _span(f)
    shown = lines.get(str(f.get("file") or ""), set())
    if span is None or span[0] not in shown:
        return None
    start, end = span
    whole = all(n in shown for n in range(start, end + 1))
    if not whole:
        end = start
    suggested = suggestion_code(f.get("suggestion") or "") if whole else None
    fenced = _fenced(suggested[0]) if suggested else None
    body = inline_body(f, fenced=fenced, prose=suggested[1] if fenced and suggested else None)
    return Comment(fingerprint=str(f.get("fingerprint") or ""), suggestion=fenced is not None,
                   comment=InlineComment(path=str(f["file"]), line=end, body=body,
                                         start_line=start if end > start else None))


def inline_body(f: dict, *, fenced: str | None = None, prose: str | None = None) -> str:
    """The comment's text: severity, title, description, the suggestion (a committable block
    when ``fenced``, else inert text), and the hidden fingerprint marker last."""
    sev = f.get("severity") if f.get("severity") in SEVERITIES else "info"
    parts = [f"**{sev.upper()}** · {inline(f.get('category') or '', 40)} — "
             f"**{inline(f.get('title') or 'Finding')}**"]
    if f.get("description"):
        parts.append(block(f["description"]))
    if fenced:
        if prose:
            parts.append(block(prose, 1000))
        parts.append("Suggested change:\n\n" + fenced)
    elif f.get("suggestion"):
        parts.append("**Suggestion:** " + block(f["suggestion"]))
    if others := places_text(f):
        parts.append(f"**The same problem also at:** {others}.")
    conf = f.get("confidence")
    if isinstance(conf, (int, float)) and not isinstance(conf, bool):
        parts.append(f"<sub>Quorum · confidence {conf:.2f}</sub>")
    fp = str(f.get("fingerprint") or "")
    if re.fullmatch(r"[0-9a-f]{8,64}", fp):
        parts.append(FINGERPRINT_MARKER.format(fp))
    return "\n\n".join(parts)


# --- verdict → review event ----------------------------------------------------------------------
def partial_reasons(coverage: Iterable[dict], reviewers: dict | None) -> list[str]:
    """Why a review is incomplete (empty when it is complete): unexamined parts of the change
    and reviewers that did not finish."""
    reasons = []
    left = by_path(unexamined(list(coverage or ())))
    if left:
        reasons.append(f"{len(left)} part{'s' if len(left) != 1 else ''} of the change "
                       f"{'were' if len(left) != 1 else 'was'} not examined")
    missing = unfinished(reviewers)
    if missing:
        reasons.append("the " + ", ".join(missing) + " reviewer"
                       + ("s" if len(missing) > 1 else "") + " did not finish")
    return reasons


def review_event(verdict: str, reasons: list[str]) -> tuple[str, str]:
    """The review state for ``verdict`` and why it differs, if it does: an incomplete review
    is never an approval."""
    event = EVENTS.get(verdict, "comment")
    if event == "approve" and reasons:
        return "comment", ("Not approved because the review is incomplete: "
                           + "; ".join(reasons) + ".")
    return event, ""


# --- the summary comment -------------------------------------------------------------------------
@dataclass
class Summary:
    """What the summary says. Findings are plain dicts (published = what went out)."""

    verdict: str
    final: bool                      # a person finalised it (else: proposed, automatic)
    decided_by: str = ""
    published: list[dict] = field(default_factory=list)
    not_inline: list[str] = field(default_factory=list)  # fingerprints not on the diff
    coverage: list[dict] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)     # partial_reasons
    event_note: str = ""
    round: int = 0
    base_sha: str = ""
    from_sha: str = ""
    head_sha: str = ""
    carried: list[dict] = field(default_factory=list)    # still open from earlier rounds
    resolved: list[dict] = field(default_factory=list)   # earlier findings now resolved
    quorum_url: str = ""
    line_url: Callable[[str, int], str] | None = None


def counts(findings: Iterable[dict]) -> dict[str, int]:
    out = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        if f.get("severity") in out:
            out[f["severity"]] += 1
    return out


def _where(f: dict, line_url) -> str:
    span = _span(f)
    label = str(f.get("file") or "") + (f":{span[0]}" if span else "")
    text = code(label)
    if span and line_url:
        url = line_url(str(f.get("file") or ""), span[0])
        if url and _SAFE_URL.fullmatch(url):
            return f"[{text}]({url})"
    return text


def places_text(f: dict, line_url=None) -> str:
    """The other places a clustered finding holds (``locations``), each as code (a link to
    the line when ``line_url`` gives one), or "" when it holds one place."""
    others = also_at(f)
    shown = [_where(o, line_url) for o in others[:MAX_PLACES]]
    if len(others) > MAX_PLACES:
        shown.append(f"and {len(others) - MAX_PLACES} more (see Quorum)")
    return ", ".join(shown)


def _short(sha: str) -> str:
    return sha[:10] if re.fullmatch(r"[0-9a-fA-F]{4,64}", sha or "") else "?"


def _finding_line(f: dict, s: Summary, extra: str = "") -> str:
    """One finding of the summary, with every other place it holds (a cluster's places have
    no inline comment of their own: the summary names each)."""
    sev = f.get("severity") if f.get("severity") in SEVERITIES else "info"
    others = places_text(f, s.line_url)
    return (f"- **{sev}** {inline(f.get('title') or 'Finding')} — {_where(f, s.line_url)}{extra}"
            + (f"; also at {others}" if others else ""))


def summary_body(s: Summary) -> str:
    """The summary comment (``upsert_summary`` adds the summary marker)."""
    word = VERDICT_WORDS.get(s.verdict, "Comment")
    how = (f"final, triaged in Quorum by {inline(s.decided_by, 60) or 'a person'}" if s.final
           else "proposed by the reviewers and published automatically, without triage")
    out = [f"## Quorum review: {word}", f"**Verdict: {word}** ({how})."]
    if s.round:
        if s.from_sha:
            rng = f"`{_short(s.from_sha)}..{_short(s.head_sha)}` (new commits since the last round)"
        else:
            rng = f"`{_short(s.base_sha)}..{_short(s.head_sha)}` (the whole pull request)"
        out.append(f"Round {s.round} · reviewed {rng}.")
        full = [c for c in s.coverage or () if isinstance(c, dict)
                and c.get("reason") == "full_round"]
        if full:
            out.append(f"Full round instead of the new commits alone: "
                       f"{inline(full[0].get('detail') or '', 400)}")
    if s.reasons:
        out.append("**Incomplete review:** " + "; ".join(s.reasons) + ".")
    if s.event_note:
        out.append(s.event_note)
    c = counts(s.published)
    tally = ", ".join(f"{n} {sev}" for sev, n in c.items() if n) or "none"
    out.append(f"### Findings published: {len(s.published)}\nBy severity: {tally}.")
    ordered = sorted(s.published, key=lambda f: (SEVERITY_RANK.get(f.get("severity"), 9),
                                                 str(f.get("file")), f.get("line") or 0))
    lines = [_finding_line(f, s, " (not on a changed line: no inline comment)"
                           if f.get("fingerprint") in s.not_inline else "")
             for f in ordered[:MAX_LISTED]]
    if len(ordered) > MAX_LISTED:
        lines.append(f"- … and {len(ordered) - MAX_LISTED} more (see Quorum).")
    if lines:
        out.append("\n".join(lines))
    if s.carried or s.resolved:
        part = ["### Earlier rounds"]
        if s.carried:
            part.append(f"Still open from earlier rounds: {len(s.carried)}.")
            part += [_finding_line(f, s) for f in s.carried[:MAX_LISTED]]
        if s.resolved:
            part.append(f"Resolved since then: {len(s.resolved)}.")
            part += [_finding_line(f, s, f" ({inline(f.get('resolution') or 'resolved', 30)})")
                     for f in s.resolved[:MAX_LISTED]]
        out.append("\n".join(part))
    out.append(_not_reviewed(s.coverage))
    if s.quorum_url and _SAFE_URL.fullmatch(s.quorum_url):
        out.append(f"[Open this review in Quorum]({s.quorum_url})")
    return "\n\n".join(out)


def _listed(title: str, groups: list[dict]) -> list[str]:
    lines = [f"### {title} ({len(groups)})"]
    for g in groups[:MAX_LISTED]:
        reasons = ", ".join(str(r or "").replace("_", " ") for r in g["reasons"])
        lines.append(f"- {code(g['path'] or '?')} — {inline(reasons, 80)}: "
                     f"{inline(' '.join(g['details']), 300)}")
    if len(groups) > MAX_LISTED:
        lines.append(f"- … and {len(groups) - MAX_LISTED} more.")
    return lines


def _not_reviewed(coverage: list[dict]) -> str:
    """What was not examined (the count the incomplete-review line gives, one line per part)
    and what was left out on purpose (excluded, deleted, binary…), each listed once."""
    entries = [c for c in coverage or () if isinstance(c, dict)]
    left = by_path(unexamined(entries))
    skipped_paths = {g["path"] for g in left}
    aside = by_path([c for c in entries if not c.get("reviewed")
                     and c.get("reason") not in INCOMPLETE_REASONS
                     and c.get("path") not in skipped_paths])
    if not left and not aside:
        return "Every file of the change was reviewed."
    lines: list[str] = []
    if left:
        lines += _listed("Not examined", left)
    else:
        lines.append("Every file in scope was examined.")
    if aside:
        lines += ([""] if lines else []) + _listed("Left out on purpose", aside)
    return "\n".join(lines)
