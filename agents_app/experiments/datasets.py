"""Reading a dataset file (issue 34): JSONL (one object per line) or CSV (a header row), each
row a task with an optional id, reference answer, expected findings and checks. Every bad row
is named with its line and reason and the whole file is refused: nothing is dropped quietly,
nothing half-saved. Plain Python: no Django here."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

MAX_BYTES = 5 * 1024 * 1024
MAX_ROWS = 2000
MAX_TASK = 20_000
MAX_REFERENCE = 20_000
MAX_KEY = 100
SHOWN_PROBLEMS = 10
TASK_KEYS = ("task", "input", "question", "prompt")
FINDING_KEYS = {"file", "line_start", "line_end", "category"}


@dataclass
class Row:
    key: str
    task: str
    reference: str = ""
    expected_findings: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)


class DatasetError(ValueError):
    """A file that cannot be a dataset; ``problems`` are (line, reason), all of them counted."""

    def __init__(self, message: str, problems: list[tuple[int, str]] | None = None):
        self.problems = problems or []
        if self.problems:
            shown = "; ".join(f"line {n}: {why}" for n, why in self.problems[:SHOWN_PROBLEMS])
            more = len(self.problems) - SHOWN_PROBLEMS
            message = f"{message} {shown}" + (f"; and {more} more." if more > 0 else ".")
        super().__init__(message)


def parse(data: bytes, filename: str = "", *, max_task: int = MAX_TASK) -> list[Row]:
    """The rows of a JSONL or CSV file (by its name, else by its first character); a task
    is at most ``max_task`` characters (the app's limit for any task)."""
    if not data.strip():
        raise DatasetError("The file is empty.")
    if len(data) > MAX_BYTES:
        raise DatasetError(f"The file is {len(data):,} bytes; at most {MAX_BYTES:,}.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"The file is not UTF-8 text (byte {exc.start}).") from None
    if "\x00" in text:
        raise DatasetError("The file contains a NUL character: it is not a text dataset.")
    name = filename.lower()
    is_json = name.endswith((".jsonl", ".json", ".ndjson")) or (
        not name.endswith(".csv") and text.lstrip().startswith("{"))
    raw = _jsonl(text) if is_json else _csv(text)
    rows, problems, seen = [], [], set()
    for line, obj in raw:
        if isinstance(obj, str):  # a line that could not be read
            problems.append((line, obj))
            continue
        try:
            row = _row(obj, line, max_task)
        except ValueError as exc:
            problems.append((line, str(exc)))
            continue
        if row.key in seen:
            problems.append((line, f"the id {row.key!r} is used twice"))
            continue
        seen.add(row.key)
        rows.append(row)
    if problems:
        raise DatasetError(f"{len(problems)} of {len(raw)} rows cannot be used:", problems)
    if not rows:
        raise DatasetError("The file has no rows.")
    if len(rows) > MAX_ROWS:
        raise DatasetError(f"The file has {len(rows):,} rows; at most {MAX_ROWS:,}.")
    return rows


def _jsonl(text: str) -> list[tuple[int, dict | str]]:
    out: list[tuple[int, dict | str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            out.append((n, f"not JSON ({exc.msg}, column {exc.colno})"))
            continue
        except RecursionError:
            out.append((n, "nested too deeply"))
            continue
        out.append((n, obj if isinstance(obj, dict) else "not a JSON object"))
    return out


def _csv(text: str) -> list[tuple[int, dict | str]]:
    # strict: a quote left open is an error, not a field that swallows the rows after it
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    fields = [f.strip().lower() for f in (reader.fieldnames or [])]
    if not any(k in fields for k in TASK_KEYS):
        raise DatasetError("The CSV header has no task column (one of: "
                           f"{', '.join(TASK_KEYS)}).")
    reader.fieldnames = fields
    out: list[tuple[int, dict | str]] = []
    try:
        for record in reader:
            line = reader.line_num
            if None in record:
                out.append((line, "more cells than the header has columns"))
                continue
            obj: dict[str, Any] = {k: v for k, v in record.items() if v not in (None, "")}
            for key in ("expected_findings", "checks"):
                if isinstance(obj.get(key), str):
                    try:
                        obj[key] = json.loads(obj[key])
                    except (json.JSONDecodeError, RecursionError):
                        obj[key] = f"\x00{key}"  # reported by _row
            out.append((line, obj))
    except csv.Error as exc:
        raise DatasetError(f"The CSV cannot be read: {exc}.") from None
    return out


def _row(obj: dict[str, Any], line: int, max_task: int = MAX_TASK) -> Row:
    task = next((obj[k] for k in TASK_KEYS if k in obj), None)
    if not isinstance(task, str) or not task.strip():
        raise ValueError("no task (a non-empty \"task\" text)")
    if len(task) > max_task:
        raise ValueError(f"the task is {len(task):,} characters; at most {max_task:,}")
    raw_id = obj.get("id", line)
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        raise ValueError("the id must be text or a whole number")
    key = str(raw_id).strip()
    if not key or len(key) > MAX_KEY:
        raise ValueError(f"the id must be 1 to {MAX_KEY} characters")
    reference = obj.get("reference", obj.get("expected", ""))
    if isinstance(reference, bool) or not isinstance(reference, str | int | float) or (
            isinstance(reference, float) and not math.isfinite(reference)):
        raise ValueError("the reference must be text or a finite number")
    reference = str(reference)
    if len(reference) > MAX_REFERENCE:
        raise ValueError(f"the reference is longer than {MAX_REFERENCE:,} characters")
    findings = obj.get("expected_findings", [])
    if findings == "\x00expected_findings" or not isinstance(findings, list):
        raise ValueError("expected_findings must be a JSON list")
    for i, f in enumerate(findings, 1):
        if not isinstance(f, dict) or not isinstance(f.get("file"), str) or not f["file"]:
            raise ValueError(f"expected finding {i} needs a \"file\"")
        unknown = set(f) - FINDING_KEYS
        if unknown:
            raise ValueError(f"expected finding {i} has unknown keys: {', '.join(sorted(unknown))}")
        start, end = f.get("line_start", 1), f.get("line_end", f.get("line_start", 1))
        if not all(isinstance(n, int) and not isinstance(n, bool) and 0 < n < 10_000_000
                   for n in (start, end)):
            raise ValueError(f"expected finding {i}: line numbers must be whole numbers "
                             "from 1")
        if "category" in f and not isinstance(f["category"], str):
            raise ValueError(f"expected finding {i}: the category must be text")
        if start < 1 or end < start:
            raise ValueError(f"expected finding {i}: lines {start}–{end} are not a range")
        f["line_start"], f["line_end"] = start, end
    checks = obj.get("checks", [])
    if checks == "\x00checks" or not isinstance(checks, list) or not all(
            isinstance(c, dict) for c in checks):
        raise ValueError("checks must be a JSON list of evaluator objects")
    storable(obj)
    return Row(key=key, task=task.strip(), reference=reference, expected_findings=findings,
               checks=checks)


def storable(obj: Any) -> None:
    """Every text of the row one a database can store and a page can show as it is: no
    control character (a JSON "\\u0000", a right-to-left override that disguises a name)
    and no lone surrogate (a JSON "\\ud800")."""
    from ..patterns.gate_input import controls_in, texts

    if found := controls_in(obj):
        raise ValueError(f"a text holds invisible control characters ({', '.join(found[:3])})")
    for text in texts(obj):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("a text holds an unpaired surrogate (\\ud800 to \\udfff), "
                             "which is not a character") from None
