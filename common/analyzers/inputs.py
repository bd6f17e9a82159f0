"""The analyzers' input: a file's text, whole or cut from its diff hunks, and its line map."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AnalyzerInput:
    path: str                                   # display only; never a filesystem path
    text: str                                   # Python source to analyze
    line_map: dict[int, int] | None = None      # analyzed line -> new-file line; None = identity
    full: bool = True                           # True when text is the whole new file
    changed_lines: set[int] | None = None       # new-file lines the change adds; None = all


def input_from_file(file: dict) -> AnalyzerInput | None:
    """The analyzer input for one file of the diff parser, or None (not Python, or no new code).

    With the new content, the whole file is analyzed; otherwise the new side (context and
    added lines) of its hunks, in order, with a map from fragment line to new-file line.
    """
    if not file.get("is_python"):
        return None
    path = str(file.get("path") or "")
    hunks = file.get("hunks") or []
    changed = {ln["new"] for h in hunks for ln in h.get("lines") or []
               if ln.get("kind") == "add" and isinstance(ln.get("new"), int)}
    content = file.get("content")
    if content is not None:
        if not content.strip():
            return None
        return AnalyzerInput(path=path, text=content, line_map=None, full=True,
                             changed_lines=changed)
    texts: list[str] = []
    line_map: dict[int, int] = {}
    for h in hunks:
        for ln in h.get("lines") or []:
            if ln.get("kind") in ("add", "ctx") and isinstance(ln.get("new"), int):
                texts.append(str(ln.get("text") or "").rstrip("\r\n"))
                line_map[len(texts)] = ln["new"]
    if not any(t.strip() for t in texts):
        return None
    return AnalyzerInput(path=path, text="\n".join(texts) + "\n", line_map=line_map,
                         full=False, changed_lines=changed)
