"""What the review actually examined, file by file, and whether that is the whole change.

The diff parser can only say what it handed on (``model_only``: "left to the models"). Once
the analyzers and the reviewers have run, this module replaces that promise with the truth:
a file counts as reviewed only when an analyzer that reads its code ran on it or a model that
reads code answered for it (a secrets scanner alone does not count: it looks for keys, not at
the code). Every reviewed file gets an entry naming the ``analyzers`` and the ``reviewers``
that examined it (``examined``, ``analyzers_only``, ``model_only`` or ``imported``). The
built-in offline model reads no code (it restates analyzer results), and a reviewer that
failed or timed out read nothing, so neither counts. A file nobody examined is listed as
``not_examined`` (``reviewed: False``).

A review is *incomplete* when some part of the change was left unexamined: a file nobody
examined, files cut by the limits, unreadable parts, clipped lines, bytes replaced because
they were not UTF-8 or were NUL. An incomplete review never proposes "approve". Files with
nothing to review (deleted, binary, generated, renamed or mode-only) do not make it
incomplete.
"""

from __future__ import annotations

from common.analyzers.inputs import KIND_LABELS, kind_of
from common.analyzers.tools import BY_NAME, code_readers

NOT_EXAMINED = "not_examined"
EXAMINED = "examined"  # an analyzer that reads its code ran on it and a code-reading model
# Coverage reasons that leave part of the change unexamined. Bytes replaced with U+FFFD
# (``not_utf8``, ``nul_bytes``) were never read as they are.
INCOMPLETE_REASONS = frozenset({NOT_EXAMINED, "over_file_limit", "over_byte_limit",
                                "unreadable", "clipped", "not_utf8", "nul_bytes"})
# Entries this module writes per file (it replaces them, so running it twice is harmless).
_PER_FILE = frozenset({"model_only", "analyzers_only", "imported", EXAMINED, NOT_EXAMINED})
# Tools that look for secrets only: running them does not examine a file's code.
_SECRETS_ONLY = frozenset({"secrets"} | {n for n, t in BY_NAME.items() if not t.reads_code})
_ALL_KINDS = ("Python, JavaScript, TypeScript, Go, Java, shell, Dockerfiles, PHP, Ruby, C#, "
              "Kotlin, Terraform, YAML, GitHub Actions workflows, Markdown, plain-text "
              "documents and SQL")


def unexamined(coverage: list[dict]) -> list[dict]:
    """The coverage entries that leave part of the change unexamined (an entry repeated with
    the same path and reason counts once)."""
    seen: set[tuple] = set()
    out = []
    for c in coverage or ():
        if isinstance(c, dict) and c.get("reason") in INCOMPLETE_REASONS:
            key = (c.get("path"), c.get("reason"))
            if key not in seen:
                seen.add(key)
                out.append(c)
    return out


def by_path(entries: list[dict]) -> list[dict]:
    """Coverage entries grouped by path, in order: one ``{"path", "reasons", "details"}``
    per path, so that a file left out for two reasons is one part, counted and listed once."""
    out: dict[object, dict] = {}
    for c in entries:
        g = out.setdefault(c.get("path"), {"path": c.get("path"), "reasons": [], "details": []})
        if c.get("reason") not in g["reasons"]:
            g["reasons"].append(c.get("reason"))
        if c.get("detail") and c["detail"] not in g["details"]:
            g["details"].append(c["detail"])
    return list(out.values())


def unfinished(reviewers: dict | None) -> list[str]:
    """The reviewers that did not finish (failed, timed out, skipped), sorted: with
    :func:`unexamined` what makes a review incomplete, and never an approval."""
    return sorted(name for name, r in (reviewers or {}).items()
                  if not isinstance(r, dict) or r.get("status") != "ok")


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _why_no_analyzer(file: dict, analysis: dict) -> str:
    """Why no analyzer that reads code examined the file, in words: its language has none,
    or the ones that read it were missing, failed, timed out or were turned off."""
    path = file.get("path")
    kind = (analysis.get("kinds") or {}).get(path) or (
        "python" if file.get("is_python") else kind_of(str(path or "")))
    secrets_only = "secrets" in ((analysis.get("examined_by") or {}).get(path) or ())
    prefix = "checked for secrets only: " if secrets_only else ""
    readers = [t.name for t in code_readers(kind)]
    if not readers:
        language = file.get("language") or KIND_LABELS.get(kind) or "this file type"
        if kind == "other":
            language = file.get("language") or "this file type"
        return f"{prefix}no analyzer reads {language} (they read {_ALL_KINDS})"
    why = (analysis.get("not_run") or {}).get(path)
    if why:
        return f"{prefix}{_names(readers)} did not run on it ({'; '.join(why)})"
    if not analysis:
        return "no analyzer ran on it"
    errors = analysis.get("errors") or []
    if errors:
        return f"{prefix}{_names(readers)} did not run ({errors[0]})"
    return f"{prefix}{_names(readers)} had no new code to read in it"


def _why_no_model(path: str, reviewers: list[str], offline: set[str],
                  status: dict[str, dict]) -> str:
    readers = [r for r in reviewers if r not in offline]
    if not readers:
        return "the reviewers ran on the built-in offline model, which reads no code"
    failed = [f"{r} ({status.get(r, {}).get('status') or 'no answer'})" for r in readers]
    return f"no reviewer that reads code answered for it: {', '.join(failed)}"


def _nothing_new(file: dict) -> bool:
    if file.get("removed") or (file.get("content") or "").strip():
        return False
    return not any(str(ln.get("text") or "").strip() for h in file.get("hunks") or ()
                   for ln in h.get("lines") or () if ln.get("kind") == "add")


def examined(files: list[dict], coverage: list[dict], analysis: dict,
             model_readers: dict[str, list[str]], reviewers: list[str], offline: set[str],
             status: dict[str, dict]) -> list[dict]:
    """The coverage list with an entry for every reviewed file, made true.

    ``analysis["examined"]`` lists the paths an analyzer that reads code ran on, and
    ``analysis["examined_by"]`` every analyzer that ran on each path (secrets scanners
    included); ``model_readers`` maps a path to the reviewers (on a model that reads code)
    that answered for it. Each entry names them: ``analyzers`` and ``reviewers``.
    """
    by_analyzer = set(analysis.get("examined") or ())
    examined_by = analysis.get("examined_by") or {}
    # An imported SARIF proves only that its tool ran on the files it reported on.
    by_import = {p: list(t) for p, t in (analysis.get("imported_tools") or {}).items()}
    every_tool = sorted(analysis.get("tools") or {})
    paths = {f["path"] for f in files}
    out = [c for c in coverage if not (c.get("reason") in _PER_FILE and c.get("path") in paths)]
    for f in files:
        path = f["path"]
        if _nothing_new(f):
            continue  # an empty new file, blank lines added: there is nothing to examine
        readers = list(model_readers.get(path) or [])
        ran = list(examined_by.get(path) or (every_tool if path in by_analyzer else []))
        code_tools = [t for t in ran if t not in _SECRETS_ONLY]
        who = {"analyzers": ran, "reviewers": readers}
        checked = _names(code_tools) if code_tools else "the analyzers"
        if by_import.get(path):
            out.append({**_imported_entry(path, by_import[path], readers,
                                          checked if path in by_analyzer else ""), **who})
        elif path in by_analyzer and readers:
            out.append({"path": path, "reason": EXAMINED, "reviewed": True, **who,
                        "detail": f"Checked by {checked}; read by the {', '.join(readers)} "
                                  f"reviewer{'s' if len(readers) > 1 else ''}."})
        elif path in by_analyzer:
            out.append({"path": path, "reason": "analyzers_only", "reviewed": True, **who,
                        "detail": f"Checked by {checked} only: no model that reads code "
                                  "answered for it."})
        elif readers:
            out.append({"path": path, "reason": "model_only", "reviewed": True, **who,
                        "detail": f"Read by the {', '.join(readers)} reviewer"
                                  f"{'s' if len(readers) > 1 else ''} only, without static "
                                  f"analysis: {_why_no_analyzer(f, analysis)}."})
        else:
            why = (f"{_why_no_analyzer(f, analysis)}, and "
                   f"{_why_no_model(path, reviewers, offline, status)}")
            out.append({"path": path, "reason": NOT_EXAMINED, "reviewed": False, **who,
                        "detail": f"Not reviewed: {why}."})
    return out


def _imported_entry(path: str, imported: list[str], readers: list[str], ours: str) -> dict:
    parts = [f"reported on by {', '.join(imported)} (imported SARIF)"]
    if ours:
        parts.append(f"checked by {ours}")
    if readers:
        parts.append(f"read by the {', '.join(readers)} reviewer{'s' if len(readers) > 1 else ''}")
    else:
        parts.append("no model that reads code answered for it")
    detail = "; ".join(parts)
    return {"path": path, "reason": "imported", "reviewed": True, "tools": list(imported),
            "detail": detail[0].upper() + detail[1:] + "."}


def incomplete_text(left: list[dict], limit: int = 5) -> str:
    """One sentence naming what was left unexamined, for the summary and the notes."""
    files = [c for c in left if c.get("reason") == NOT_EXAMINED]
    other = [c for c in left if c.get("reason") != NOT_EXAMINED]
    parts = []
    if files:
        named = "; ".join(f"{c['path']}: {c['detail'].removeprefix('Not reviewed: ')[:-1]}"
                          for c in files[:limit])
        more = f" and {len(files) - limit} more" if len(files) > limit else ""
        parts.append(f"{len(files)} file{'s' if len(files) > 1 else ''} not examined by any "
                     f"analyzer or model — {named}{more}")
    if other:
        named = ", ".join(f"{c['path']} ({c['reason'].replace('_', ' ')})"
                          for c in other[:limit])
        more = f" and {len(other) - limit} more" if len(other) > limit else ""
        parts.append(f"left out by the limits or unreadable — {named}{more}")
    return ". Also ".join(parts)
