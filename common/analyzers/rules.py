"""What the analyzers are asked to check, and what their results mean here: the ruff and bandit
command-line choices, the category and severity of each rule, and rule-code helpers."""

from __future__ import annotations

import re

# Suppression comments (noqa, nosec) are part of the untrusted change: the tools are told to
# ignore them, so that the reviewers see what they would hide.
IGNORE_SUPPRESSIONS = True

RUFF_SELECT = "S,B,BLE,C90,TRY,E,W,N,F,SIM,UP"
# Ignored everywhere: E501 (line length is the project's formatter's business), W291/W293
# (trailing whitespace: invisible and noisy), W391 (blank line at end of file) and TRY003
# (a message built at the raise site, which nearly all Python code does). Rules that are
# artefacts of analyzing a fragment (undefined/unused names, import position, ...) are not
# ignored here, because for whole files they are real findings; they are dropped for fragments
# only, see ``FRAGMENT_ARTEFACTS``.
RUFF_IGNORE = "E501,W291,W293,W391,TRY003"
RUFF_TARGET = "py311"

# Rules that a cut-out fragment triggers by construction: names defined or used outside the
# hunk (F401, F811, F821-F823, F841), imports below other code (E402), a late __future__ import
# (F404), return/yield/break/continue outside their function or loop (F701-F706), no newline
# at the end (W292).
FRAGMENT_ARTEFACTS = frozenset({"F401", "F404", "F701", "F702", "F704", "F706", "F811",
                                 "F821", "F822", "F823", "F841", "E402", "W292"})

SYNTAX_RULE = "E999"
SYNTAX_CODES = frozenset({"E999", "invalid-syntax", "syntax-error", ""})

# Bandit tests that become "critical" when bandit rates them HIGH severity and HIGH confidence:
# shell commands, exec, eval, pickle and yaml.load.
CRITICAL_BANDIT = frozenset({"B602", "B605", "B307", "B301", "B506", "B102"})

BANDIT_SEVERITY = {"HIGH": "high", "MEDIUM": "medium", "LOW": "low"}
BANDIT_CONFIDENCE = {"HIGH": 0.9, "MEDIUM": 0.7, "LOW": 0.5}

# Category and severity of each analyzer rule, deliberately: rule or rule prefix ->
# (category, severity); the longest key that the rule starts with wins (``F541`` before
# ``F``). The policy:
# * security (flake8-bandit ``S``): injection and code execution high, the rest medium;
#   hard-coded passwords (S105-S107) medium, a "possible secret" of no known format (a
#   provider key of a known format is found, critical or high, by ``secret_keys``);
#   habits that are only risky in some places (assert, random, subprocess without a
#   shell, importing subprocess or pickle) low or info.
# * architecture: likely bugs (pyflakes ``F``, bugbear ``B``) medium; unused names and
#   broad or verbose exception handling low; a whole file's syntax error high.
# * style: formatting, naming, simplifications, modern syntax and f-string nits are low.
#   They never decide a verdict (see ``reviews_app.pipeline.synthesis.verdict_findings``).
RUFF_RULES: dict[str, tuple[str, str]] = {
    "S": ("security", "medium"),
    "S102": ("security", "high"), "S307": ("security", "high"),
    "S602": ("security", "high"), "S604": ("security", "high"), "S605": ("security", "high"),
    "S301": ("security", "high"), "S506": ("security", "high"), "S608": ("security", "high"),
    "S105": ("security", "medium"), "S106": ("security", "medium"),
    "S107": ("security", "medium"),
    "S101": ("security", "info"),
    "S110": ("security", "low"), "S112": ("security", "low"), "S311": ("security", "low"),
    "S603": ("security", "low"), "S607": ("security", "low"), "S403": ("security", "low"),
    "S404": ("security", "low"),
    "B": ("architecture", "medium"),
    "BLE": ("architecture", "low"), "TRY": ("architecture", "low"),
    "C90": ("architecture", "low"),
    "F": ("architecture", "medium"),
    "F401": ("architecture", "low"), "F811": ("architecture", "low"),
    "F841": ("architecture", "low"),
    "F5": ("style", "low"),  # %-format and str.format nits; F541: f-string without fields
    "E999": ("architecture", "high"), "E9": ("architecture", "high"),
    "E": ("style", "low"), "W": ("style", "low"), "N": ("style", "low"),
    "SIM": ("style", "low"), "UP": ("style", "low"),
}
# Rules of F5 that are real bugs rather than nits (a format string and its arguments that
# do not match raise at run time).
RUFF_RULES.update(dict.fromkeys(("F501", "F502", "F503", "F504", "F505", "F506", "F507",
                                 "F508", "F509", "F521", "F522", "F523", "F524", "F525"),
                                ("architecture", "medium")))

# Bandit's own severity stands, except where the policy above says otherwise.
BANDIT_RULES: dict[str, tuple[str, str]] = {
    "B105": ("security", "medium"), "B106": ("security", "medium"),
    "B107": ("security", "medium"),
    "B101": ("security", "info"),
    "B403": ("security", "low"), "B404": ("security", "low"),
}


def rule_policy(table: dict[str, tuple[str, str]], rule: str) -> tuple[str, str] | None:
    """(category, severity) of the longest key in ``table`` that ``rule`` starts with."""
    for n in range(len(rule), 0, -1):
        if rule[:n] in table:
            return table[rule[:n]]
    return None


RULE_RE = re.compile(r"^([A-Z]+)(\d+)$")


def rule_parts(rule: str) -> tuple[str, str]:
    m = RULE_RE.match(rule or "")
    return (m.group(1), m.group(2)) if m else (rule or "", "")


def is_bugbear(rule: str) -> bool:
    """flake8-bugbear codes (B0xx, B9xx) share the B prefix with bandit's (B1xx-B7xx)."""
    prefix, num = rule_parts(rule)
    return prefix == "B" and bool(num) and not 100 <= int(num) < 900


def ruff_policy(rule: str) -> tuple[str, str]:
    if rule == SYNTAX_RULE:
        return RUFF_RULES[SYNTAX_RULE]
    return rule_policy(RUFF_RULES, rule) or ("style", "low")
