"""Calibration sets: changes whose defects are known, loaded and checked case by case.

A set is one of

* ``starter``: the set Quorum ships (``starter/``, see its README);
* a folder like it: per case ``NAME.json`` with ``NAME.diff`` beside it;
* a JSONL file: one case per line, each with its ``name`` and its change inline.

A case (the JSON object) has ``language``, an optional ``description``, the change (the
sibling ``.diff``; or ``"diff"``: a unified diff; or ``"files"``: ``[{"path", "before",
"after"}]``, ``before`` null for a new file, from which a git-style diff is made), and
either ``"clean": true`` with no defects or at least one defect. A defect is ``file`` (a
path of the diff), ``lines`` ``[first, last]`` (or ``line``) in the new file, optional
``category`` (a reviewer lens the review's findings use: security, architecture, style),
optional ``kind`` (the review's kinds: security, bug, performance, ...) and ``what`` (words
for people). Every defect line must be a new-file line the diff shows, so a finding can land
on it. A case that breaks any of this is refused with its name and the field.

No Django here: the diff is checked with the review's own parser (``pipeline.diffs``).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..pipeline import diffs
from ..pipeline.schema import CATEGORIES, KINDS

STARTER_NAME = "starter"
STARTER = Path(__file__).resolve().parent / STARTER_NAME
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
MAX_CASES = 500
MAX_FILE_BYTES = 2_000_000  # one case file, or a whole JSONL set: a calibration set is small
MAX_WORDS = 2000  # description and what, in characters


class CaseError(ValueError):
    """A set or a case that cannot be used; the message names the case and the field."""


@dataclass(frozen=True)
class Defect:
    file: str
    start: int
    end: int
    category: str | None = None
    kind: str = ""
    what: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "lines": [self.start, self.end], "category": self.category,
                "kind": self.kind, "what": self.what}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Defect:
        """A defect as ``as_dict`` wrote it (in a calibration run's options)."""
        start, end = d["lines"]
        return cls(file=str(d["file"]), start=int(start), end=int(end),
                   category=d.get("category") or None, kind=str(d.get("kind") or ""),
                   what=str(d.get("what") or ""))

    @property
    def where(self) -> str:
        return f"{self.file}:{self.start}" + (f"-{self.end}" if self.end > self.start else "")


@dataclass
class Case:
    name: str
    language: str
    description: str
    diff_text: str
    defects: list[Defect] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.defects


@dataclass
class CaseSet:
    label: str  # "starter", or the file or folder name
    source: str  # where it was read from, for people
    cases: list[Case]

    @property
    def clean(self) -> int:
        return sum(1 for c in self.cases if c.clean)

    @property
    def defects(self) -> int:
        return sum(len(c.defects) for c in self.cases)


# --- loading ------------------------------------------------------------------------------
def load(spec: str | Path) -> CaseSet:
    """``starter``, a folder of cases or a JSONL file. Raises CaseError."""
    if str(spec) == STARTER_NAME:
        return _folder(STARTER, STARTER_NAME)
    path = Path(spec)
    if path.is_dir():
        return _folder(path, path.name)
    if path.is_file():
        if path.suffix.lower() != ".jsonl":
            raise CaseError(f"{_show(spec)}: a set is a folder of cases or a .jsonl file.")
        return _jsonl(path)
    raise CaseError(f"{_show(spec)}: no such file or folder (or give 'starter').")


def _read(path: Path, what: str) -> str:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise CaseError(f"{what}: larger than {MAX_FILE_BYTES:,} bytes.")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CaseError(f"{what}: not UTF-8 text.") from None
    except OSError as exc:
        raise CaseError(f"{what}: cannot be read ({exc.strerror or exc}).") from None


def _folder(folder: Path, label: str) -> CaseSet:
    files = sorted(p for p in folder.iterdir()
                   if p.suffix == ".json" and p.is_file() and not p.name.startswith((".", "_")))
    if not files:
        raise CaseError(f"{_show(folder)}: no cases (each is NAME.json with NAME.diff beside "
                        "it).")
    if len(files) > MAX_CASES:
        raise CaseError(f"{_show(folder)}: {len(files)} cases; at most {MAX_CASES}.")
    cases = []
    for path in files:
        name = path.stem
        data = _json_object(_read(path, f"case {_show(name)}"), f"case {_show(name)}")
        sibling = path.with_suffix(".diff")
        diff = _read(sibling, f"case {_show(name)}: diff") if sibling.is_file() else None
        cases.append(parse_case(name, data, diff))
    return CaseSet(label=label, source=str(folder), cases=_unique(cases))


def _jsonl(path: Path) -> CaseSet:
    cases = []
    for n, line in enumerate(_read(path, _show(path.name)).splitlines(), 1):
        if not line.strip():
            continue
        data = _json_object(line, f"{_show(path.name)} line {n}")
        name = data.get("name")
        if not isinstance(name, str):
            raise CaseError(f"{_show(path.name)} line {n}: name: required (a short name).")
        cases.append(parse_case(name, data, None))
        if len(cases) > MAX_CASES:
            raise CaseError(f"{_show(path.name)}: more than {MAX_CASES} cases.")
    if not cases:
        raise CaseError(f"{_show(path.name)}: no cases (one JSON object a line).")
    return CaseSet(label=path.name, source=str(path), cases=_unique(cases))


def _json_object(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaseError(f"{where}: not JSON ({exc.msg} at line {exc.lineno}).") from None
    except (ValueError, RecursionError):
        raise CaseError(f"{where}: not JSON this reader can take (nested too deeply).") \
            from None
    if not isinstance(data, dict):
        raise CaseError(f"{where}: must be a JSON object.")
    from agents_app.experiments.datasets import storable

    try:  # a lone surrogate or a NUL from a JSON escape cannot be reviewed or stored
        storable(data)
    except ValueError as exc:
        raise CaseError(f"{where}: {exc}.") from None
    return data


def _unique(cases: list[Case]) -> list[Case]:
    seen: set[str] = set()
    for c in cases:
        if c.name in seen:
            raise CaseError(f"case {c.name}: name: given twice in the set.")
        seen.add(c.name)
    return cases


# --- one case -----------------------------------------------------------------------------
def parse_case(name: str, data: dict[str, Any], diff_text: str | None) -> Case:
    """One case from its JSON object (and the text of its sibling ``.diff``, if any)."""
    if not NAME.fullmatch(name or ""):
        raise CaseError(f"case {_show(name)}: name: letters, digits, '.', '_' and '-', at most "
                        "80, starting with a letter or digit.")

    def bad(fld: str, problem: str) -> CaseError:
        return CaseError(f"case {name}: {fld}: {problem}")

    language = data.get("language")
    if not isinstance(language, str) or not language.strip() or len(language) > 40:
        raise bad("language", "required (a word such as python or go).")
    description = data.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_WORDS:
        raise bad("description", f"must be text of at most {MAX_WORDS} characters.")
    diff_text = _change(name, data, diff_text, bad)
    try:
        prepared = diffs.prepare(diff_text)
    except diffs.DiffError as exc:
        raise bad("diff", f"the review cannot read it ({_show(exc)}).") from None
    shown = {f["path"]: _new_lines(f) for f in prepared.files}
    if not shown:
        raise bad("diff", "no file with reviewable changes.")
    clean = data.get("clean", False)
    if not isinstance(clean, bool):
        raise bad("clean", "must be true or false.")
    raw = data.get("defects", [])
    if not isinstance(raw, list):
        raise bad("defects", "must be a list.")
    if clean and raw:
        raise bad("defects", "a clean case has none.")
    if not clean and not raw:
        raise bad("defects", "none given: list its defects, or mark it \"clean\": true.")
    defects = [_defect(i, d, shown, bad) for i, d in enumerate(raw)]
    places = [(d.file, d.start, d.end) for d in defects]
    if len(set(places)) != len(places):
        raise bad("defects", "the same file and lines are given twice.")
    return Case(name=name, language=language.strip().lower(), description=description.strip(),
                diff_text=diff_text, defects=defects)


def _change(name: str, data: dict[str, Any], diff_text: str | None, bad) -> str:
    given = [k for k in ("diff", "files") if k in data] + (["NAME.diff"] if diff_text else [])
    if len(given) != 1:
        raise bad("diff", "give the change once: a NAME.diff beside the case, \"diff\" or "
                  "\"files\"" + (f" (got {', '.join(given)})." if given else "."))
    if diff_text is not None:
        return diff_text
    if "diff" in data:
        if not isinstance(data["diff"], str) or not data["diff"].strip():
            raise bad("diff", "must be the text of a unified diff.")
        return str(data["diff"])
    return diff_of_files(data["files"], bad)


def diff_of_files(files: Any, bad) -> str:
    """A git-style unified diff of ``[{"path", "before", "after"}]`` (``before`` null: a new
    file; ``after`` null: a deleted one)."""
    if not isinstance(files, list) or not files:
        raise bad("files", "must be a list of {\"path\", \"before\", \"after\"}.")
    out = []
    for i, f in enumerate(files):
        if not isinstance(f, dict) or not isinstance(f.get("path"), str) or not f["path"]:
            raise bad(f"files[{i}].path", "required.")
        before, after = f.get("before"), f.get("after")
        if not all(t is None or isinstance(t, str) for t in (before, after)) or before == after:
            raise bad(f"files[{i}]", "before and after must be text (or null) and differ.")
        path = f["path"]
        head = [f"diff --git a/{path} b/{path}\n"]
        if before is None:
            head.append("new file mode 100644\n")
        elif after is None:
            head.append("deleted file mode 100644\n")
        lines = list(difflib.unified_diff(
            _lines(before), _lines(after), "/dev/null" if before is None else f"a/{path}",
            "/dev/null" if after is None else f"b/{path}", n=3))
        out += head + lines
    return "".join(out)


def _lines(text: str | None) -> list[str]:
    if not text:
        return []
    return (text if text.endswith("\n") else text + "\n").splitlines(keepends=True)


def _new_lines(f: dict[str, Any]) -> tuple[set[int], set[int]]:
    """The new-file lines the diff shows of a file, and the ones it adds."""
    shown, added = set(), set()
    for h in f.get("hunks") or ():
        for ln in h.get("lines") or ():
            if ln.get("new") is not None:
                shown.add(ln["new"])
                if ln.get("kind") == "add":
                    added.add(ln["new"])
    return shown, added


def _defect(i: int, d: Any, shown: dict[str, tuple[set[int], set[int]]], bad) -> Defect:
    where = f"defects[{i}]"
    if not isinstance(d, dict):
        raise bad(where, "must be an object with file and lines.")
    path = d.get("file")
    if not isinstance(path, str) or not path:
        raise bad(f"{where}.file", "required.")
    if path not in shown:
        raise bad(f"{where}.file", f"{_show(path)} is not a reviewable file of the diff.")
    start, end = _span(d, f"{where}.lines", bad)
    lines, added = shown[path]
    if end - start > len(lines):  # more lines than the diff shows of the file: some missing
        missing = [next(n for n in range(start, end + 1) if n not in lines)]
    else:
        missing = [n for n in range(start, end + 1) if n not in lines]
    if missing:
        raise bad(f"{where}.lines", f"line {missing[0]} of {_show(path)} is not in the diff's "
                  "new file as the diff shows it.")
    if not any(start <= n <= end for n in added):
        raise bad(f"{where}.lines", "no line of the range is added by the change.")
    category = d.get("category")
    if category is not None and category not in CATEGORIES:
        raise bad(f"{where}.category", f"one of {', '.join(CATEGORIES)} (or leave it out).")
    kind = d.get("kind", "")
    if kind and kind not in KINDS:
        raise bad(f"{where}.kind", f"one of {', '.join(KINDS)} (or leave it out).")
    what = d.get("what", "")
    if not isinstance(what, str) or len(what) > MAX_WORDS:
        raise bad(f"{where}.what", f"must be text of at most {MAX_WORDS} characters.")
    return Defect(file=path, start=start, end=end, category=category, kind=kind or "",
                  what=what.strip())


def _span(d: dict[str, Any], where: str, bad) -> tuple[int, int]:
    if "lines" in d:
        lines = d["lines"]
        if (not isinstance(lines, list) or len(lines) != 2
                or not all(type(n) is int and n > 0 for n in lines) or lines[0] > lines[1]):
            raise bad(where, "must be [first, last], positive, in order.")
        return lines[0], lines[1]
    line = d.get("line")
    if type(line) is not int or line <= 0:
        raise bad(where, "required: \"lines\": [first, last] or \"line\": n.")
    return line, line


def _show(value: object) -> str:
    """Untrusted text on one line, cut short."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(value))
    return text if len(text) <= 120 else text[:119] + "…"
