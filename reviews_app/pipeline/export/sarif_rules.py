"""SARIF rule ids and their descriptors: analyzer rules (ruff, bandit) as tool extensions,
model findings as ``quorum/<category>/<kind>`` rules of the driver, kinds read from the title."""

from __future__ import annotations

import re

from .common import plain

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


def category_slug(value) -> str:
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


class Rules:
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
            message = plain(item.get("message")) or f"{tool} rule {rule_id}"
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
