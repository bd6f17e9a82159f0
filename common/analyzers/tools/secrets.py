"""detect-secrets over every changed file, whatever its type (``detect-secrets scan`` on the
generated files; its report names a secret's type and line and only a hash of the value, so
nothing secret comes back from it). Our own key formats (``common.secret_keys``) run in
process next to it; where both report a line, ours is kept (it names the provider and how to
revoke the key). A ``pragma: allowlist secret`` comment is ignored: like ``# noqa`` it is part
of the untrusted change.

Grades: a key of a known provider format (AWS, GitHub, Stripe, Slack, private keys, JWTs,
...) security/high; a secret-sounding name given a literal ("Secret Keyword") security/medium;
a high-entropy string of no known format security/low (often a hash or an id)."""

from __future__ import annotations

import re
from pathlib import Path

from .base import Tool, item, unit_for

NAME = "detect-secrets"
_KEYWORD = "Secret Keyword"
_ENTROPY = frozenset({"Base64 High Entropy String", "Hex High Entropy String"})
_DISABLED_PLUGINS = ("IPPublicDetector",)  # public IP addresses are not secrets
_DISABLED_FILTERS = ("detect_secrets.filters.allowlist.is_line_allowlisted",)


def _cmd(exe: str, names: list[str], work: Path) -> list[str]:
    cmd = [exe, "scan", "--all-files"]
    for p in _DISABLED_PLUGINS:
        cmd += ["--disable-plugin", p]
    for f in _DISABLED_FILTERS:
        cmd += ["--disable-filter", f]
    return [*cmd, *names]


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
                      message=f"detect-secrets reports a possible secret ({kind}) written "
                              f"into {path}; the value is not repeated here.")
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
                      kinds=frozenset({"python", "javascript", "typescript", "go", "java",
                                       "shell", "dockerfile", "other"}),
                      command=_cmd, parse=parse, ok_codes=(0,), reads_code=False,
                      private_home=True, about="every file type: secrets")
