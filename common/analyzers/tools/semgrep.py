"""Semgrep with our own rules only (``../semgrep_rules``): JavaScript, TypeScript, Go, Java,
shell, PHP, Ruby, C# and Kotlin, Terraform (HCL), YAML (Kubernetes manifests, GitHub Actions
workflows) and SQL (generic rules limited to ``*.sql``), and taint rules for Python and
JavaScript web code (request values of Flask, Django, FastAPI and Express reaching files,
URLs, redirects, HTML, XML parsers, LDAP and XPath queries, cookies and sessions). It runs
offline: a local rules folder (never the registry), metrics and version checks
off, a private HOME and XDG directories in the run's temporary directory.

semgrep is started with ``--experimental`` (see ``_cmd``). Each rule says its severity (critical/high/medium/low/info, which semgrep accepts as is) and,
in its metadata, our reviewers' category (security/architecture/style), a CWE and a
confidence (HIGH/MEDIUM/LOW)."""

from __future__ import annotations

import re
from pathlib import Path

from .base import Tool, item, unit_for

RULES_DIR = Path(__file__).resolve().parent.parent / "semgrep_rules"
_SEVERITY = {"critical": "critical", "high": "high", "medium": "medium", "low": "low",
             "info": "info", "error": "high", "warning": "medium"}
_CONFIDENCE = {"HIGH": 0.9, "MEDIUM": 0.75, "LOW": 0.55}
_CATEGORIES = frozenset({"security", "architecture", "style"})
# Our rules' messages are "What is wrong: why it matters. What to do instead." The first
# sentence is the message, the rest the fix.
_SENTENCE_END = re.compile(r"(?<=[a-z)`])\.\s+(?=[A-Z`])")


def split_message(text: str) -> tuple[str, str]:
    """(problem, remedy) of one of our rules' messages."""
    parts = _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)
    problem = parts[0].rstrip(".") + "."
    return problem, (parts[1].strip() if len(parts) > 1 else "")


# The rule folders each generated file's extension needs (``inputs.suffix_for``). A folder
# no extension names here (another kind of file's rules) is always read, so that a new folder
# works before it is listed.
FOLDERS_BY_SUFFIX: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "cts"),
                    ("javascript", "javascript_taint")),
    "py": ("python_taint",), "go": ("go",), "java": ("java",), "sh": ("bash",),
    "php": ("php",), "rb": ("ruby",), "cs": ("csharp",), "kt": ("kotlin",), "kts": ("kotlin",),
    "tf": ("terraform",), "tfvars": ("terraform",), "sql": ("sql",),
    **dict.fromkeys(("yml", "yaml"), ("kubernetes", "github_actions")),
}


def rule_folders(names: list[str]) -> list[Path]:
    """The rule folders for these generated files: one semgrep process reads them all, and
    only them (each folder more is parse time at start-up)."""
    listed = {f for folders in FOLDERS_BY_SUFFIX.values() for f in folders}
    wanted = {f for n in names for f in FOLDERS_BY_SUFFIX.get(Path(n).suffix[1:].lower(), ())}
    return [p for p in sorted(RULES_DIR.iterdir())
            if p.is_dir() and (p.name in wanted or p.name not in listed)]


def _cmd(exe: str, names: list[str], work: Path) -> list[str]:
    # --experimental: semgrep's own OCaml command line (osemgrep). It gives the same results
    # on our rules' tests and starts in ~0.4 s instead of ~5 s for the Python wrapper.
    configs = [arg for folder in rule_folders(names) for arg in ("--config", str(folder))]
    return [exe, "scan", "--experimental", *configs, "--metrics=off",
            "--disable-version-check", "--disable-nosem", "--json", "--quiet", "--no-git-ignore",
            "--timeout", "20", "--max-target-bytes", "5000000", "--", *names]


def _rule_id(check_id: str) -> str:
    # semgrep prefixes the id with the rules folder's path, dotted: keep our id.
    return check_id.rsplit(".", 1)[-1] if check_id else "semgrep"


def parse(data, units, inputs, errors: list[str]) -> list[dict]:
    out: list[dict] = []
    if not isinstance(data, dict):
        return out
    seen: set[tuple] = set()
    for err in data.get("errors") or []:
        if not isinstance(err, dict):
            continue
        unit = unit_for(units, err.get("path"))
        if unit is None:
            if str(err.get("level") or "").lower() == "error":
                errors.append(f"semgrep: {str(err.get('message') or err.get('type'))[:300]}")
            continue
        # A cut fragment does not parse by construction; a whole file that does not parse
        # was read only in part, which reviewers should know.
        if not unit.fragment:
            errors.append(f"semgrep read {inputs[unit.index].path} only in part: it does not "
                          f"parse as {inputs[unit.index].kind}.")
    for res in data.get("results") or []:
        if not isinstance(res, dict):
            continue
        unit = unit_for(units, res.get("path"))
        if unit is None:
            continue
        extra: dict = res["extra"] if isinstance(res.get("extra"), dict) else {}
        meta: dict = extra["metadata"] if isinstance(extra.get("metadata"), dict) else {}
        category = str(meta.get("category") or "security")
        cwe = meta.get("cwe")
        message, remedy = split_message(str(extra.get("message") or ""))
        if isinstance(cwe, str) and cwe:
            message = f"{message[:-1]} ({cwe.split(':')[0]})."
        ev = item(unit, inputs, tool="semgrep", rule=_rule_id(str(res.get("check_id") or "")),
                  category=category if category in _CATEGORIES else "security",
                  severity=_SEVERITY.get(str(extra.get("severity") or "").lower(), "medium"),
                  confidence=_CONFIDENCE.get(str(meta.get("confidence") or "").upper(), 0.7),
                  line=(res.get("start") or {}).get("line"),
                  end=(res.get("end") or {}).get("line"), message=message,
                  url=str(meta.get("references") or "") if isinstance(meta.get("references"),
                                                                      str) else None,
                  tool_fix=remedy.rstrip(".") or None)
        # A rule with several patterns reports one line once per pattern that matched it.
        if ev is None:
            continue
        key = (ev["rule"], ev["file"], ev["line"])
        if key not in seen:
            seen.add(key)
            out.append(ev)
    return out


def scanned(data) -> set[str] | None:
    """The generated names semgrep says it scanned (None: it did not say)."""
    paths = data.get("paths") if isinstance(data, dict) else None
    if not isinstance(paths, dict) or not isinstance(paths.get("scanned"), list):
        return None
    return {Path(str(p)).name for p in paths["scanned"]}


SEMGREP = Tool(name="semgrep", package="semgrep",
               kinds=frozenset({"javascript", "typescript", "go", "java", "shell", "python",
                                "php", "ruby", "csharp", "kotlin", "terraform", "workflow",
                                "yaml", "sql"}),
               command=_cmd, parse=parse, private_home=True,
               env={"SEMGREP_ENABLE_VERSION_CHECK": "0", "SEMGREP_SEND_METRICS": "off"},
               about="JavaScript, TypeScript, Go, Java, shell, PHP, Ruby, C#, Kotlin, "
                     "Terraform, Kubernetes manifests and other YAML, workflows, SQL: our own "
                     "security rules; Python and JavaScript web code: our taint rules")
