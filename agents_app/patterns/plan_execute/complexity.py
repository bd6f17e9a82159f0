"""A cheap local score of how much structure a task has, to decide whether to plan at all.

Signals, one point each: sequencing words ("then", "after that", "finally", ...), a list of
two or more items, three or more sentences, and length past roughly 120 tokens. Bare
punctuation is not a signal: semicolons are far more common in pasted code than as clause
separators.
"""

from __future__ import annotations

import re

_SEQUENCE = re.compile(
    r"\b(then|after that|afterwards|finally|next|first|second|third|lastly|followed by)\b",
    re.IGNORECASE,
)
LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S", re.MULTILINE)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_CHARS_PER_TOKEN = 4
_LONG_TOKENS = 120


def complexity_score(task: str) -> int:
    text = task.strip()
    score = 0
    if _SEQUENCE.search(text):
        score += 1
    if len(LIST_ITEM.findall(text)) >= 2:
        score += 1
    if len(_SENTENCE_END.findall(text)) >= 3:
        score += 1
    if len(text) / _CHARS_PER_TOKEN > _LONG_TOKENS:
        score += 1
    return score


def needs_planning(task: str, min_complexity: int = 2) -> bool:
    return complexity_score(task) >= min_complexity
