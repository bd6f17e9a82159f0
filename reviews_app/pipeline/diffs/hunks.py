"""Hunks as plain dicts: read from unidiff, clipped to a number of changed lines, a new file
rebuilt whole from its one hunk, and rendered with line numbers for a model."""

from __future__ import annotations


def line_count(content: str) -> int:
    return content.count("\n") + (1 if content and not content.endswith("\n") else 0)


def _text(value: str) -> str:
    if value.endswith("\n"):
        value = value[:-1]
    if value.endswith("\r"):
        value = value[:-1]
    return value.replace("\x00", "\ufffd")


_KINDS = {"+": "add", "-": "del", " ": "ctx"}


def read_hunks(pf) -> tuple[list[dict], bool]:
    hunks, no_newline = [], False
    for hunk in pf:
        header = (f"@@ -{hunk.source_start},{hunk.source_length} "
                  f"+{hunk.target_start},{hunk.target_length} @@")
        section = (hunk.section_header or "").strip()
        if section:
            header += " " + _text(section)
        lines: list[dict] = []
        for line in hunk:
            kind = _KINDS.get(line.line_type)
            if kind is None:
                if line.line_type == "\\" and lines and lines[-1]["kind"] != "del":
                    no_newline = True
                continue
            if no_newline and kind != "del":
                no_newline = False    # the marker was not on the last line of the new side
            lines.append({"kind": kind, "old": line.source_line_no, "new": line.target_line_no,
                          "text": _text(line.value)})
        hunks.append({"header": header, "lines": lines})
    return hunks, no_newline


def whole_new_file(pf, hunks: list[dict], no_newline: bool) -> str | None:
    """The full text of a file the diff creates whole (one ``@@ -0,0 +1,N @@`` hunk of N
    added lines), so it is analysed and shown as a whole file, not as a fragment."""
    if len(hunks) != 1 or len(pf) != 1:
        return None
    hunk, lines = pf[0], hunks[0]["lines"]
    if (hunk.source_start, hunk.source_length, hunk.target_start) != (0, 0, 1):
        return None
    if len(lines) != hunk.target_length or any(ln["kind"] != "add" for ln in lines):
        return None
    return "\n".join(ln["text"] for ln in lines) + ("" if no_newline else "\n")


def clip(hunks: list[dict], limit: int) -> tuple[list[dict], int, int]:
    """Keep hunk lines until ``limit`` changed lines; return (hunks, kept, total changed)."""
    total = sum(1 for h in hunks for ln in h["lines"] if ln["kind"] != "ctx")
    if total <= limit:
        return hunks, total, total
    kept_hunks, kept = [], 0
    for hunk in hunks:
        lines = []
        for ln in hunk["lines"]:
            if ln["kind"] != "ctx":
                if kept >= limit:
                    break
                kept += 1
            lines.append(ln)
        if lines and (kept < limit or any(ln["kind"] != "ctx" for ln in lines)):
            kept_hunks.append({"header": hunk["header"], "lines": lines})
        if kept >= limit:
            break
    return kept_hunks, kept, total


def numbered_patch(file: dict) -> str:
    """The file's hunks for a model: new-file line numbers, a +/-/space mark, the text."""
    out: list[str] = []
    shown = 0
    for hunk in file.get("hunks") or ():
        out.append(str(hunk.get("header", "")))
        for ln in hunk.get("lines") or ():
            kind = ln.get("kind")
            sign = "+" if kind == "add" else "-" if kind == "del" else " "
            shown += kind in ("add", "del")
            new = ln.get("new")
            out.append(f"{new if new is not None else '':>5} {sign} {ln.get('text', '')}")
    if file.get("clipped"):
        more = max(0, int(file.get("added") or 0) + int(file.get("removed") or 0) - shown)
        out.append(f"[clipped: {more} more changed lines not shown]")
    elif file.get("no_newline_at_end") and out:
        out.append("      \\ No newline at end of file")
    return "\n".join(out)


def added_lines(file: dict) -> list[tuple[int, str]]:
    """``(new line number, text)`` for each added line that was kept."""
    return [(ln["new"], ln["text"]) for hunk in file.get("hunks") or ()
            for ln in hunk.get("lines") or () if ln.get("kind") == "add"]
