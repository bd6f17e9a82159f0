"""Other analyzers' findings, imported from SARIF 2.1.0 (CodeQL, ESLint, gitleaks, Semgrep...).

The file is untrusted: it is parsed as JSON only (never executed), size-checked before it is
decoded, refused with one clear :class:`ValueError` message when it is not SARIF 2.1.0, and
each result becomes an evidence item of the same shape as ruff's and bandit's
(``evidence._evidence``), so reviewers and the offline model use it the same way. Paths are
kept relative to the repository: absolute paths outside it and ``..`` are refused (the result
is dropped and counted in a note). Messages are masked (gitleaks quotes the secret it found).
An imported result proves only that its tool ran on the file it names; coverage uses it so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from posixpath import normpath
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, ValidationError

from ..secret_keys import mask

MAX_RESULTS = 2000
MAX_DEPTH = 64
_TOOL_RE = re.compile(r"[^A-Za-z0-9_.+-]+")
_SECRET_TOOLS = ("gitleaks", "trufflehog", "detect-secrets", "secret")
# Rule names that say security whatever the tool (ESLint's no-eval, security plugins...).
_SECURITY_WORDS = re.compile(r"eval|inject|xss|secret|password|credential|crypto|sql|csrf|"
                             r"ssrf|unsafe|insecure|prototype-pollution|new-func|script-url",
                             re.IGNORECASE)
_LEVEL_SEVERITY = {"error": "high", "warning": "medium", "note": "low", "none": "info"}


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Rule(_Loose):
    id: str | None = None
    name: str | None = None
    helpUri: str | None = None
    properties: dict | None = None
    defaultConfiguration: dict | None = None


class _Driver(_Loose):
    name: str
    rules: list[_Rule] = []


class _Tool(_Loose):
    driver: _Driver


class _Run(_Loose):
    tool: _Tool
    results: list | None = []
    originalUriBaseIds: dict | None = None


class _Log(_Loose):
    version: str
    runs: list[_Run]


@dataclass
class SarifImport:
    evidence: list[dict] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _depth_ok(data: bytes) -> bool:
    """No nesting deeper than MAX_DEPTH (counted on the raw text, strings skipped), so a
    hostile file cannot exhaust the JSON parser's recursion."""
    depth = 0
    in_str = esc = False
    for ch in data.decode("utf-8", "replace"):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def tool_name(name: str) -> str:
    """A driver name fit to show and to key coverage by: safe characters, at most 40."""
    cleaned = _TOOL_RE.sub("-", str(name or "")).strip("-.").lower()[:40]
    return cleaned or "sarif"


def clean_path(uri: str) -> tuple[str, bool] | None:
    """``(path, absolute)`` from an artifact URI, or None when it cannot name a file of the
    repository (``..``, another scheme, NUL). A relative path is relative to the repository;
    an absolute one (ESLint writes ``file:///ci/checkout/src/a.ts``) is only kept to be matched
    against the change's files by its ending (``imported.join``), never opened."""
    if not isinstance(uri, str) or not uri.strip() or "\x00" in uri:
        return None
    path = uri.strip()
    if path.lower().startswith("file://"):
        path = path[len("file://"):]
        if path.lower().startswith("localhost/"):
            path = path[len("localhost"):]
    path = unquote(path).replace("\\", "/")
    if "\x00" in path:
        return None
    absolute = path.startswith("/") or bool(re.match(r"^/?[A-Za-z]:/", path))
    if not absolute and ":" in path.split("/")[0]:
        return None  # another scheme (http:, ...): not a file of the repository
    while path.startswith("./"):
        path = path[2:]
    if any(part == ".." for part in path.split("/")):
        return None
    path = normpath(path).lstrip("/") if absolute else normpath(path)
    if path in ("", "."):
        return None
    return ("/" + path if absolute else path), absolute


def _severity(level: str | None, rule_props: dict, result_props: dict) -> str | None:
    for props in (result_props, rule_props):
        raw = props.get("security-severity")
        try:
            score = float(raw) if raw is not None else None
        except (TypeError, ValueError):
            score = None
        if score is not None:
            return ("critical" if score >= 9 else "high" if score >= 7
                    else "medium" if score >= 4 else "low")
    for props in (result_props, rule_props):
        sev = str(props.get("severity") or props.get("problem.severity") or "").lower()
        if sev in ("critical", "high", "medium", "low"):
            return sev
        if sev in ("error", "warning", "note", "recommendation"):
            return _LEVEL_SEVERITY.get(sev, "low")
    return None


def _category(tool: str, rule_id: str, level: str, rule_props: dict,
              result_props: dict) -> str:
    tags = [str(t).lower() for p in (rule_props, result_props)
            for t in (p.get("tags") or []) if isinstance(p.get("tags"), list)]
    text = f"{tool} {rule_id}".lower()
    if (any(t == "security" or t.startswith("external/cwe") or t.startswith("cwe")
            for t in tags) or "security-severity" in rule_props or "security-severity"
            in result_props or any(s in text for s in _SECRET_TOOLS) or "security" in text
            or _SECURITY_WORDS.search(rule_id)):
        return "security"
    return "style" if level == "note" else "architecture"


def _text(value, limit: int = 1000) -> str:
    if isinstance(value, dict):
        value = value.get("text") or value.get("markdown") or ""
    return mask(" ".join(str(value or "").split())[:limit])


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _location(result: dict, bases: dict) -> tuple[tuple[str, bool] | None, int | None,
                                                   int | None]:
    locs = result.get("locations")
    loc = _dict(locs[0] if isinstance(locs, list) and locs else None)
    phys = _dict(loc.get("physicalLocation"))
    art = _dict(phys.get("artifactLocation"))
    uri = art.get("uri")
    base = art.get("uriBaseId")
    if isinstance(base, str) and isinstance(bases.get(base), dict):
        prefix = str(bases[base].get("uri") or "")
        # A base that is itself relative (e.g. "src/") prefixes the path; an absolute one
        # (file:///home/ci/checkout/) is the repository root.
        if prefix and not prefix.startswith(("file:", "/")) and isinstance(uri, str):
            uri = prefix.rstrip("/") + "/" + uri
    region = _dict(phys.get("region"))
    line = _int(region.get("startLine"))
    end = _int(region.get("endLine")) or line
    if line and end and end < line:
        end = line
    return (clean_path(uri) if uri is not None else None), line, end


def _decode(data: bytes, name: str, max_bytes: int) -> dict:
    if not isinstance(data, bytes | bytearray):
        raise ValueError(f"{name}: not a file.")
    if len(data) > max_bytes:
        raise ValueError(f"{name} is {len(data):,} bytes, over the {max_bytes:,}-byte limit "
                         "for SARIF files.")
    if not data.strip():
        raise ValueError(f"{name} is empty: expected a SARIF 2.1.0 JSON file.")
    if b"\x00" in data:
        raise ValueError(f"{name} contains NUL bytes: expected a SARIF 2.1.0 JSON file.")
    if not _depth_ok(data):
        raise ValueError(f"{name} is nested more than {MAX_DEPTH} levels deep: not SARIF.")
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError(f"{name} is not valid JSON: expected a SARIF 2.1.0 file.") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{name} is not a SARIF log (a JSON object with runs).")
    if str(doc.get("version")) != "2.1.0":
        raise ValueError(f"{name} is SARIF version {str(doc.get('version'))[:20]!r}; only "
                         "2.1.0 is supported.")
    return doc


def read_sarif(data: bytes, *, name: str, max_bytes: int) -> SarifImport:
    """Evidence items from one SARIF 2.1.0 file. Raises ValueError with one clear sentence."""
    name = "".join(c for c in str(name or "")[:100] if c.isprintable()) or "The SARIF file"
    doc = _decode(data, name, max_bytes)
    try:
        log = _Log.model_validate(doc)
    except ValidationError as exc:
        where = ".".join(str(p) for p in exc.errors()[0]["loc"])
        raise ValueError(f"{name} is not a SARIF 2.1.0 log: {where or 'the document'} is "
                         "missing or of the wrong type.") from None
    out = SarifImport()
    outside = capped = skipped = 0
    for run in log.runs:
        tool = tool_name(run.tool.driver.name)
        if tool not in out.tools:
            out.tools.append(tool)
        rules = {r.id: r for r in run.tool.driver.rules if r.id}
        by_index = list(run.tool.driver.rules)
        bases = run.originalUriBaseIds or {}
        for result in run.results or []:
            if not isinstance(result, dict):
                skipped += 1
                continue
            if len(out.evidence) >= MAX_RESULTS:
                capped += 1
                continue
            rule_id = str(result.get("ruleId") or "")
            idx = result.get("ruleIndex")
            rule = rules.get(rule_id) or (by_index[idx] if isinstance(idx, int)
                                          and 0 <= idx < len(by_index) else None)
            rule_id = rule_id or (rule.id if rule and rule.id else "") or "sarif"
            rule_props = (rule.properties if rule and rule.properties else {}) or {}
            result_props = result.get("properties")
            result_props = result_props if isinstance(result_props, dict) else {}
            level = str(result.get("level") or "")
            if level not in _LEVEL_SEVERITY:
                cfg = (rule.defaultConfiguration if rule else None) or {}
                level = str(cfg.get("level")) if cfg.get("level") in _LEVEL_SEVERITY \
                    else "warning"
            located, line, end = _location(result, bases)
            if located is None:
                outside += 1
                continue
            path, absolute = located
            message = _text(result.get("message")) or f"{tool} rule {rule_id}"
            out.evidence.append({
                "tool": tool, "rule": _text(rule_id, 120),
                "category": _category(tool, rule_id, level, rule_props, result_props),
                "severity": _severity(level, rule_props, result_props) or (
                    # a secrets scanner's finding is a live credential until shown otherwise
                    "high" if any(t in tool for t in _SECRET_TOOLS)
                    else _LEVEL_SEVERITY[level]),
                "confidence": 0.8 if level == "error" else 0.7,
                "file": path, "line": line, "end_line": end, "message": message,
                "url": (rule.helpUri if rule and isinstance(rule.helpUri, str)
                        and rule.helpUri.startswith("https://") else "")[:300],
                "on_changed_line": True, "tool_fix": None, "imported": True,
                **({"absolute_path": True} if absolute else {})})
    if capped:
        out.notes.append(f"{name}: only the first {MAX_RESULTS} results were imported; "
                         f"{capped} more were left out.")
    if outside:
        out.notes.append(f"{name}: {outside} result(s) without a location inside the "
                         "repository were left out.")
    if skipped:
        out.notes.append(f"{name}: {skipped} malformed result(s) were left out.")
    return out
