"""CSV cells a spreadsheet shows as text (the usage export, an experiment's runs): a cell that
starts like a formula gets a leading quote, so a task or a model's words such as
``=HYPERLINK(...)`` are never evaluated when the file is opened. Numbers stay numbers."""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value) -> str:
    text = str(value)
    return "'" + text if text[:1] in FORMULA_STARTS and not _number(text) else text


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
