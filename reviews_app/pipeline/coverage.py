"""What the review actually examined, file by file, and whether that is the whole change.

The diff parser can only say what it handed on (``model_only``: "left to the models"). Once
the analyzers and the reviewers have run, this module replaces that promise with the truth:
a file counts as reviewed only when an analyzer ran on it or a model that reads code answered
for it. The built-in offline model reads no code (it restates analyzer results), and a
reviewer that failed or timed out read nothing, so neither counts. A file nobody examined is
listed as ``not_examined`` (``reviewed: False``).

A review is *incomplete* when some part of the change was left unexamined: a file nobody
examined, files cut by the limits, unreadable parts, clipped lines. An incomplete review
never proposes "approve". Files with nothing to review (deleted, binary, generated, renamed
or mode-only) do not make it incomplete.
"""

from __future__ import annotations

NOT_EXAMINED = "not_examined"
# Coverage reasons that leave part of the change unexamined.
INCOMPLETE_REASONS = frozenset({NOT_EXAMINED, "over_file_limit", "over_byte_limit",
                                "unreadable", "clipped"})
# Entries this module writes per file (it replaces them, so running it twice is harmless).
_PER_FILE = frozenset({"model_only", "analyzers_only", "imported", NOT_EXAMINED})


def unexamined(coverage: list[dict]) -> list[dict]:
    """The coverage entries that leave part of the change unexamined."""
    return [c for c in coverage or () if isinstance(c, dict)
            and c.get("reason") in INCOMPLETE_REASONS]


def _why_no_analyzer(file: dict, analysis: dict) -> str:
    if not file.get("is_python"):
        return (f"no analyzer reads {file.get('language') or 'this file type'} (ruff and "
                "bandit read Python only)")
    errors = analysis.get("errors") or []
    if errors:
        return f"ruff and bandit did not run ({errors[0]})"
    return "ruff and bandit had no new code to read in it"


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
    """The coverage list with every reviewed file's entry made true.

    ``analysis["examined"]`` lists the paths an analyzer ran on; ``model_readers`` maps a path
    to the reviewers (on a model that reads code) that answered for it.
    """
    by_analyzer = set(analysis.get("examined") or ())
    # An imported SARIF proves only that its tool ran on the files it reported on.
    by_import = {p: list(t) for p, t in (analysis.get("imported_tools") or {}).items()}
    tools = " and ".join(sorted(analysis.get("tools") or {})) or "the analyzers"
    paths = {f["path"] for f in files}
    out = [c for c in coverage if not (c.get("reason") in _PER_FILE and c.get("path") in paths)]
    for f in files:
        path = f["path"]
        if _nothing_new(f):
            continue  # an empty new file, blank lines added: there is nothing to examine
        readers = model_readers.get(path) or []
        if by_import.get(path):
            out.append(_imported_entry(path, by_import[path], readers,
                                       tools if path in by_analyzer else ""))
            continue
        if path in by_analyzer or readers:
            if not f.get("is_python"):
                out.append({"path": path, "reason": "model_only", "reviewed": True,
                            "detail": f"Not Python: read by the {', '.join(readers)} "
                                      f"reviewer{'s' if len(readers) > 1 else ''} only, "
                                      "without static analysis."})
            elif path in by_analyzer and not readers:
                out.append({"path": path, "reason": "analyzers_only", "reviewed": True,
                            "detail": f"Checked by {tools} only: no model that reads code "
                                      "answered for it."})
            continue
        why = (f"{_why_no_analyzer(f, analysis)}, and "
               f"{_why_no_model(path, reviewers, offline, status)}")
        out.append({"path": path, "reason": NOT_EXAMINED, "reviewed": False,
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
