"""Mechanical, change-level observations for the cross-file check (plain Python, no model):

- **tests**: a substantial change to code files with no test file in the change;
- **duplicate**: the same block of at least ``MIN_BLOCK`` non-blank lines added to two files;
- **config_drift**: a key added to one of several sibling configuration files (``.env``,
  ``.env.example``, ``config.dev.yaml`` / ``config.prod.yaml``, …) in the same folder and
  missing from a sibling the change also touches, whose whole content is known.

Each observation already has the shape of a cross-file finding. They are conservative on
purpose (a small, clean change gets none): the model treats them as leads to confirm, and the
offline model restates them. Diff text and file names are untrusted: they are only compared,
never run, and shown escaped.
"""

from __future__ import annotations

import hashlib
import posixpath
import re

from .diffs.hunks import added_lines

MIN_BLOCK = 6  # non-blank lines of a duplicated block
MIN_TESTABLE_LINES = 40  # added code lines before missing tests are worth a note
MIN_DEFINITIONS = 2  # and at least this many new functions / classes
MAX_OBSERVATIONS = 12

CODE_EXT = {"py", "js", "jsx", "mjs", "cjs", "ts", "tsx", "go", "java", "kt", "rb", "php", "rs",
            "cs", "c", "cc", "cpp", "h", "hpp", "swift", "scala", "sh", "bash"}
DOC_EXT = {"md", "rst", "txt", "adoc", "markdown"}
# Code files that are configuration or glue rather than something one unit-tests.
_NOT_TESTABLE = re.compile(
    r"(^|/)(setup|manage|conftest|conf|noxfile|fabfile)\.py$|(^|/)settings[^/]*\.py$"
    r"|(^|/)__init__\.py$|(^|/)migrations/|\.config\.[cm]?[jt]s$|\.d\.ts$|\.(sh|bash)$")
_TEST = re.compile(
    r"(^|/)(tests?|__tests__|specs?|testing|e2e)/|(^|/)test_[^/]*\.py$|_test\.(py|go)$"
    r"|\.(test|spec)\.[cm]?[jt]sx?$|(^|/)conftest\.py$|Tests?\.(java|kt|cs)$|_spec\.rb$")
_DEFINITION = re.compile(
    r"^(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:def|function|func|fn|class)\s+\w"
    r"|^(?:export\s+)?(?:const|let)\s+\w+\s*=\s*(?:async\s*)?(?:\([^)]*\)|\w+)\s*=>"
    r"|^(?:pub(?:\(crate\))?\s+)(?:async\s+)?fn\s+\w"
    r"|^(?:public|private|protected)\s+[\w<>\[\], ?]+\s+\w+\s*\(")
_COMMENT = re.compile(r"^(#|//|/\*|\*|--|<!--)")
_TRIVIAL = re.compile(r"^(import\s|from\s\S+\simport\s|#include\s|require\(|using\s|package\s"
                      r"|[})\]];?,?$|end$|else:?$|\);?$|pass$|return;?$)")


def kind_of(path: str) -> str:
    """"test", "doc", "code" or "config" (anything else: data, manifests, build files)."""
    base = posixpath.basename(path).lower()
    ext = base.rsplit(".", 1)[-1] if "." in base else ""
    if _TEST.search(path):
        return "test"
    if ext in DOC_EXT or path.lower().startswith(("docs/", "doc/")) or \
            base.startswith(("readme", "changelog", "license")):
        return "doc"
    if ext in CODE_EXT:
        return "code"
    return "config"


def testable(path: str) -> bool:
    return kind_of(path) == "code" and not _NOT_TESTABLE.search(path)


def _loc(path: str, line: int | None, end: int | None = None) -> dict:
    return {"file": path, "line": line, "end_line": end}


# --- missing tests ---------------------------------------------------------------------------
def missing_tests(files: list[dict]) -> list[dict]:
    kinds = {f["path"]: kind_of(f["path"]) for f in files}
    if any(k == "test" for k in kinds.values()):
        return []
    code = [f for f in files if testable(f["path"]) and f.get("status") != "deleted"]
    stats = []
    for f in code:
        lines = [(n, t.strip()) for n, t in added_lines(f)]
        lines = [(n, t) for n, t in lines if t and not _COMMENT.match(t)]
        defs = [n for n, t in lines if _DEFINITION.match(t)]
        if lines:
            stats.append((f["path"], len(lines), defs))
    total = sum(n for _, n, _ in stats)
    definitions = sum(len(d) for _, _, d in stats)
    if total < MIN_TESTABLE_LINES or definitions < MIN_DEFINITIONS:
        return []
    stats.sort(key=lambda s: (-len(s[2]), -s[1]))
    first, _, defs = stats[0]
    names = ", ".join(p for p, _, _ in stats[:8]) + (" and more" if len(stats) > 8 else "")
    return [{
        "check": "tests", "kind": "tests", "severity": "low", "confidence": 0.6,
        "file": first, "line": defs[0] if defs else None, "end_line": None,
        "locations": [_loc(p, d[0] if d else None) for p, _, d in stats[1:20]],
        "title": "Changed code without tests in the change",
        "description": (f"This change adds {total} lines of code with {definitions} new "
                        f"function(s) or class(es) in {names}, and changes no test file."),
        "suggestion": ("Add or update tests that exercise the new behaviour (a test file next "
                       "to the module or under tests/), or say in the change why none are "
                       "needed."),
    }]


# --- duplicated blocks -----------------------------------------------------------------------
def _runs(f: dict) -> list[list[tuple[int, str]]]:
    """Contiguous runs of added lines (blank lines skipped, not breaking a run)."""
    runs: list[list[tuple[int, str]]] = []
    for hunk in f.get("hunks") or ():
        run: list[tuple[int, str]] = []
        for ln in hunk.get("lines") or ():
            text = " ".join(str(ln.get("text", "")).split())
            if ln.get("kind") == "add" and ln.get("new") is not None:
                if text:
                    run.append((ln["new"], text))
            elif ln.get("kind") == "del":
                continue
            else:
                if run:
                    runs.append(run)
                run = []
        if run:
            runs.append(run)
    return runs


def _meaningful(window: list[tuple[int, str]]) -> bool:
    real = [t for _, t in window if not _TRIVIAL.match(t) and not _COMMENT.match(t)
            and sum(c.isalnum() for c in t) >= 8]
    return len(real) >= MIN_BLOCK - 2


def _digest(window) -> str:
    return hashlib.sha1("\n".join(t for _, t in window).encode(), usedforsecurity=False)\
        .hexdigest()


def duplicates(files: list[dict]) -> list[dict]:
    candidates = [f for f in files if kind_of(f["path"]) == "code"
                  and f.get("status") != "deleted"]
    seen: dict[str, tuple[str, int]] = {}  # window digest -> (path, start line)
    blocks: dict[tuple[str, int], dict] = {}  # (first path, first line) -> finding
    for f in candidates:
        path = f["path"]
        for run in _runs(f):
            i = 0
            while i + MIN_BLOCK <= len(run):
                window = run[i:i + MIN_BLOCK]
                digest = _digest(window)
                first = seen.get(digest)
                if first is None or first[0] == path or not _meaningful(window):
                    seen.setdefault(digest, (path, window[0][0]))
                    i += 1
                    continue
                j = i + MIN_BLOCK  # extend the block while the next windows repeat too
                while j < len(run) and _digest(run[j - MIN_BLOCK + 1:j + 1]) in seen:
                    j += 1
                start, end = run[i][0], run[j - 1][0]
                found = blocks.get(first)
                if found is None:
                    found = blocks[first] = {
                        "check": "duplicate", "kind": "maintainability", "severity": "low",
                        "confidence": 0.7, "file": first[0], "line": first[1],
                        "end_line": first[1] + (end - start), "locations": [],
                        "title": "Duplicated implementation across files",
                        "suggestion": ("Keep one implementation in a shared module and call it "
                                       "from both places."),
                        "lines": j - i}
                if all(loc["file"] != path for loc in found["locations"]):
                    found["locations"].append(_loc(path, start, end))
                i = j
    out = []
    for found in list(blocks.values())[:MAX_OBSERVATIONS]:
        n = found.pop("lines")
        where = ", ".join(f"{loc['file']}:{loc['line']}" for loc in found["locations"])
        found["description"] = (f"The same block of {n} or more non-blank lines is added at "
                                f"{found['file']}:{found['line']} and at {where}; a fix to "
                                "one copy will be missed in the other.")
        out.append(found)
    return out


# --- configuration drift ----------------------------------------------------------------------
_VARIANT = re.compile(r"^(?P<stem>[\w-]+?)[._-](?:dev|development|prod|production|staging|stage|"
                      r"test|testing|local|example|sample|qa|ci|default|defaults)"
                      r"\.(?P<ext>ya?ml|properties)$")
_PLAIN = re.compile(r"^(?P<stem>[\w-]+)\.(?P<ext>ya?ml|properties)$")
_ENV_KEY = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=")
_PROP_KEY = re.compile(r"^([A-Za-z_][\w.-]*)\s*[=:]")
_YAML_KEY = re.compile(r"^([A-Za-z_][\w.-]*)\s*:(?:\s|$)")


def _family(path: str) -> tuple[str, str] | None:
    folder, base = posixpath.split(path)
    if base == ".env" or base.startswith(".env.") or base.endswith(".env"):
        return folder, "env"
    m = _VARIANT.match(base) or _PLAIN.match(base)
    if m:
        ext = "yaml" if m.group("ext") in ("yml", "yaml") else m.group("ext")
        return folder, f"{m.group('stem')}.{ext}"
    return None


def _key_re(family: str) -> re.Pattern[str]:
    if family == "env":
        return _ENV_KEY
    return _PROP_KEY if family.endswith(".properties") else _YAML_KEY


def _keys(lines, pattern) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for n, text in lines:
        m = pattern.match(text)
        if m and m.group(1) not in out:
            out[m.group(1)] = n
    return out


def _whole(f: dict) -> list[tuple[int | None, str]] | None:
    """Every line of the new file, when the change shows all of it."""
    if f.get("content") is not None:
        return list(enumerate(str(f["content"]).split("\n"), 1))
    if f.get("status") == "added" and not f.get("clipped"):
        return [(n, t) for n, t in added_lines(f)]
    return None


def config_drift(files: list[dict]) -> list[dict]:
    families: dict[tuple[str, str], list[dict]] = {}
    for f in files:
        fam = _family(f["path"])
        if fam and f.get("status") != "deleted":
            families.setdefault(fam, []).append(f)
    out = []
    for (_, family), members in families.items():
        if len(members) < 2:
            continue
        pattern = _key_re(family)
        for f in members:
            removed = {m.group(1) for h in f.get("hunks") or () for ln in h.get("lines") or ()
                       if ln.get("kind") == "del" and (m := pattern.match(ln.get("text", "")))}
            added = {k: n for k, n in _keys(added_lines(f), pattern).items() if k not in removed}
            for other in members:
                whole = None if other is f else _whole(other)
                if not added or whole is None:
                    continue
                missing = [k for k in added if k not in _keys(whole, pattern)]
                if not missing:
                    continue
                shown = ", ".join(missing[:10]) + (" …" if len(missing) > 10 else "")
                out.append({
                    "check": "config_drift", "kind": "maintainability", "severity": "low",
                    "confidence": 0.6, "file": f["path"], "line": added[missing[0]],
                    "end_line": None, "locations": [_loc(other["path"], None)],
                    "title": f"Configuration drift: {shown} added to {f['path']} only",
                    "description": (f"{f['path']} gains {shown}, but its sibling "
                                    f"{other['path']}, also changed here, does not have "
                                    f"{'it' if len(missing) == 1 else 'them'}: the two "
                                    "configurations now differ."),
                    "suggestion": (f"Add {shown} to {other['path']} too (with a safe default "
                                   "or a placeholder), or explain why it only applies to one "
                                   "environment."),
                })
    return out[:MAX_OBSERVATIONS]


def observations(files: list[dict]) -> list[dict]:
    """All mechanical observations for ``files`` (the review's file dicts)."""
    return (missing_tests(files) + duplicates(files) + config_drift(files))[:MAX_OBSERVATIONS]
