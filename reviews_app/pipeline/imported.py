"""Imported analyzer results (SARIF, see ``common.analyzers.sarif_import``) joined to the change.

Only results on files of the change are kept; each is marked ``on_changed_line`` from the
lines the change adds, as our own analyzers' results are. An imported result proves only that
its tool ran on the file it names, so :func:`tools_by_file` is what coverage may claim.
"""

from __future__ import annotations


def _changed_lines(file: dict) -> set[int]:
    return {ln["new"] for h in file.get("hunks") or () for ln in h.get("lines") or ()
            if ln.get("kind") == "add" and isinstance(ln.get("new"), int)}


def join(files: list[dict], imported: list[dict]) -> tuple[list[dict], int]:
    """The imported evidence on files of the change (copies, marked), and how many results
    named other files."""
    changed = {f["path"]: _changed_lines(f) for f in files}
    # Longest first: "/ci/x/src/app.ts" is src/app.ts rather than app.ts when both changed.
    by_length = sorted(changed, key=len, reverse=True)
    kept, outside = [], 0
    for e in imported or ():
        if not isinstance(e, dict):
            outside += 1
            continue
        e = dict(e)
        if e.pop("absolute_path", False):
            # An absolute path (the analyzer's checkout) is one of ours when it ends with a
            # path of the change; the path itself is never opened.
            e["file"] = next((p for p in by_length
                              if str(e.get("file") or "").endswith("/" + p)), None)
        if e.get("file") not in changed:
            outside += 1
            continue
        line, end = e.get("line"), e.get("end_line") or e.get("line")
        lines = changed[e["file"]]
        e["on_changed_line"] = bool(line) and any(
            n in lines for n in range(line, max(line, end) + 1))
        kept.append(e)
    return kept, outside


def tools_by_file(evidence: list[dict]) -> dict[str, list[str]]:
    """path -> the imported tools that reported on it (whatever the line)."""
    out: dict[str, list[str]] = {}
    for e in evidence:
        if e.get("imported"):
            tools = out.setdefault(e["file"], [])
            if e["tool"] not in tools:
                tools.append(e["tool"])
    return out
