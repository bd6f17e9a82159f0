"""The written severity rubric and the finding kinds (categorisation), in our own words.

``RUBRIC`` is what the verifier model is told and what the review page shows under "How
severity is assigned": one severity per finding, by what the problem does, whoever found it.
``default_kind`` gives every finding a kind from what it rests on (analyzer rule ids, the
reviewer's lens, the file's path); the verifier may change it. ``floor`` is the least
severity a finding keeps whatever a model says: an injection or a hard-coded credential that
an analyzer found is never rated below high.
"""

from __future__ import annotations

import re

from ..schema import KINDS, SEVERITY_RANK

# (severity, what it means, examples) — strongest first.
RUBRIC_LEVELS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("critical", "Exploitable now or certain to lose data or take the service down once merged.",
     ("a live provider key or private key committed in the change",
      "user input run as a shell command or passed to eval/exec",
      "deleting or overwriting data for every user on a common path")),
    ("high", "A real defect or vulnerability that will bite in normal use; must be fixed "
             "before merging.",
     ("SQL, shell, HTML or template injection from a value the caller controls",
      "a hard-coded password, token or key (even a test-looking one in shipped code)",
      "unsafe deserialisation (pickle, yaml.load) of input from outside",
      "TLS verification turned off; an open redirect",
      "a crash or wrong result on an ordinary input (wrong condition, None not handled)")),
    ("medium", "A problem that matters under some conditions or makes the next bug likely; "
               "worth a discussion before merging.",
     ("an exception swallowed so a failure goes unnoticed",
      "a race or resource leak under load; a query in a loop on a large table",
      "weak hashing for something that is not a password; a missing timeout",
      "missing tests for a changed branch that decides money, access or data")),
    ("low", "A minor risk or clear improvement that does not change behaviour much; the "
            "author's call.",
     ("a misleading name; a broad except around one line",
      "a duplicated helper; a docstring that no longer matches the function",
      "a slow pattern on a path that handles a few items")),
    ("info", "A remark with no risk of its own.",
     ("formatting or a naming convention", "a simpler way to write the same thing",
      "an assert used as a test-only check")),
)

KIND_TEXT = {
    "security": "a way to attack, leak or misuse the system",
    "bug": "the code does the wrong thing or fails",
    "performance": "the code is slower or heavier than it needs to be",
    "maintainability": "the code is hard to change safely (design, coupling, duplication)",
    "style": "formatting, naming and idiom",
    "documentation": "missing, wrong or stale documentation and comments",
    "tests": "missing, weak or wrong tests",
}


def rubric_text() -> str:
    lines = []
    for sev, meaning, examples in RUBRIC_LEVELS:
        lines.append(f"- {sev}: {meaning} Examples: " + "; ".join(examples) + ".")
    lines.append("Judge what the problem does, not who reported it or how sure they sound. "
                 "Style and documentation nits are low or info.")
    return "\n".join(lines)


def kinds_text() -> str:
    return "\n".join(f"- {k}: {KIND_TEXT[k]}" for k in KINDS)


RUBRIC = rubric_text()

# --- floors: the least severity of some analyzer-backed problems -------------------------------
_INJECTION_RULES = frozenset({
    "S608", "B608", "S602", "B602", "S605", "B605", "S604", "B604", "S102", "B102",
    "S307", "B307", "S301", "B301", "S506", "B506", "S701", "B701", "S501", "B501"})
_CREDENTIAL_RULES = frozenset({"S105", "S106", "S107", "B105", "B106", "B107"})
_DANGER_WORDS = re.compile(
    r"\binjection\b|\beval\(|\bexec\(|\binnerhtml\b|\bdangerouslysetinnerhtml\b"
    r"|\bhard-?coded (?:password|secret|key|token|credential)s?\b", re.IGNORECASE)


def _rules(f: dict) -> set[str]:
    return {str(r).strip() for r in f.get("rules") or () if str(r).strip()}


def floor(f: dict) -> tuple[str, str] | None:
    """(least severity, why) for a finding an analyzer rule or its title marks as dangerous;
    ``None`` when nothing sets a floor. Only security findings get one."""
    rules = _rules(f)
    upper = {r.upper() for r in rules}
    if upper & _INJECTION_RULES:
        return "high", f"injection or code execution ({sorted(upper & _INJECTION_RULES)[0]})"
    if upper & _CREDENTIAL_RULES:
        return "high", f"hard-coded credential ({sorted(upper & _CREDENTIAL_RULES)[0]})"
    keys = sorted(r for r in rules if r.startswith("secret-") and r != "secret-possible")
    if keys:
        return "high", f"a key of a known format ({keys[0]})"
    kind = f.get("kind") or default_kind(f)
    if kind == "security" and _DANGER_WORDS.search(str(f.get("title") or "")):
        return "high", "injection, code execution or a hard-coded credential"
    return None


def stronger(a: str, b: str) -> str:
    return a if SEVERITY_RANK[a] <= SEVERITY_RANK[b] else b


# --- kinds ---------------------------------------------------------------------------------------
_TEST_PATH = re.compile(r"(^|/)(tests?|__tests__|spec)/|(^|/)test_[^/]*$|_test\.[a-z]+$"
                        r"|\.(test|spec)\.[a-z]+$", re.IGNORECASE)
_UNUSED = frozenset({"F401", "F811", "F841"})
_TITLE_KINDS = (
    ("documentation", re.compile(r"\bdocstring|\bdocumentation\b|\bcomment\b|\breadme\b",
                                 re.I)),
    ("tests", re.compile(r"\b(?:missing|no|untested|add) tests?\b|\btest coverage\b", re.I)),
    ("performance", re.compile(r"\bperformance\b|\bslow\b|\bn\+1\b|\bquadratic\b"
                               r"|\bin a loop\b", re.I)))


def _prefix(rule: str) -> str:
    m = re.match(r"^([A-Za-z]+)", rule)
    return m.group(1).upper() if m else ""


def _rule_kind(rule: str, category: str) -> str | None:
    p, up = _prefix(rule), rule.upper()
    if rule.startswith("secret-") or p == "S" or (p == "B" and category == "security"):
        return "security"  # bandit's ids are B1xx-B7xx; ruff's bugbear is architecture
    if p in ("PERF", "FURB") or up.startswith("C4"):
        return "performance"
    if p in ("D", "DOC"):
        return "documentation"
    if up in _UNUSED or up.startswith("C90") or p in ("BLE", "TRY"):
        return "maintainability"
    if up.startswith("F5") and not up.startswith("F50") and not up.startswith("F52"):
        return "style"  # F541 and other format nits
    if p in ("B", "F", "PLE", "ARG") or up.startswith("E9"):
        return "bug"
    if p in ("E", "W", "N", "SIM", "UP", "Q", "I", "COM", "ISC"):
        return "style"
    return None


def default_kind(f: dict) -> str:
    """The kind a finding gets before (or without) the verifier: from its analyzer rules,
    then its reviewer's lens, its title and the file's path."""
    category = str(f.get("category") or "")
    for rule in sorted(_rules(f)):
        kind = _rule_kind(rule, category)
        if kind:
            return kind
    if category == "security":
        return "security"
    title = str(f.get("title") or "")
    for kind, pattern in _TITLE_KINDS:
        if pattern.search(title):
            return kind
    if _TEST_PATH.search(str(f.get("file") or "")):
        return "tests"
    return "style" if category == "style" else "maintainability"
