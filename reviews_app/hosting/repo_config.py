"""A repository's ``.quorum.toml``: what to review and how, read from the pull request's *base*
commit (never its head, which the pull request's author controls).

Plain Python (tomllib + pydantic), no Django. ``load()`` never raises: a missing file gives
the defaults without a note; a file that cannot be read at all (over 64 KB, not UTF-8, NUL
bytes, invalid TOML, not a table) gives the defaults for the whole file with one note; any
other mistake (an unknown section or key, a value of the wrong type, a bad glob, a model the
server does not allow) costs only that key, rule or role, which keeps its default, with a
note in plain words. The notes are shown on the review.

    [review]
    include = ["src/**"]          # only these paths (default: every path)
    exclude = ["docs/**", "*.lock"]
    heavy = ["src/core/**"]       # the reviewers read the whole file where it is known
    light = ["tests/**"]          # the reviewers read the diff only
    min_severity = "medium"       # to publish (the [publish] values win)
    min_confidence = 0.7

    [models]                      # per role of the code review; only models the server allows
    security = "gpt-4o"

    [[rules]]                     # told to every reviewer, for the paths of path_glob
    text = "Every SQL query goes through db.query()."
    path_glob = "app/**"          # default "**": the whole repository
    severity = "high"             # default "medium"

    [publish]
    policy = "after_triage"       # or "automatic" or "never" (default: the connection's)
    min_severity = "high"
    min_confidence = 0.8

    [fixes]                       # local git reviews: the command that proves a fix; runs
    test_command = "pytest -q"    # only if the server allows it (reviews_app/fixes/config.py)

Globs: ``*`` and ``?`` stay within one folder, ``**`` spans folders, ``[abc]`` is a class; a
glob without ``/`` matches the file name in any folder (``*.lock``); one ending in ``/``
matches everything under that folder (``docs/``).
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field

PATH = ".quorum.toml"
MAX_BYTES = 65_536
MAX_GLOBS = 200
MAX_GLOB_CHARS = 300
MAX_RULES = 50
MAX_RULE_CHARS = 2000
MAX_NOTES = 30
REVIEW_ROLES = ("security", "architecture", "style", "checker", "verifier", "synthesizer")
SEVERITIES = ("critical", "high", "medium", "low", "info")
POLICIES = ("after_triage", "automatic", "never")

Severity = Literal["critical", "high", "medium", "low", "info"]
Policy = Literal["after_triage", "automatic", "never"]
DEFAULTS_APPLY = "the defaults apply"


class ReviewSection(BaseModel):
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    heavy: list[str] = Field(default_factory=list)
    light: list[str] = Field(default_factory=list)
    min_severity: Severity | None = None
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0)


class Rule(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_RULE_CHARS)
    path_glob: str = "**"
    severity: Severity = "medium"

    @property
    def scope(self) -> str:
        return "repository" if self.path_glob in ("**", "**/*") else "path"


class PublishSection(BaseModel):
    policy: Policy | None = None  # None: the connection's policy
    min_severity: Severity | None = None
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0)


class FixesSection(BaseModel):
    test_command: str = ""  # split into an argument list by fixes/config.py, never run by a shell


class RepoConfig(BaseModel):
    review: ReviewSection = Field(default_factory=ReviewSection)
    models: dict[str, str] = Field(default_factory=dict)
    rules: list[Rule] = Field(default_factory=list)
    publish: PublishSection = Field(default_factory=PublishSection)
    fixes: FixesSection = Field(default_factory=FixesSection)

    # --- what the flow asks ------------------------------------------------------------------
    def included(self, path: str) -> bool:
        """Whether ``path`` is reviewed: it matches ``include`` (when given) and no
        ``exclude``."""
        r = self.review
        if r.include and not any(glob_match(g, path) for g in r.include):
            return False
        return not any(glob_match(g, path) for g in r.exclude)

    def mode_for(self, path: str) -> str | None:
        """"light" or "heavy" when the file says so for ``path`` (light wins), else None."""
        if any(glob_match(g, path) for g in self.review.light):
            return "light"
        if any(glob_match(g, path) for g in self.review.heavy):
            return "heavy"
        return None

    def rules_option(self) -> list[dict]:
        return [{"text": r.text, "scope": r.scope, "path_glob": r.path_glob,
                 "severity": r.severity} for r in self.rules]

    def stored(self) -> dict[str, Any]:
        """The settings as applied (defaults filled; the publish thresholds fall back to the
        ``[review]`` ones), as kept on the review: ``publish`` values of None mean "the
        connection's own setting"."""
        data = self.model_dump()
        pub = data["publish"]
        pub["min_severity"] = pub["min_severity"] or self.review.min_severity
        if pub["min_confidence"] is None:
            pub["min_confidence"] = self.review.min_confidence
        data["rules"] = self.rules_option()
        return data


# --- globs ------------------------------------------------------------------------------------
def glob_problem(glob: object) -> str:
    """Why ``glob`` is not a usable path glob, or "" when it is."""
    if not isinstance(glob, str):
        return "is not a text"
    if not glob.strip():
        return "is empty"
    if len(glob) > MAX_GLOB_CHARS:
        return f"is longer than {MAX_GLOB_CHARS} characters"
    if any(ord(c) < 32 or c == "\x7f" for c in glob):
        return "contains control characters"
    if glob.startswith("/") or re.match(r"^[A-Za-z]:", glob):
        return "is an absolute path (globs are relative to the repository root)"
    if ".." in glob.split("/"):
        return 'contains ".." (globs stay inside the repository)'
    if "\\" in glob:
        return "contains a backslash (use / between folders)"
    depth = 0
    for c in glob:
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
    if depth:
        return 'has a "[" without its "]"'
    return ""


@lru_cache(maxsize=1024)
def _compile(glob: str) -> re.Pattern[str]:
    if glob.endswith("/"):
        glob += "**"
    if "/" not in glob:
        glob = "**/" + glob
    out, i, n = [], 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 1)
            body = glob[i + 1:end]
            neg = body[:1] in ("!", "^")
            body = body[1:] if neg else body
            out.append("[" + ("^" if neg else "") + re.escape(body).replace(r"\-", "-") + "]")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_match(glob: str, path: str) -> bool:
    """Whether repository path ``path`` matches ``glob`` (a bad glob matches nothing)."""
    if glob_problem(glob):
        return False
    return _compile(glob).match(path.lstrip("/")) is not None


# --- loading ----------------------------------------------------------------------------------
def _shown(value: object, n: int = 60) -> str:
    text = repr(value)
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= n else text[:n - 1] + "…"


def _severity(value: object) -> str | None:
    v = value.strip().lower() if isinstance(value, str) else None
    return v if v in SEVERITIES else None


def _confidence(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def _policy(value: object) -> str | None:
    v = value.strip().lower() if isinstance(value, str) else None
    return v if v in POLICIES else None


_ONE_OF = "should be one of {}"
_CHECKS: dict[str, tuple[Any, str]] = {
    "min_severity": (_severity, _ONE_OF.format(", ".join(SEVERITIES))),
    "min_confidence": (_confidence, "should be a number from 0 to 1"),
    "policy": (_policy, _ONE_OF.format(", ".join(POLICIES))),
}
_REVIEW_KEYS = ("include", "exclude", "heavy", "light", "min_severity", "min_confidence")
_PUBLISH_KEYS = ("policy", "min_severity", "min_confidence")


def _section(name: str, raw: object, keys: tuple[str, ...], notes: list[str]) -> dict:
    if not isinstance(raw, dict):
        notes.append(f"[{name}] should be a table (a [{name}] section); it was ignored and "
                     f"{DEFAULTS_APPLY}.")
        return {}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in keys:
            notes.append(f"[{name}] has an unknown key {_shown(key)} (known: "
                         f"{', '.join(keys)}); it was ignored.")
            continue
        where = f"[{name}] {key}"
        if key in _CHECKS:
            check, why = _CHECKS[key]
            got = check(value)
            if got is None:
                notes.append(f"{where} = {_shown(value)} {why}; the default applies.")
            else:
                out[key] = got
        elif not isinstance(value, list):
            notes.append(f'{where} = {_shown(value)} should be a list of globs, like '
                         f'["docs/**"]; the default applies.')
        else:
            out[key] = _globs(where, value, notes)
    return out


def _globs(where: str, globs: list[str], notes: list[str]) -> list[str]:
    if len(globs) > MAX_GLOBS:
        notes.append(f"{where} lists {len(globs)} globs; only the first {MAX_GLOBS} are used.")
        globs = globs[:MAX_GLOBS]
    good = []
    for g in globs:
        if why := glob_problem(g):
            notes.append(f"{where}: the glob {_shown(g)} {why}; it was ignored.")
        else:
            good.append(g)
    return good


def _models(raw: object, allowed: set[str] | None, roles: tuple[str, ...],
            notes: list[str]) -> dict[str, str]:
    if not isinstance(raw, dict):
        notes.append(f"[models] should be a table of role = \"model\"; it was ignored and "
                     f"{DEFAULTS_APPLY}.")
        return {}
    out = {}
    for role, model in raw.items():
        if role not in roles:
            notes.append(f"[models] has an unknown role {_shown(role)} (the code review's roles "
                         f"are {', '.join(roles)}); it was ignored.")
        elif not isinstance(model, str) or not model.strip():
            notes.append(f"[models] {role} = {_shown(model)} should be a model name; the "
                         "server's model for that role applies.")
        elif allowed is not None and model not in allowed:
            notes.append(f"[models] {role} = {_shown(model)} is not a model this server allows "
                         "(QUORUM_REPO_MODELS); the server's model for that role applies.")
        else:
            out[role] = model
    return out


def _rules(raw: object, notes: list[str]) -> list[Rule]:
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        notes.append("rules should be written as [[rules]] tables; they were ignored.")
        return []
    if len(raw) > MAX_RULES:
        notes.append(f"{len(raw)} [[rules]] given; only the first {MAX_RULES} are used.")
        raw = raw[:MAX_RULES]
    out = []
    for i, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            notes.append(f"Rule {i} is not a [[rules]] table; it was ignored.")
            continue
        unknown = [k for k in item if k not in ("text", "path_glob", "severity")]
        if unknown:
            notes.append(f"Rule {i} has unknown key(s) {', '.join(_shown(k) for k in unknown)} "
                         "(known: text, path_glob, severity); they were ignored.")
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            notes.append(f"Rule {i} has no text (text = \"...\"); it was ignored.")
            continue
        if len(text.strip()) > MAX_RULE_CHARS:
            notes.append(f"Rule {i}'s text is longer than {MAX_RULE_CHARS} characters; it was "
                         "ignored.")
            continue
        glob = item.get("path_glob", "**")
        if why := glob_problem(glob):
            notes.append(f"Rule {i}: the path_glob {_shown(glob)} {why}; the rule was ignored.")
            continue
        severity = _severity(item.get("severity", "medium"))
        if severity is None:
            notes.append(f"Rule {i}: severity = {_shown(item.get('severity'))} "
                         f"{_CHECKS['min_severity'][1]}; medium applies.")
            severity = "medium"
        rule = Rule(text=text.strip(), path_glob=glob, severity=severity)
        out.append(rule)
    return out


def _fixes(raw: object, notes: list[str]) -> dict:
    if not isinstance(raw, dict):
        notes.append(f"[fixes] should be a table (a [fixes] section); it was ignored and "
                     f"{DEFAULTS_APPLY}.")
        return {}
    out = {}
    for key, value in raw.items():
        if key != "test_command":
            notes.append(f"[fixes] has an unknown key {_shown(key)} (known: test_command); it "
                         "was ignored.")
        elif not isinstance(value, str):
            notes.append(f"[fixes] test_command = {_shown(value)} should be a text, like "
                         '"pytest -q"; no test command applies.')
        else:
            out["test_command"] = value
    return out


def _parse(data: bytes) -> tuple[dict | None, str]:
    if len(data) > MAX_BYTES:
        return None, (f"{PATH} is {len(data):,} bytes, over the {MAX_BYTES:,}-byte limit; it "
                      f"was not read and {DEFAULTS_APPLY}.")
    if b"\x00" in data:
        return None, f"{PATH} contains NUL bytes; it was not read and {DEFAULTS_APPLY}."
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, f"{PATH} is not UTF-8 text; it was not read and {DEFAULTS_APPLY}."
    try:
        return tomllib.loads(text), ""
    except tomllib.TOMLDecodeError as exc:
        return None, (f"{PATH} is not valid TOML ({_shown(str(exc), 120)[1:-1]}); it was not "
                      f"read and {DEFAULTS_APPLY}.")
    except RecursionError:
        return None, f"{PATH} is nested too deeply to read; {DEFAULTS_APPLY}."


def load(data: bytes | None, *, allowed_models: set[str] | None = None,
         roles: tuple[str, ...] = REVIEW_ROLES) -> tuple[RepoConfig, list[str]]:
    """The configuration in ``data`` (the file's bytes, None when the file does not exist)
    and what was wrong in it. ``allowed_models`` None allows any model name."""
    if data is None:
        return RepoConfig(), []
    raw, problem = _parse(bytes(data))
    if raw is None:
        return RepoConfig(), [problem]
    notes: list[str] = []
    parts: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "review":
            parts["review"] = ReviewSection(**_section("review", value, _REVIEW_KEYS, notes))
        elif key == "publish":
            parts["publish"] = PublishSection(**_section("publish", value, _PUBLISH_KEYS,
                                                         notes))
        elif key == "models":
            parts["models"] = _models(value, allowed_models, roles, notes)
        elif key == "rules":
            parts["rules"] = _rules(value, notes)
        elif key == "fixes":
            parts["fixes"] = FixesSection(**_fixes(value, notes))
        else:
            notes.append(f"{PATH} has an unknown section {_shown(key)} (known: review, models, "
                         "rules, publish, fixes); it was ignored.")
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"… and {len(notes) - MAX_NOTES} more problems."]
    return RepoConfig(**parts), notes
