"""The review page's diff: Pygments-highlighted lines with the findings anchored at them.

Pygments escapes every token it emits, so highlighted code is safe HTML; files too large to
highlight quickly are shown escaped but plain. File names and hunk headers stay text and
are escaped by the templates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from common.secret_keys import mask_lines

from .pipeline.schema import SEVERITY_RANK

HIGHLIGHT_MAX_LINES = 4000  # per file; beyond it lines are escaped but not coloured
_FORMATTER = HtmlFormatter(nowrap=True, classprefix="pg-")


def pygments_css() -> str:
    """The token colours, scoped to the diff table (static/quorum/pygments.css holds them)."""
    rules = _FORMATTER.get_style_defs(".diff-code").splitlines()
    return "\n".join(r for r in rules if r.startswith(".diff-code"))


@dataclass
class Row:
    kind: str  # add | del | ctx | hunk
    old: int | None
    new: int | None
    html: SafeString
    anchor: str = ""
    findings: list = field(default_factory=list)


@dataclass
class FileView:
    index: int
    path: str
    old_path: str | None
    status: str
    language: str
    mode: str
    added: int
    removed: int
    clipped: bool
    rows: list[Row]
    findings: list  # all the file's findings, anchored or not
    unanchored: list  # findings whose line is not among the shown lines
    lazy: bool = False  # rows left out: the page loads them when the file is opened

    @property
    def counts(self) -> list[tuple[str, int]]:
        """(severity, how many of the file's findings), strongest first, for the file list."""
        out: dict[str, int] = {}
        for x in self.findings:
            out[x.severity] = out.get(x.severity, 0) + 1
        return sorted(out.items(), key=lambda kv: SEVERITY_RANK.get(kv[0], 9))


def _highlighted(texts: list[str], lexer_name: str) -> list[SafeString]:
    if not texts:
        return []
    if len(texts) > HIGHLIGHT_MAX_LINES:
        return [mark_safe(escape(t)) for t in texts]  # noqa: S308 - escaped
    try:
        lexer = get_lexer_by_name(lexer_name or "text", stripnl=False, stripall=False,
                                  ensurenl=False)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False, ensurenl=False)
    html = highlight("\n".join(texts), lexer, _FORMATTER)
    out = (html[:-1] if html.endswith("\n") else html).split("\n")
    if len(out) != len(texts):  # a lexer that changed the line count: fall back to plain
        return [mark_safe(escape(t)) for t in texts]  # noqa: S308 - escaped
    # HtmlFormatter closes and reopens its spans at every line break, so each line is whole.
    return [mark_safe(line) for line in out]  # noqa: S308 - Pygments escapes token text


LAZY_AFTER_LINES = 3000  # a larger diff renders files without findings on demand


def file_views(files: list[dict], findings, *, only: int | None = None) -> list[FileView]:
    """The files of a review as rows to show. In a diff of more than ``LAZY_AFTER_LINES``
    lines, files without findings come without rows (``lazy``), so a large review's page
    stays small; ``only`` renders just the file with that index, in full."""
    total = sum(len(h["lines"]) for f in files for h in f["hunks"])
    lazy_mode = only is None and total > LAZY_AFTER_LINES
    by_file: dict[str, list] = {}
    for f in findings:
        by_file.setdefault(f.file, []).append(f)
    views = []
    for index, f in enumerate(files):
        if only is not None and index != only:
            continue
        mine = sorted(by_file.get(f["path"], []),
                      key=lambda x: (SEVERITY_RANK.get(x.severity, 9), x.line or 0))
        if lazy_mode and not mine:
            views.append(FileView(index=index, path=f["path"], old_path=f.get("old_path"),
                                  status=f["status"], language=f.get("language") or "",
                                  mode=f.get("mode", "light"), added=f.get("added", 0),
                                  removed=f.get("removed", 0), clipped=f.get("clipped", False),
                                  rows=[], findings=[], unanchored=[], lazy=True))
            continue
        lines = [ln for h in f["hunks"] for ln in h["lines"]]
        # Secrets in the diff are shown as a prefix and a length, as everywhere else.
        coloured = iter(_highlighted(mask_lines([ln["text"] for ln in lines]),
                                     f.get("lexer") or "text"))
        at_line: dict[int, list] = {}
        for x in mine:
            if x.line:
                at_line.setdefault(x.line, []).append(x)
        rows: list[Row] = []
        shown: set[int] = set()
        for h in f["hunks"]:
            rows.append(Row("hunk", None, None, mark_safe(escape(h["header"]))))  # noqa: S308
            for ln in h["lines"]:
                html = next(coloured)
                row = Row(ln["kind"], ln["old"], ln["new"], html)
                if ln["new"] is not None and ln["kind"] != "del":
                    row.anchor = f"f{index}-L{ln['new']}"
                    row.findings = at_line.get(ln["new"], [])
                    shown.add(ln["new"])
                rows.append(row)
        unanchored = [x for x in mine if not x.line or x.line not in shown]
        views.append(FileView(index=index, path=f["path"], old_path=f.get("old_path"),
                              status=f["status"], language=f.get("language") or "",
                              mode=f.get("mode", "light"), added=f.get("added", 0),
                              removed=f.get("removed", 0), clipped=f.get("clipped", False),
                              rows=rows, findings=mine, unanchored=unanchored))
    return views


def elsewhere(files: list[dict], findings) -> list:
    """The findings on no file of the diff (a cross-file finding naming another file): shown,
    and triaged, above the files."""
    paths = {f["path"] for f in files}
    return [x for x in findings if x.file not in paths]


def anchors(files: list[dict], findings) -> dict[str, str]:
    """Finding key → the id of the diff line (or file) it is shown at, from the files'
    line numbers alone (no rendering): the same ids ``file_views`` gives its rows."""
    shown = {f["path"]: (i, {ln["new"] for h in f["hunks"] for ln in h["lines"]
                             if ln["new"] is not None and ln["kind"] != "del"})
             for i, f in enumerate(files)}
    out = {}
    for x in findings:
        if x.file not in shown:
            continue
        index, lines = shown[x.file]
        out[x.key] = f"f{index}-L{x.line}" if x.line in lines else f"file-{index}"
    return out
