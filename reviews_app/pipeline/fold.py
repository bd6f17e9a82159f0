"""Style findings that a security finding makes moot, folded into it.

A formatting nit on the line of an injection — ruff's UP031 "use format specifiers instead of
percent format" where the ``%`` builds an SQL query, or "use a template literal" where
JavaScript concatenates one — suggests a fix that still builds the query (or the command, or
the HTML) from the value. Offered beside the security finding it reads as a second, harmless
way to write the same line, and a person who accepts it keeps the injection. The synthesis
folds such a finding into the security one instead: it is dropped, its drop reason names the
security finding and says why, and both findings keep the step in their quality trail (the
page and every export show it; nothing is hidden).

Deterministic and plain Python (no Django), like the rest of the synthesis.
"""

from __future__ import annotations

import re
from typing import Any

from .schema import SEVERITY_RANK

Finding = dict[str, Any]

# Analyzer rules that report a value formatted into something a shell, a database or a browser
# interprets (bandit's and ruff's ids; any rule whose id names an injection is one too).
INJECTION_RULES = frozenset({
    "B601", "B602", "B604", "B605", "B608", "B609", "B610", "B611",
    "S601", "S602", "S604", "S605", "S608", "S609", "S610", "S611",
})
_INJECTION_TEXT = re.compile(r"inject|shell\s*=\s*true|string-based query|cross-site scripting"
                             r"|\bxss\b", re.IGNORECASE)
# Style rules about how a string is built from values (printf-style %, str.format, f-strings,
# joins, implicit concatenation, template literals).
_STRING_RULES = frozenset({"UP030", "UP031", "UP032", "FLY002", "ISC001", "ISC002", "ISC003"})
_STRING_RULE_PREFIXES = ("F50", "F52")  # pyflakes' %-format and str.format checks
_STRING_RULE_NAMES = ("prefer-template", "no-useless-concat")
_STRING_TEXT = re.compile(r"f-string|format specifier|percent format|%-format|printf|"
                          r"str\.format|\.format\(|template literal|template string|"
                          r"string interpolation|concatenat", re.IGNORECASE)
# A suggestion that already says this is not a style fix that keeps the problem.
_FIXES_IT = re.compile(r"parameter|placeholder|\bbind|prepared statement|escap|saniti[sz]|"
                       r"shlex|quote\(|list of arguments|argument list|textcontent",
                       re.IGNORECASE)


def _rules(f: Finding) -> list[str]:
    return [str(r).strip() for r in f.get("rules") or [] if str(r).strip()]


def _is(f: Finding, category: str) -> bool:
    return f.get("category") == category or f.get("kind") == category


def is_injection(f: Finding) -> bool:
    """A security finding about a value built into text that something interprets."""
    if not _is(f, "security"):
        return False
    rules = _rules(f)
    if any(r.upper() in INJECTION_RULES or "injection" in r.lower() for r in rules):
        return True
    return bool(_INJECTION_TEXT.search(f"{f.get('title', '')} {f.get('description', '')}"))


def rewrites_string_building(f: Finding) -> bool:
    """A style finding whose fix only changes how a string is built from its values."""
    if not _is(f, "style"):
        return False
    if _FIXES_IT.search(f"{f.get('suggestion', '')} {f.get('description', '')}"):
        return False
    for r in _rules(f):
        if r.upper() in _STRING_RULES or r.upper().startswith(_STRING_RULE_PREFIXES) and \
                r.upper() != "F541" or any(n in r.lower() for n in _STRING_RULE_NAMES):
            return True
    return bool(_STRING_TEXT.search(f"{f.get('title', '')} {f.get('suggestion', '')}"))


def _span(f: Finding) -> tuple[int, int] | None:
    if not f.get("line"):
        return None
    start = int(f["line"])
    return start, max(start, int(f.get("end_line") or start))


def _overlap(a: Finding, b: Finding) -> bool:
    sa, sb = _span(a), _span(b)
    return (a.get("file") == b.get("file") and sa is not None and sb is not None
            and sa[0] <= sb[1] and sb[0] <= sa[1])


def _where(f: Finding) -> str:
    span = _span(f)
    if span is None:
        return str(f.get("file") or "")
    return f"{f['file']}:{span[0]}" + (f"-{span[1]}" if span[1] > span[0] else "")


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def fold_style_into_security(findings: list[Finding]) -> int:
    """Fold each kept style finding whose fix keeps an injection on its lines into the
    strongest such security finding, in place. Returns how many were folded."""
    security = sorted((f for f in findings if f.get("status") == "kept" and is_injection(f)),
                      key=lambda f: (SEVERITY_RANK.get(f.get("severity"), 9),
                                     -float(f.get("confidence") or 0), f.get("key", "")))
    folded = 0
    for f in findings:
        if f.get("status") != "kept" or not rewrites_string_building(f):
            continue
        into = next((s for s in security if s is not f and _overlap(s, f)), None)
        if into is None:
            continue
        how = ", ".join(_rules(f)) or "its suggestion"
        why = (f"its fix ({how}) only rewrites how the string is built from the values, which "
               f"keeps the injection {into['key']} reports; fixing {into['key']} fixes the line")
        f["status"] = "dropped"
        f["drop_reason"] = (f"folded into {into['key']} \u201c{_short(into.get('title', ''))}"
                            f"\u201d at {_where(into)}: {why}")
        f.setdefault("quality", []).append(
            {"stage": "fold", "action": "fold", "reason": why, "into": into["key"]})
        into.setdefault("quality", []).append(
            {"stage": "fold", "action": "absorb", "key": f["key"],
             "reason": f"{f['key']} ({_short(f.get('title', ''), 60)}) was folded in: its fix "
                       "would keep this problem"})
        folded += 1
    return folded
