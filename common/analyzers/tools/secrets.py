"""detect-secrets over every changed file, whatever its type (its scanner on the lines each
file adds, see ``_CHILD``; its report names a secret's type and line and only a hash of the value, so
nothing secret comes back from it). Our own key formats (``common.secret_keys``) run in
process next to it; where both report a line, ours is kept (it names the provider and how to
revoke the key). A ``pragma: allowlist secret`` comment is ignored: like ``# noqa`` it is part
of the untrusted change.

Grades: a key of a known provider format (AWS, GitHub, Stripe, Slack, private keys, JWTs,
...) security/high; a secret-sounding name given a literal ("Secret Keyword") security/medium;
a high-entropy string of no known format security/low (often a hash or an id)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ..inputs import KINDS
from .base import Tool, WarmStart, item, unit_for

NAME = "detect-secrets"
_KEYWORD = "Secret Keyword"
_ENTROPY = frozenset({"Base64 High Entropy String", "Hex High Entropy String"})
_DISABLED_PLUGINS = ("IPPublicDetector",)  # public IP addresses are not secrets
_DISABLED_FILTERS = ("detect_secrets.filters.allowlist.is_line_allowlisted",)
# A line any detect-secrets plugin can report has one of these: a secret-sounding word (its
# keyword detector, private keys), a long token (provider keys, high-entropy strings, JWTs),
# credentials in a URL (basic auth) or an Artifactory key prefix. Lines without any are not
# handed to it (most code lines): the scan then takes a fraction of the time.
_WORTH_SCANNING = re.compile(
    r"[A-Za-z0-9+/=_-]{16,}|://[^\s/]*@|(?i:key|pass|pwd|secret|token|contrase|credential|auth"
    r"|bearer)|AKC[A-Za-z0-9]{10}|AP[0-9A-F][A-Za-z0-9]{8}")


def worth_scanning(line: str) -> bool:
    return bool(_WORTH_SCANNING.search(line))


# The detect-secrets CLI scans several files through a multiprocessing pool of one process per
# CPU, which costs seconds per run on a busy host; this runs its own API (the same plugins and
# filters as ``detect-secrets scan``) over the files one by one in one child process, with
# Python in isolated mode. It prints the types and lines only, never a secret's value.
_CHILD = """
import json, sys
from detect_secrets.core.scan import scan_file
from detect_secrets.settings import default_settings
out = {}
with default_settings() as settings:
    settings.disable_plugins(*PLUGINS)
    settings.disable_filters(*FILTERS)
    for name in sys.argv[1:]:
        # Documentation's sample keys (AWS's AKIAIOSFODNN7EXAMPLE) are not secrets.
        found = [{"type": s.type, "line_number": s.line_number} for s in scan_file(name)
                 if "example" not in (s.secret_value or "").lower()]
        if found:
            out[name] = found
print(json.dumps({"results": out}))
""".replace("PLUGINS", repr(_DISABLED_PLUGINS)).replace("FILTERS", repr(_DISABLED_FILTERS))


def _python_for(exe: str) -> str:
    """The Python of the environment that installed ``detect-secrets`` (the one its script
    names); the script itself when it does not exist, so that starting it fails as a missing
    tool does."""
    script = Path(exe)
    for name in ("python", "python3"):
        candidate = script.with_name(name)
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return sys.executable if script.is_file() else exe


def _cmd(exe: str, names: list[str], work: Path) -> list[str]:
    return [_python_for(exe), "-I", "-c", _CHILD, *names]


def _warm_argv(argv: list[str]) -> list[str] | None:
    """``sys.argv`` of ``_CHILD`` run as ``_cmd`` runs it (``python -I -c _CHILD names``)."""
    return ["-c", *argv[4:]] if argv[1:4] == ["-I", "-c", _CHILD] else None


def grade(kind: str) -> tuple[str, float]:
    if kind in _ENTROPY:
        return "low", 0.55
    if kind == _KEYWORD:
        return "medium", 0.6
    return "high", 0.85


def _slug(kind: str) -> str:
    return "secret-" + (re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") or "unknown")


def parse(data, units, inputs, errors: list[str]) -> list[dict]:
    results = data.get("results") if isinstance(data, dict) else None
    best: dict[tuple[str, int], dict] = {}
    order = ("critical", "high", "medium", "low", "info")
    for filename, found in (results or {}).items() if isinstance(results, dict) else ():
        unit = unit_for(units, filename)
        if unit is None or not isinstance(found, list):
            continue
        path = inputs[unit.index].path
        for s in found:
            if not isinstance(s, dict):
                continue
            kind = str(s.get("type") or "secret")[:80]
            severity, confidence = grade(kind)
            ev = item(unit, inputs, tool=NAME, rule=_slug(kind), category="security",
                      severity=severity, confidence=confidence, line=s.get("line_number"),
                      end=s.get("line_number"),
                      # Not "rule: word…": a masker would take the word after the
                      # rule id for an assigned secret.
                      message=f"A possible secret ({kind}) is written into {path}, says "
                              "detect-secrets; the value is not repeated here.",
                      tool_fix="If it is a real secret, take it out of the file, read it from "
                               "the environment or a secrets manager, and rotate it (it stays "
                               "in the git history)")
            if ev is None:
                continue
            key = (ev["file"], ev["line"])
            if key not in best or order.index(severity) < order.index(best[key]["severity"]):
                best[key] = ev
    return list(best.values())


def dedupe(ours: list[dict], theirs: list[dict]) -> list[dict]:
    """detect-secrets' items on lines where no other secrets or password result is."""
    taken = {(e.get("file"), n) for e in ours if e.get("line")
             for n in range(e["line"], (e.get("end_line") or e["line"]) + 1)}
    return [e for e in theirs if (e["file"], e["line"]) not in taken]


DETECT_SECRETS = Tool(name=NAME, package="detect-secrets",
                      kinds=frozenset(KINDS),
                      command=_cmd, parse=parse, ok_codes=(0,), reads_code=False,
                      private_home=True, keep_line=worth_scanning,
                      about="every file type: secrets",
                      warm=WarmStart(("detect_secrets.core.scan", "detect_secrets.settings"),
                                     _CHILD, _warm_argv))
