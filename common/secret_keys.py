"""Secrets in a change: finding them in any file type, and never echoing them whole.

Two jobs, one table of key formats:

* ``scan_files`` checks the added lines of every changed file (Python, TypeScript, shell,
  YAML, .env, Dockerfile, ...) for provider keys of known formats and for values assigned to
  secret-sounding names. A provider key (cloud, payment, source hosting, chat, model APIs,
  private keys) is ``critical`` or ``high`` wherever it appears; a value that is only
  secret-looking, with no known format, is a ``medium`` or ``low`` "possible secret".
* ``mask`` shortens every secret in a text to a short prefix and its length
  (``sk_live_…(32 chars)``). It is applied where findings are made (analyzer evidence, model
  answers) and again where they are stored and shown, so a secret is never repeated whole in
  a finding, a page, an export, a log line or the trace.

Plain Python, no Django (the pipeline's rule). The scanner is regexes on purpose: detect-
secrets is not a dependency yet, and a known key format is what decides the severity here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["KEY_FORMATS", "KeyFormat", "mask", "mask_deep", "mask_finding", "mask_lines",
           "scan_files", "scan_lines"]


@dataclass(frozen=True)
class KeyFormat:
    rule: str        # stable id, shown as the finding's rule and SARIF ruleId
    name: str        # what the key is, in words
    pattern: re.Pattern
    severity: str    # critical: direct access to money, infrastructure or signing
    revoke: str      # where the owner revokes it


def _fmt(rule: str, name: str, pattern: str, severity: str, revoke: str) -> KeyFormat:
    return KeyFormat(rule, name, re.compile(pattern), severity, revoke)


# Order matters where formats overlap: the more specific first (sk-ant- before sk-).
KEY_FORMATS: tuple[KeyFormat, ...] = (
    _fmt("secret-private-key", "private key",
         r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", "critical",
         "replace the key pair and remove the old public key wherever it is trusted"),
    _fmt("secret-aws-access-key-id", "AWS access key ID",
         r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![A-Z0-9])", "critical",
         "deactivate it in AWS IAM"),
    _fmt("secret-aws-secret-access-key", "AWS secret access key",
         r"(?i:aws_?secret_?access_?key|aws_?secret)[\"']?\s*[:=]\s*[\"']?"
         r"[A-Za-z0-9/+]{30,60}(?![A-Za-z0-9/+])", "critical", "deactivate it in AWS IAM"),
    _fmt("secret-stripe-live-key", "Stripe live secret key",
         r"(?<![A-Za-z0-9])[sr]k_live_[0-9A-Za-z]{16,}", "critical",
         "roll it in the Stripe dashboard"),
    _fmt("secret-github-token", "GitHub token",
         r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
         "high", "revoke it in GitHub's developer settings"),
    _fmt("secret-gitlab-token", "GitLab token",
         r"(?<![A-Za-z0-9])gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,}", "high",
         "revoke it in GitLab's access token settings"),
    _fmt("secret-slack-token", "Slack token",
         r"(?<![A-Za-z0-9])xox[abposer]-[A-Za-z0-9-]{10,}", "high",
         "revoke it in the Slack app's settings"),
    _fmt("secret-slack-webhook", "Slack webhook URL",
         r"https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]{16,}",
         "high", "delete the webhook in Slack and create a new one"),
    _fmt("secret-google-api-key", "Google API key",
         r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}", "high",
         "delete it in the Google Cloud console"),
    _fmt("secret-anthropic-key", "Anthropic API key",
         r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{20,}", "high",
         "revoke it in the Anthropic console"),
    _fmt("secret-openai-key", "OpenAI API key",
         r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", "high",
         "revoke it in the OpenAI dashboard"),
    _fmt("secret-npm-token", "npm access token",
         r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}", "high", "revoke it with `npm token revoke`"),
    _fmt("secret-sendgrid-key", "SendGrid API key",
         r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", "high",
         "delete it in SendGrid's API key settings"),
)
POSSIBLE_RULE = "secret-possible"

# A value given to a secret-sounding name: ``password = "…"``, ``API_KEY=…``, ``token: …``.
_NAME = (r"(?<![A-Za-z0-9_])(?i:[A-Za-z0-9_]*(?:secret|passw(?:or)?d|pwd|token|api[_-]?key|apikey"
         r"|access[_-]?key|private[_-]?key|credentials?|auth[_-]?key)[A-Za-z0-9_]*)")
_ASSIGNED = re.compile(
    "(" + _NAME + r")[\"']?\s*(?::=|=>|==|[:=])\s*(?:[bru]?([\"'`])([^\"'`\s]{4,})\2"
    r"|([A-Za-z0-9_+/=@#%^&*!~-]{8,})(?![\w.(\[]))")
# Cheap tests run first on every line (most lines have no secret): plain substring checks,
# much faster than the regexes. Words a secret-sounding name contains (lower case), and the
# literal parts of the key formats.
_SECRET_WORDS = ("secret", "passw", "pwd", "token", "apikey", "api_key", "api-key",
                 "accesskey", "access_key", "access-key", "privatekey", "private_key",
                 "private-key", "credential", "authkey", "auth_key", "auth-key")
_KEY_HINTS = ("AKIA", "ASIA", "ABIA", "ACCA", "_live_", "ghp_", "gho_", "ghu_", "ghs_",
              "ghr_", "github_pat_", "glpat-", "gldt-", "glrt-", "glptt-", "xox",
              "hooks.slack", "AIza", "sk-", "npm_", "SG.", "PRIVATE KEY")


def _has_secret_word(text: str) -> bool:
    low = text.lower()
    return any(w in low for w in _SECRET_WORDS)


def _has_key_hint(text: str) -> bool:
    if any(h in text for h in _KEY_HINTS):
        return True
    low = text.lower()
    return "aws_secret" in low or "awssecret" in low


# Long random-looking runs (base64-like: upper, lower and digits) in free text.
_RANDOM_RUN = re.compile(r"(?<![A-Za-z0-9/+_-])[A-Za-z0-9/+_-]{32,}={0,2}")
_PEM_BLOCK = re.compile(r"(-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)(.*?)"
                        r"(-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S)
_PEM_BEGIN = KEY_FORMATS[0].pattern
_PEM_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_LEADING_WORDS = re.compile(r"^(?:[A-Za-z]{2,10}[_-]){1,3}")
_PLACEHOLDER = re.compile(
    r"(?i)^(?:x+|\*+|\.+|-+|changeme|change_me|password|secret|example|dummy|test|none|null|"
    r"true|false|your[_-].*|<.*>|\$\{?.*\}?|\{\{.*\}\}|%\(.*\)s|.*(?:example|placeholder|"
    r"xxxx|changeme|redacted).*)$")
_MASKED = re.compile(r"…\(\d+ chars\)")
_PEM_DONE = re.compile(r"…\(\d+ chars\)…")


# --- masking ---------------------------------------------------------------------------------
def _short(value: str) -> str:
    """The value as a short prefix and its length: ``sk_live_…(32 chars)``. The prefix is the
    key's format words (``sk_live_``, ``ghp_``, ``sk-ant-``) or its first characters, never
    more than a third of the value, so most of the secret stays unsaid."""
    cap = min(12, len(value) // 3)
    words = _LEADING_WORDS.match(value)
    keep = 0
    if words:
        # Whole format words only, as many as fit under the cap.
        for part in re.findall(r"[A-Za-z]{2,10}[_-]", words.group(0)):
            if keep + len(part) > cap:
                break
            keep += len(part)
    if not keep:
        keep = min(4, cap)
    return f"{value[:keep]}…({len(value)} chars)"


def _random_looking(value: str) -> bool:
    core = value.rstrip("=")
    if len(core) < 16 or not (re.search(r"[a-z]", core) and re.search(r"[A-Z]", core)
                              and re.search(r"[0-9]", core)):
        return False
    return _entropy(core) >= 3.5


def _entropy(value: str) -> float:
    counts = {c: value.count(c) for c in set(value)}
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def mask(text: str) -> str:
    """``text`` with every secret shortened to a prefix and its length. Idempotent."""
    if not text or not isinstance(text, str):
        return text
    text = mask_known(text)
    if _has_secret_word(text):
        text = _ASSIGNED.sub(_mask_assigned, text)
    return _RANDOM_RUN.sub(lambda m: _short(m.group(0)) if _random_looking(m.group(0))
                           else m.group(0), text)


def mask_known(text: str) -> str:
    """``text`` with keys of the known formats and private key blocks shortened, and nothing
    else touched: for text that is not code under review (a run's prompts in the trace), where
    a long random-looking run is more often a hash than a secret."""
    if not text or not isinstance(text, str):
        return text
    if "PRIVATE KEY" in text:
        text = _PEM_BLOCK.sub(_mask_pem, text)
    if _has_key_hint(text):
        for fmt in KEY_FORMATS[1:]:
            text = fmt.pattern.sub(_mask_match_tail, text)
    return text


def _mask_pem(m: re.Match) -> str:
    body = m.group(2)
    if body.strip() and not _PEM_DONE.fullmatch(body):
        body = f"…({len(body)} chars)…"
    return m.group(1) + body + m.group(3)


def _mask_match_tail(m: re.Match) -> str:
    """Mask the key in a match; for ``aws_secret_access_key = …`` only the value part."""
    whole = m.group(0)
    value = re.search(r"[A-Za-z0-9/+]{30,}$", whole) if whole[:3].lower() == "aws" else None
    if value and not whole.startswith(("AKIA", "ASIA", "ABIA", "ACCA")):
        return whole[:value.start()] + _short(value.group(0))
    return _short(whole)


def _mask_assigned(m: re.Match) -> str:
    value = m.group(3) or m.group(4)
    if _MASKED.search(m.group(0)) or _PLACEHOLDER.match(value):
        return m.group(0)
    start, end = m.span(3) if m.group(3) else m.span(4)
    base = m.start(0)
    return m.group(0)[:start - base] + _short(value) + m.group(0)[end - base:]


def mask_lines(lines: list[str]) -> list[str]:
    """Each line masked, and the body lines of a private key block (which say nothing about
    being secret on their own) shown by length only."""
    out, inside = [], False
    for line in lines:
        if inside:
            if _PEM_END.search(line):
                inside = False
                out.append(mask(line))
            else:
                body = line.strip().lstrip("+- ")
                out.append(line.replace(body, f"…({len(body)} chars)") if body else line)
            continue
        if _PEM_BEGIN.search(line) and not _PEM_END.search(line):
            inside = True
        out.append(mask(line))
    return out


def mask_deep(value):
    """Every string inside dicts, lists and tuples masked (a finding, an export's dict)."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {k: mask_deep(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(mask_deep(v) for v in value)
    return value


_FINDING_TEXT = ("title", "description", "suggestion", "message", "fix", "tool_fix",
                 "drop_reason", "snippet", "evidence")


def mask_finding(finding: dict) -> dict:
    """The finding (or evidence item) with its texts masked, in place; returned for chaining."""
    for key in _FINDING_TEXT:
        if key in finding and finding[key]:
            finding[key] = mask_deep(finding[key])
    if finding.get("history"):
        finding["history"] = mask_deep(finding["history"])
    return finding


# --- scanning --------------------------------------------------------------------------------
def _possible(text: str) -> tuple[str, str] | None:
    """(name, value) of a non-placeholder value assigned to a secret-sounding name."""
    if not _has_secret_word(text):
        return None
    for m in _ASSIGNED.finditer(text):
        value = m.group(3) or m.group(4)
        if _PLACEHOLDER.match(value) or _MASKED.search(value):
            continue
        return m.group(1), value
    return None


def _evidence(path: str, line: int, *, rule: str, severity: str, confidence: float,
              message: str, fix: str) -> dict:
    return {"tool": "secrets", "rule": rule, "category": "security", "severity": severity,
            "confidence": confidence, "file": path, "line": line, "end_line": line,
            "message": message, "url": "", "on_changed_line": True, "tool_fix": None,
            "fix": fix}


def _article(name: str) -> str:
    return "An" if name[0] in "AEIOU" else "A"


def scan_lines(path: str, lines: Iterable[tuple[int, str]]) -> list[dict]:
    """Evidence items for the secrets in ``(line number, text)`` pairs of one file: one item
    per line, for its most serious secret."""
    out = []
    for number, text in lines:
        found = None
        for fmt in KEY_FORMATS if _has_key_hint(text) else ():
            m = fmt.pattern.search(text)
            # Documentation's sample keys (AWS's AKIAIOSFODNN7EXAMPLE) are not secrets.
            if m and "example" not in m.group(0).lower():
                found = (fmt, m.group(0))
                break
        if found:
            fmt, value = found
            shown = mask(value) if fmt is not KEY_FORMATS[0] else value
            out.append(_evidence(
                path, number, rule=fmt.rule, severity=fmt.severity, confidence=0.95,
                message=f"{_article(fmt.name)} {fmt.name} is written into {path} ({shown}). "
                        "Anyone who can read the repository can use it.",
                fix=f"Remove the {fmt.name} from line {number} of {path}, {fmt.revoke} (it "
                    "stays in the git history), and read it at run time from the environment "
                    "or a secrets manager."))
            continue
        possible = _possible(text)
        if possible:
            name, value = possible
            random = _random_looking(value)
            out.append(_evidence(
                path, number, rule=POSSIBLE_RULE, severity="medium" if random else "low",
                confidence=0.7 if random else 0.55,
                message=f"Possible secret: `{name}` is given a literal value "
                        f"({_short(value)}) of no known key format.",
                fix=f"If `{name}` on line {number} is a real secret, read it from the "
                    "environment or a secrets manager instead of writing it in the file, and "
                    "rotate it; if it is a placeholder, make that obvious (e.g. `changeme`)."))
    return out


def scan_files(files: list[dict]) -> list[dict]:
    """Evidence for the secrets in the lines each file of the change adds (any file type)."""
    out = []
    for f in files:
        added = [(ln["new"], str(ln.get("text") or "")) for h in f.get("hunks") or []
                 for ln in h.get("lines") or []
                 if ln.get("kind") == "add" and isinstance(ln.get("new"), int)]
        out += scan_lines(str(f.get("path") or ""), added)
    return out


_PASSWORD_RULES = frozenset({"B105", "B106", "B107", "S105", "S106", "S107"})


def _same_line(a: dict, b: dict) -> bool:
    if a.get("file") != b.get("file") or not a.get("line") or not b.get("line"):
        return False
    return a["line"] <= (b.get("end_line") or b["line"]) and \
        b["line"] <= (a.get("end_line") or a["line"])


def combine(found: list[dict], analyzer: list[dict]) -> list[dict]:
    """The secrets scanner's evidence with the analyzers', one item per secret: a key of a
    known format replaces a hard-coded-password result on its line (it says more, and rates
    it higher); a "possible secret" gives way to the analyzers' password result there."""
    keys = [e for e in found if e["rule"] != POSSIBLE_RULE]
    kept_analyzer = [e for e in analyzer if not (
        e.get("rule") in _PASSWORD_RULES and any(_same_line(e, k) for k in keys))]
    passwords = [e for e in kept_analyzer if e.get("rule") in _PASSWORD_RULES]
    kept_found = [e for e in found if e["rule"] != POSSIBLE_RULE
                  or not any(_same_line(e, p) for p in passwords)]
    return kept_found + kept_analyzer
