"""Export a finished code review as Markdown, JSON or SARIF 2.1.0.

Everything here is pure Python and works on the plain ``review`` dict the Django side builds
and touches neither Django nor the database.

Trust: titles, descriptions, suggestions, the summary, file names and reviewer errors come from
a model or from the reviewed diff, so they are treated as hostile. The Markdown export escapes
only the characters that could open HTML tags or create Markdown structure (links, headings,
lists, tables, emphasis, code blocks), so text reads as written; file names and rule ids are
inline code spans fenced by their content; multi-line suggestions go into fenced blocks whose
fence is longer than any backtick run they contain, at the top level of the document so that
no container can be closed early. The SARIF export percent-encodes file names into relative
URI references, treating ``\\`` like ``/`` and dropping ``.``/``..`` segments, so that a path
can never climb out of the checkout (not even for a consumer on Windows), and replaces
characters that hide or reorder text in messages.

JSON export structure (``schema_version`` 1)::

    {
      "schema_version": 1,
      "only_accepted": bool,                # True: only findings marked "accepted"
      "review": {"id", "title", "tool_version", "source": {"kind", "label"}, "created_at",
                 "status", "offline", "verdict": {"proposed", "final", "decided_by",
                 "decided_at", "version", "override_reason", "by_rules"},
                 "triage",                  # which version: "triage version N, finalised
                 "summary", "notes": [str, ...]},  # by X at T" or "draft: not finalised"
      "counts": {"critical": n, "high": n, "medium": n, "low": n, "info": n},
      "findings": [FINDING, ...],           # strongest severity first, then file, then line
      "dropped": [FINDING + "drop_reason"], # absent when only_accepted
      "coverage": [{"path", "reason", "detail", "reviewed"}, ...],
      "reviewers": {name: {"status", "error", "model", "findings", "tokens", "cost_usd"}},
      "totals": {"tokens", "cost_usd"}
    }

    FINDING = {"key", "category", "severity", "file", "line", "end_line", "title",
               "description", "suggestion", "confidence", "reviewers", "evidence",
               "decision", "decided_by", "decided_at", "comment", "history", "duplicate_of"}
    evidence item = {"tool", "rule", "url"}  # tool "ruff"/"bandit"/"bandit+ruff"; "model"
                                             # when no analyzer reported the rule in this run
    history: how reflection changed the finding; duplicate_of: the key a dropped duplicate
    repeats ("" otherwise)

Every key listed is always present (``None``, ``""``, ``[]`` or ``{}`` when unknown).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import quote

from .schema import SEVERITIES, SEVERITY_RANK

__all__ = [
    "EXPORT_FORMATS",
    "JSON_SCHEMA_VERSION",
    "render",
    "select_findings",
    "to_json",
    "to_markdown",
    "to_sarif",
]

EXPORT_FORMATS = {
    "markdown": ("text/markdown", "md"),
    "json": ("application/json", "json"),
    "sarif": ("application/sarif+json", "sarif"),
}

JSON_SCHEMA_VERSION = 1
SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
TOOL_NAME = "Quorum"

FINDING_FIELDS = (
    "key",
    "category",
    "severity",
    "file",
    "line",
    "end_line",
    "title",
    "description",
    "suggestion",
    "confidence",
    "reviewers",
    "evidence",
    "decision",
    "decided_by",
    "decided_at",
    "comment",
    "history",
    "duplicate_of",
)
_LIST_FIELDS = frozenset({"reviewers", "evidence", "history"})
_NULL_FIELDS = frozenset({"line", "end_line", "confidence", "decided_by", "decided_at"})

_SARIF_LEVELS = {
    "critical": "error",
    "high": "error",
    "medium": "warning",
    "low": "note",
    "info": "note",
}
_VERDICT_LABELS = {
    "approve": "Approve",
    "needs_discussion": "Needs discussion",
    "request_changes": "Request changes",
}


# --------------------------------------------------------------------------- selection


def _as_line(value) -> int | None:
    """A usable line number, or None (bools and non-integers are not line numbers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _sort_key(finding: dict):
    severity = finding.get("severity")
    rank = SEVERITY_RANK.get(severity, len(SEVERITIES)) if isinstance(severity, str) else 99
    line = _as_line(finding.get("line"))
    return (rank, str(finding.get("file") or ""), line if line is not None else 0,
            str(finding.get("key") or ""))


def _ordered(findings: Iterable[dict] | None) -> list[dict]:
    return sorted((f for f in findings or () if isinstance(f, dict)), key=_sort_key)


def select_findings(review: dict, only_accepted: bool) -> list[dict]:
    """The kept findings to export, strongest severity first, then by file and line.

    With ``only_accepted`` only findings whose decision is ``"accepted"`` are returned. The
    dicts are the review's own (not copies); the list is new.
    """
    findings = _ordered(review.get("findings"))
    if only_accepted:
        findings = [f for f in findings if f.get("decision") == "accepted"]
    return findings


def _severity(finding: dict) -> str | None:
    """The finding's severity if it is a string (other values cannot be looked up)."""
    severity = finding.get("severity")
    return severity if isinstance(severity, str) else None


def _counts(findings: list[dict]) -> dict[str, int]:
    counts = dict.fromkeys(SEVERITIES, 0)
    for finding in findings:
        severity = _severity(finding)
        if severity in counts:
            counts[severity] += 1
    return counts


# --------------------------------------------------------------------------- JSON


def _finding_record(finding: dict, *, dropped: bool = False) -> dict:
    record = {}
    for field in FINDING_FIELDS:
        value = finding.get(field)
        if value is None and field not in _NULL_FIELDS:
            value = [] if field in _LIST_FIELDS else ""
        record[field] = value
    if dropped:
        record["drop_reason"] = finding.get("drop_reason") or ""
    return record


def _verdict(review: dict) -> dict:
    verdict = review.get("verdict") or {}
    return {
        "proposed": verdict.get("proposed"),
        "final": verdict.get("final"),
        "decided_by": verdict.get("decided_by"),
        "decided_at": verdict.get("decided_at"),
        "version": verdict.get("version"),
        "override_reason": verdict.get("override_reason") or "",
        "by_rules": verdict.get("by_rules"),
    }


def triage_text(review: dict) -> str:
    """Which triage the export shows: a finalised version, or a draft that may still change."""
    verdict = _verdict(review)
    if not (verdict["final"] and verdict["version"]):
        return "draft: not finalised"
    text = f"triage version {verdict['version']}, finalised"
    if verdict["decided_by"]:
        text += f" by {verdict['decided_by']}"
    if verdict["decided_at"]:
        text += f" at {verdict['decided_at']}"
    return text


def _source(review: dict) -> dict:
    source = review.get("source") or {}
    return {"kind": source.get("kind") or "", "label": source.get("label") or ""}


def _export_dict(review: dict, only_accepted: bool) -> dict:
    findings = select_findings(review, only_accepted)
    data = {
        "schema_version": JSON_SCHEMA_VERSION,
        "only_accepted": bool(only_accepted),
        "review": {
            "id": review.get("id"),
            "title": review.get("title") or "",
            "tool_version": review.get("tool_version") or "",
            "source": _source(review),
            "created_at": review.get("created_at"),
            "status": review.get("status") or "",
            "offline": bool(review.get("offline")),
            "verdict": _verdict(review),
            "triage": triage_text(review),
            "summary": review.get("summary") or "",
            "notes": [str(n) for n in review.get("notes") or ()],
        },
        "counts": _counts(findings),
        "findings": [_finding_record(f) for f in findings],
    }
    if not only_accepted:
        data["dropped"] = [_finding_record(f, dropped=True) for f in _ordered(review.get("dropped"))]
    data["coverage"] = [
        {
            "path": item.get("path") or "",
            "reason": item.get("reason") or "",
            "detail": item.get("detail") or "",
            "reviewed": bool(item.get("reviewed")),
        }
        for item in review.get("coverage") or ()
        if isinstance(item, dict)
    ]
    data["reviewers"] = {
        str(name): {
            "status": info.get("status") or "",
            "error": info.get("error") or "",
            "model": info.get("model") or "",
            "findings": info.get("findings"),
            "tokens": info.get("tokens"),
            "cost_usd": info.get("cost_usd"),
        }
        for name, info in (review.get("reviewers") or {}).items()
        if isinstance(info, dict)
    }
    totals = review.get("totals") or {}
    data["totals"] = {"tokens": totals.get("tokens"), "cost_usd": totals.get("cost_usd")}
    return data


def to_json(review: dict, *, only_accepted: bool = False) -> str:
    """The review as pretty-printed JSON text (structure documented in the module docstring)."""
    return json.dumps(_export_dict(review, only_accepted), indent=2)


# --------------------------------------------------------------------------- SARIF


def _artifact_uri(path) -> str:
    """A file name as a relative URI reference: no leading "/", no "." or ".." segments,
    unsafe characters (including ":") percent-encoded as UTF-8. A backslash separates
    segments too: a consumer on Windows would otherwise decode "..%5C" into a step up."""
    text = str(path or "").replace("\\", "/")
    segments = [s for s in text.split("/") if s not in ("", ".", "..")]
    return quote("/".join(segments), safe="/")


def _region(finding: dict) -> dict | None:
    line = _as_line(finding.get("line"))
    if line is None or line < 1:
        return None
    region = {"startLine": line}
    end_line = _as_line(finding.get("end_line"))
    if end_line is not None and end_line >= line:
        region["endLine"] = end_line
    return region


def _plain(value) -> str:
    """Untrusted text for a plain-text field: characters that hide or reorder text, and
    control characters other than line breaks and tabs, become U+FFFD."""
    text = str(value if value is not None else "").replace("\r\n", "\n").strip()
    return "".join("\ufffd" if _hidden(c) and c not in "\n\t" else c for c in text)


def _message_text(finding: dict) -> str:
    parts = [_plain(finding.get("title")) or "Untitled finding"]
    description = _plain(finding.get("description"))
    if description:
        parts.append(description)
    suggestion = _plain(finding.get("suggestion"))
    if suggestion:
        parts.append(f"Suggestion: {suggestion}")
    return "\n\n".join(parts)


# Analyzer rule ids as ruff and bandit print them (F401, B602, UP031, E999). Anything else a
# model wrote in a finding's rules is kept in the properties but never becomes a rule id.
_ANALYZER_RULE = re.compile(r"[A-Z]{1,6}[0-9]{1,4}")
_BANDIT_RULE = re.compile(r"B[1-7][0-9]{2}")  # flake8-bugbear, in ruff, uses B0xx and B9xx
_ANALYZERS = ("ruff", "bandit")

# Model findings get a rule id per kind of problem, from their title, so that the same kind
# of finding keeps its id from run to run (code scanning tracks alerts by rule id). First
# match wins; a finding that matches none is "<category>/general".
_MODEL_KINDS = (
    ("sql-injection", "SQL built from untrusted input", r"\bsql\b|\bsqli\b"),
    ("command-injection", "Shell command built from untrusted input",
     r"command injection|shell injection|shell\s*=\s*true|os\.system|subprocess"),
    ("code-injection", "Untrusted input evaluated as code", r"\beval\b|\bexec\b|code injection"),
    ("hard-coded-secret", "Secret written into the code",
     r"hard-?coded (secret|password|key|token|credential)|secret|api[ _-]?key|access key|"
     r"password|private key|credential"),
    ("cross-site-scripting", "Untrusted input written into a page",
     r"\bxss\b|cross[ -]site scripting|innerhtml|unescaped|mark_safe"),
    ("path-traversal", "File path built from untrusted input", r"path traversal|directory traversal"),
    ("unsafe-deserialization", "Untrusted data deserialized",
     r"pickle|deserializ|yaml\.load|marshal"),
    ("weak-cryptography", "Weak hash, cipher or randomness",
     r"\bmd5\b|\bsha-?1\b|weak (hash|cipher|crypto)|insecure random|\brandom\b"),
    ("tls-verification", "Certificate checks turned off", r"verify\s*=\s*false|certificate|\btls\b"),
    ("access-control", "Missing or wrong access check",
     r"authori[sz]|authenti|access control|permission|csrf"),
    ("error-handling", "Errors swallowed or mishandled", r"\bexcept|error handling"),
    ("unused-code", "Unused import, variable or code", r"\bunused\b|dead code|unreachable"),
    ("complexity", "Code harder to follow than it needs to be",
     r"complex|too long|too many|nested|duplicat"),
    ("naming", "Unclear or misleading name", r"\bnam(e|es|ing)\b"),
)
_CATEGORY_TEXT = {
    "security": "Security problem found by the Quorum security reviewer.",
    "architecture": "Design or architecture problem found by the Quorum architecture reviewer.",
    "style": "Style or readability problem found by the Quorum style reviewer.",
}


def _slug(value) -> str:
    text = re.sub(r"[^a-z0-9]+", "-", str(value or "").lower()).strip("-")
    return text[:40] or "unknown"


def _model_rule(finding: dict, category: str) -> tuple[str, str]:
    """A model finding's rule id and its description."""
    title = str(finding.get("title") or "").lower()
    for kind, text, pattern in _MODEL_KINDS:
        if re.search(pattern, title):
            return f"quorum/{category}/{kind}", text
    fallback = _CATEGORY_TEXT.get(category, f"Problem in category {category} found by Quorum.")
    return f"quorum/{category}/general", fallback


def _analyzer_of(item: dict) -> tuple[str, str] | None:
    """(analyzer, rule id) for an evidence item naming an analyzer rule, else None. An item
    the analyzers did not report (tool "model") is not one; tool "analyzer" means unknown."""
    rule = str(item.get("rule") or "")
    if not _ANALYZER_RULE.fullmatch(rule):
        return None
    tool = str(item.get("tool") or "").split("+")[0]  # "bandit+ruff": bandit's id and text
    if tool in _ANALYZERS:
        return tool, rule
    if tool in ("", "analyzer"):
        return ("bandit" if _BANDIT_RULE.fullmatch(rule) else "ruff"), rule
    return None


def _help_uri(item: dict) -> str | None:
    url = str(item.get("url") or "")
    return url if re.fullmatch(r"https?://[^\s\\<>\"]+", url) else None


class _Rules:
    """The rules a SARIF log uses, each once: the driver's (model findings) and one tool
    extension per analyzer; ``ref`` gives a result its ruleId, ruleIndex and rule reference."""

    def __init__(self):
        self.driver: dict[str, dict] = {}
        self.tools: dict[str, dict[str, dict]] = {}

    def ref(self, finding: dict, category: str) -> dict:
        for item in finding.get("evidence") or ():
            if isinstance(item, dict) and (found := _analyzer_of(item)):
                return self._analyzer_ref(*found, item, category)
        rule_id, text = _model_rule(finding, category)
        if rule_id not in self.driver:
            kind = rule_id.rsplit("/", 1)[1]
            self.driver[rule_id] = {
                "id": rule_id, "name": "".join(w.title() for w in kind.split("-")),
                "shortDescription": {"text": text},
                "properties": {"category": category, "tags": [category]}}
        return {"ruleId": rule_id, "ruleIndex": list(self.driver).index(rule_id)}

    def _analyzer_ref(self, tool: str, rule_id: str, item: dict, category: str) -> dict:
        rules = self.tools.setdefault(tool, {})
        if rule_id not in rules:
            message = _plain(item.get("message")) or f"{tool} rule {rule_id}"
            descriptor = {"id": rule_id, "shortDescription": {"text": message},
                          "properties": {"category": category, "tags": [category]}}
            if help_uri := _help_uri(item):
                descriptor["helpUri"] = help_uri
            rules[rule_id] = descriptor
        index = list(rules).index(rule_id)
        component = list(self.tools).index(tool)
        return {"ruleId": rule_id, "ruleIndex": index,
                "rule": {"id": rule_id, "index": index,
                         "toolComponent": {"name": tool, "index": component}}}

    def driver_rules(self) -> list[dict]:
        return list(self.driver.values())

    def extensions(self) -> list[dict]:
        return [{"name": tool, "rules": list(rules.values())} for tool, rules in self.tools.items()]


def _invocation(review: dict) -> dict:
    notifications = []
    for name, info in (review.get("reviewers") or {}).items():
        if not isinstance(info, dict):
            continue
        status = info.get("status") or ""
        if status in ("ok", ""):
            continue
        text = _plain(f"Reviewer {name} {status}")
        if info.get("error"):
            text += f": {_plain(info['error'])}"
        notifications.append(
            {
                "level": "note" if status == "skipped" else "error",
                "message": {"text": text},
                "properties": {"reviewer": str(name), "status": status},
            }
        )
    invocation = {"executionSuccessful": review.get("status") != "failed"}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    return invocation


def to_sarif(review: dict, *, only_accepted: bool = False) -> dict:
    """The review as a SARIF 2.1.0 log (a dict ready for ``json.dumps``).

    A finding that rests on an analyzer result has the analyzer's rule id (F401, B602), the
    rule defined once in a ``tool.extensions`` entry for that analyzer; a model's finding has
    a ``quorum/<category>/<kind>`` rule defined in ``tool.driver.rules``. The category is in
    each result's properties. Dropped findings are not results (the run's properties count
    them); results are ordered like ``select_findings``.
    """
    findings = select_findings(review, only_accepted)
    rules = _Rules()
    results = []
    for finding in findings:
        category = _slug(finding.get("category"))
        severity = finding.get("severity")
        result = {
            **rules.ref(finding, category),
            "level": _SARIF_LEVELS.get(_severity(finding), "warning"),
            "message": {"text": _message_text(finding)},
        }
        uri = _artifact_uri(finding.get("file"))
        if uri:
            physical = {"artifactLocation": {"uri": uri}}
            region = _region(finding)
            if region:
                physical["region"] = region
            result["locations"] = [{"physicalLocation": physical}]
        result["properties"] = {
            "key": finding.get("key"),
            "category": category,
            "severity": severity,
            "confidence": finding.get("confidence"),
            "reviewers": list(finding.get("reviewers") or []),
            "decision": finding.get("decision"),
            "evidence": list(finding.get("evidence") or []),
        }
        if finding.get("decision") == "rejected":
            # A person rejected it: tools that honour suppressions (code scanning) hide it.
            by = _plain(finding.get("decided_by")) or "a reviewer"
            why = _plain(finding.get("comment")) or "no comment"
            result["suppressions"] = [{"kind": "external", "status": "accepted",
                                       "justification": f"Rejected by {by} in Quorum: {why}"}]
        results.append(result)

    driver = {"name": TOOL_NAME, "rules": rules.driver_rules()}
    if review.get("tool_version"):
        driver["version"] = str(review["tool_version"])
    tool = {"driver": driver}
    if extensions := rules.extensions():
        tool["extensions"] = extensions

    run = {
        "tool": tool,
        "invocations": [_invocation(review)],
        "results": results,
        "properties": {
            "reviewId": review.get("id"),
            "title": review.get("title") or "",
            "source": _source(review),
            "createdAt": review.get("created_at"),
            "status": review.get("status") or "",
            "offline": bool(review.get("offline")),
            "verdict": _verdict(review),
            "triage": triage_text(review),
            "onlyAccepted": bool(only_accepted),
            "droppedFindings": 0 if only_accepted else len(_ordered(review.get("dropped"))),
            "totals": dict(review.get("totals") or {}),
        },
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


# --------------------------------------------------------------------------- Markdown

# Untrusted text is escaped only where a character could make structure, so that the report
# reads as written both raw and rendered (a path like src/my_file.py stays as it is):
# - anywhere: "\\" (before punctuation or at the end), unpaired backticks, "*", "[", "]", "~"
#   (GFM strikethrough), "|" (GFM tables), "$" (GitHub math), "<" (HTML, autolinks), "&" when it
#   would start a character reference, "_" unless inside a word, "#" after a space (headings'
#   closing sequence);
# - at the start of a line or list item: what would open a block (">", "-", "+", "=", "1.").
# Pairs of backtick runs become code spans of their own, so a tool's "`os` imported but
# unused" shows `os` as code; the span is re-fenced by its content and cannot reach past it.
# Bare http(s) addresses stay text; renderers that auto-link them (GitHub) link them as shown.
_ALWAYS = frozenset("`*[]~|$")
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_BLOCK_START = re.compile(r"[>\-+=]|\d{1,9}[.)]")
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_BACKTICKS = re.compile(r"`+")
# Invisible characters that reorder or hide text (bidi controls, zero-width joiners...).
_HIDDEN = frozenset("\u061c\u200b\u200c\u200d\u200e\u200f\u2060\ufeff") | frozenset(
    chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
)


def _hidden(char: str) -> bool:
    return char in _HIDDEN or unicodedata.category(char) == "Cc"


def _one_line(value) -> str:
    text = " ".join(str(value if value is not None else "").split())
    return "".join("\ufffd" if _hidden(c) else c for c in text)


def _escape_text(text: str, *, at_start: bool) -> str:
    out = []
    for i, char in enumerate(text):
        before = text[i - 1] if i else ""
        after = text[i + 1] if i + 1 < len(text) else ""
        if char in _ALWAYS:
            out.append("\\" + char)
        elif char == "\\":
            out.append("\\\\" if not after or after in _ASCII_PUNCT else char)
        elif char == "_":
            out.append(char if before.isalnum() and after.isalnum() else "\\_")
        elif char == "<":
            out.append("&lt;")
        elif char == "&":
            out.append("&amp;" if _ENTITY.match(text, i) else char)
        elif char == "#" and (not before or before.isspace()):
            out.append("\\#")
        else:
            out.append(char)
    escaped = "".join(out)
    if at_start and (m := _BLOCK_START.match(escaped)):
        escaped = escaped[: m.end() - 1] + "\\" + escaped[m.end() - 1:]
    return escaped


def md_code(value, *, at_start: bool = False) -> str:
    """Untrusted text as an inline code span (one line). Text with a run of two or more
    backticks is escaped text instead: its fence would be three backticks, which opens a code
    block at the start of a line. ``at_start``: the text begins a line or list item."""
    text = _one_line(value)
    if not text:
        return ""
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)
    if longest >= 2:
        return _escape_text(text, at_start=at_start)
    fence = "`" * (longest + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_inline(value, *, at_start: bool = False) -> str:
    """Untrusted text as one line of inert Markdown: line breaks become spaces, characters
    that could make HTML or Markdown structure are escaped, paired backticks are code.
    ``at_start``: the text begins a line or list item, where more characters open blocks."""
    text = _one_line(value)
    out, pos = [], 0
    runs = list(_BACKTICKS.finditer(text))
    i = 0
    while i < len(runs):
        opening = runs[i]
        closing = next((j for j in range(i + 1, len(runs))
                        if len(runs[j].group()) == len(opening.group())), None)
        if closing is None or not text[opening.end():runs[closing].start()].strip():
            i += 1
            continue
        out.append(_escape_text(text[pos:opening.start()], at_start=at_start and pos == 0))
        out.append(md_code(text[opening.end():runs[closing].start()]))
        pos, i = runs[closing].end(), closing + 1
    out.append(_escape_text(text[pos:], at_start=at_start and pos == 0))
    return "".join(out)


def _md_lines(text: str) -> list[str]:
    return str(text or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")


def md_block(value) -> str:
    """Untrusted multi-line text as inert Markdown paragraphs; line breaks are kept as hard
    breaks, blank lines separate paragraphs."""
    paragraphs, current = [], []
    for line in _md_lines(value):
        escaped = md_inline(line, at_start=True)
        if escaped:
            current.append(escaped)
        elif current:
            paragraphs.append("\\\n".join(current))
            current = []
    if current:
        paragraphs.append("\\\n".join(current))
    return "\n\n".join(paragraphs)


def md_fence(value) -> str:
    """Untrusted text as a fenced code block that it cannot close (top level only)."""
    lines = _md_lines(value)
    while lines and not lines[-1].strip():
        lines.pop()
    body = "\n".join(lines)
    longest = run = 0
    for char in body:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


def _location(finding: dict) -> str:
    place = md_code(finding.get("file")) or "(no file)"
    line = _as_line(finding.get("line"))
    if line is not None and line >= 1:
        place += f":{line}"
        end_line = _as_line(finding.get("end_line"))
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


def _md_header(review: dict, only_accepted: bool) -> list[str]:
    out = [f"# {md_inline(review.get('title')) or 'Code review'}", ""]
    source = _source(review)
    source_text = md_inline(source["label"]) or "unknown"
    if source["kind"]:
        source_text += f" ({md_inline(source['kind'])})"
    out.append(f"- **Source:** {source_text}")
    if review.get("created_at"):
        out.append(f"- **Created:** {md_inline(review['created_at'])}")
    if review.get("status"):
        out.append(f"- **Status:** {md_inline(str(review['status']).replace('_', ' '))}")
    out.append(f"- **Triage:** {md_inline(triage_text(review))}")
    verdict = _verdict(review)
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
    if review.get("tool_version"):
        out.append(f"- **Quorum version:** {md_inline(review['tool_version'])}")
    if only_accepted:
        out.append("- **Export:** accepted findings only")
    out.append("")
    if review.get("offline"):
        out += [
            "**Offline review:** no language model was used; the findings come from the ruff "
            "and bandit linters through Quorum's offline model.",
            "",
        ]
    return out


def _md_finding(finding: dict) -> list[str]:
    key = md_inline(finding.get("key"))
    title = md_inline(finding.get("title")) or "Untitled finding"
    out = [f"#### {key + ' · ' if key else ''}{title}", ""]
    out.append(f"- **Location:** {_location(finding)}")
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
        state = "reviewed in part" if item.get("reviewed") else "not reviewed"
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
    out = _md_header(review, only_accepted)

    summary = md_block(review.get("summary"))
    out += ["## Summary", "", summary or "No summary.", ""]
    out += [f"- {md_inline(note, at_start=True)}" for note in review.get("notes") or ()
            if str(note).strip()]
    if review.get("notes"):
        out.append("")

    counts = _counts(findings)
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
            if (_severity(f) == severity)
            or (severity is None and _severity(f) not in SEVERITIES)
        ]
        if not group:
            continue
        heading = severity.title() if severity else "Other"
        out += [f"### {heading} ({len(group)})", ""]
        for finding in group:
            out += _md_finding(finding)

    if not only_accepted:
        dropped = _ordered(review.get("dropped"))
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


# --------------------------------------------------------------------------- dispatch


def render(review: dict, fmt: str, *, only_accepted: bool = False) -> str:
    """The review as text in one of ``EXPORT_FORMATS``; ValueError for any other format."""
    if fmt == "markdown":
        return to_markdown(review, only_accepted=only_accepted)
    if fmt == "json":
        return to_json(review, only_accepted=only_accepted)
    if fmt == "sarif":
        return json.dumps(to_sarif(review, only_accepted=only_accepted), indent=2)
    raise ValueError(f"unknown export format: {fmt!r}")
