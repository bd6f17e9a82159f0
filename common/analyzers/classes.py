"""One severity rubric across analyzers: problem classes → (category, severity).

Each analyzer grades its results its own way (ruff's table, bandit's own levels, the
``severity`` a Semgrep rule file states, oxlint's error/warning, an imported SARIF level), so
the same problem could get two grades: bandit rated ``shell=True`` on a parameter critical and
``eval`` of input medium, though both run input as code. Every result whose rule belongs to a
class below is graded by the class instead, whoever reported it (``grade``, applied to the
whole analysis, imported SARIF included), and two results of one class on the same lines are
one problem (``synthesis.same_problem``), so they become one finding with both tools' rules.

The severities follow the written rubric (``reviews_app/pipeline/quality/rubric.py``): input
run as a shell command or as code is critical; SQL, HTML and template injection, unsafe
deserialisation, disabled TLS checks, open redirects, path traversal, SSRF, XXE and
hard-coded credentials are high; weak hashing and ciphers medium; non-cryptographic
randomness low (the analyzers cannot tell what it is for). A result of no class keeps its
analyzer's grade. README "Analyzers" shows the table.
"""

from __future__ import annotations

# class -> (category, severity, what it is)
CLASSES: dict[str, tuple[str, str, str]] = {
    "code-execution": ("security", "critical",
                       "input run as a shell command or as code (shell=True, os.system, eval, "
                       "exec, new Function, child_process.exec, sh -c)"),
    "sql-injection": ("security", "high", "SQL built from values instead of parameters"),
    "html-injection": ("security", "high",
                       "HTML or a template built from values unescaped (XSS)"),
    "unsafe-deserialization": ("security", "high",
                               "pickle, yaml.load, Java/PHP/Ruby object deserialisation"),
    "tls-disabled": ("security", "high", "certificate or host name checks turned off"),
    "open-redirect": ("security", "high", "a redirect to a URL the caller chooses"),
    "path-traversal": ("security", "high", "a file path built from input"),
    "ssrf": ("security", "high", "an outgoing request to a URL built from input"),
    "xxe": ("security", "high", "an XML parser that resolves external entities"),
    "hardcoded-credential": ("security", "high", "a password, token or key in the code"),
    "weak-crypto": ("security", "medium", "MD5/SHA-1 hashing, DES/RC4/ECB ciphers"),
    "insecure-randomness": ("security", "low",
                            "a non-cryptographic random generator (risky only for secrets)"),
}

# Rule ids of ruff (flake8-bandit S…), bandit (B…), oxlint/ESLint and shellcheck.
RULES: dict[str, str] = {
    **dict.fromkeys(("S102", "B102", "S307", "B307", "S602", "B602", "S604", "B604", "S605",
                     "B605", "S609", "B609", "NO-EVAL", "NO-NEW-FUNC", "NO-IMPLIED-EVAL",
                     "NO-SCRIPT-URL", "SC2294"), "code-execution"),
    **dict.fromkeys(("S608", "B608", "S610", "B610", "S611", "B611"), "sql-injection"),
    **dict.fromkeys(("S308", "B308", "S701", "B701", "S702", "B702", "S703", "B703", "S704",
                     "B704", "REACT/NO-DANGER"), "html-injection"),
    **dict.fromkeys(("S301", "B301", "S506", "B506", "S302", "B302"), "unsafe-deserialization"),
    **dict.fromkeys(("S501", "B501", "S502", "B502", "S503", "B503", "S323", "B323"),
                    "tls-disabled"),
    **dict.fromkeys(("S310", "B310"), "ssrf"),
    **dict.fromkeys(("S313", "B313", "S314", "B314", "S320", "B320"), "xxe"),
    **dict.fromkeys(("S105", "B105", "S106", "B106", "S107", "B107"), "hardcoded-credential"),
    **dict.fromkeys(("S303", "B303", "S304", "B304", "S305", "B305", "S324", "B324"),
                    "weak-crypto"),
    **dict.fromkeys(("S311", "B311"), "insecure-randomness"),
}

# Our Semgrep rules are named <language>-<class words> (js-eval-injection,
# go-command-injection, bash-shell-c-injection): the words name the class, for the rules of
# every language, those added later included.
_WORDS: tuple[tuple[str, str], ...] = (
    ("eval-injection", "code-execution"), ("command-injection", "code-execution"),
    ("shell-c-injection", "code-execution"), ("code-injection", "code-execution"),
    ("curl-pipe-shell", "code-execution"), ("shell-injection", "code-execution"),
    ("sql-injection", "sql-injection"), ("html-injection", "html-injection"),
    ("xss", "html-injection"), ("template-injection", "html-injection"),
    ("unsafe-deserialization", "unsafe-deserialization"),
    ("deserialization", "unsafe-deserialization"),
    ("tls-disabled", "tls-disabled"), ("tls-insecure", "tls-disabled"),
    ("tls-trust-all", "tls-disabled"), ("open-redirect", "open-redirect"),
    ("path-traversal", "path-traversal"), ("ssrf", "ssrf"), ("xxe", "xxe"),
    ("weak-crypto", "weak-crypto"), ("weak-random", "insecure-randomness"),
    ("hardcoded-secret", "hardcoded-credential"), ("hardcoded-password", "hardcoded-credential"),
    ("insecure-random", "insecure-randomness"),
)


def class_of(rule: object) -> str:
    """The class of an analyzer rule id, or "" when it is of none."""
    text = str(rule or "").strip()
    if not text:
        return ""
    if found := RULES.get(text.upper()):
        return found
    low = text.lower().rsplit(".", 1)[-1]  # a SARIF id may be dotted: …eval-detected
    for words, cls in _WORDS:
        if low.endswith(words) or f"-{words}-" in f"-{low}-":
            return cls
    return ""


def grade(item: dict) -> dict:
    """Grade one evidence item (``rule``, ``category``, ``severity``) by its class, in place:
    ``class`` is set ("" for none) and, for a class, the category and severity become the
    class's, the analyzer's own kept as ``tool_severity`` when it differs."""
    cls = class_of(item.get("rule"))
    item["class"] = cls
    if cls:
        category, severity, _ = CLASSES[cls]
        if item.get("severity") != severity:
            item["tool_severity"] = item.get("severity")
        item["category"], item["severity"] = category, severity
    return item


def table_text() -> str:
    """The table in words (README and the tests check it against ``CLASSES``)."""
    return "\n".join(f"- {cls}: {sev} ({what})" for cls, (_, sev, what) in CLASSES.items())
