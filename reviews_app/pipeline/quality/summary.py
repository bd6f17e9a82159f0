"""What the quality stages did to a review's findings, counted per stage, and one trail entry
put in words, for the review page (plain data in, plain data out; no Django)."""

from __future__ import annotations

from collections.abc import Iterable

from ..schema import KINDS

ACTION_TEXT = {
    ("safeguard", "keep"): "Safeguard kept it",
    ("safeguard", "correct"): "Safeguard corrected it",
    ("safeguard", "discard"): "Safeguard discarded it",
    ("safeguard", "unchecked"): "Safeguard did not check it",
    ("safeguard", "ignored"): "Safeguard correction ignored",
    ("severity", "change"): "Severity changed",
    ("category", "change"): "Kind changed",
    ("cluster", "cluster"): "Clustered repeats",
    ("cluster", "merge"): "Clustered into another finding",
    ("fold", "fold"): "Folded into a security finding",
    ("fold", "absorb"): "Took in a style finding",
}


def _entries(findings: Iterable) -> Iterable[dict]:
    for f in findings:
        quality = f.get("quality") if isinstance(f, dict) else getattr(f, "quality", None)
        for q in quality or ():
            if isinstance(q, dict):
                yield q


def _kind(f) -> str:
    return (f.get("kind") if isinstance(f, dict) else getattr(f, "kind", "")) or ""


def stage_lines(kept: list, dropped: list) -> list[str]:
    """One line per stage that left a trace: "Safeguard: 12 kept, 2 corrected, 3 discarded"."""
    counts: dict[tuple[str, str], int] = {}
    for q in _entries([*kept, *dropped]):
        key = (str(q.get("stage", "")), str(q.get("action", "")))
        counts[key] = counts.get(key, 0) + 1
    lines = []
    safe = [(counts.get(("safeguard", a), 0), label) for a, label in
            (("keep", "kept"), ("correct", "corrected"), ("discard", "discarded"),
             ("unchecked", "unchecked"))]
    if any(n for n, _ in safe):
        lines.append("Safeguard: " + ", ".join(f"{n} {label}" for n, label in safe
                                               if n or label != "unchecked"))
    if counts.get(("severity", "change")):
        lines.append(f"Severity by the rubric: {counts[('severity', 'change')]} changed")
    kinds: dict[str, int] = {}
    for f in kept:
        if _kind(f) in KINDS:
            kinds[_kind(f)] = kinds.get(_kind(f), 0) + 1
    if kinds:
        changed = counts.get(("category", "change"), 0)
        lines.append("Kinds: " + ", ".join(f"{kinds[k]} {k}" for k in KINDS if k in kinds)
                     + (f" ({changed} set by the verifier)" if changed else ""))
    clusters, merged = counts.get(("cluster", "cluster"), 0), counts.get(("cluster", "merge"), 0)
    if clusters:
        lines.append(f"Clustering: {merged} repeat(s) folded into {clusters} finding(s)")
    if counts.get(("fold", "fold")):
        lines.append(f"Style fixes that keep an injection: {counts[('fold', 'fold')]} folded "
                     "into the security finding")
    return lines


def changes(entry: dict) -> list[tuple[str, object, object]]:
    """(field, before, after) of a trail entry."""
    before = entry.get("before") if isinstance(entry.get("before"), dict) else {}
    after = entry.get("after") if isinstance(entry.get("after"), dict) else {}
    return [(str(k), before.get(k), after.get(k)) for k in before]


def action_text(entry: dict) -> str:
    stage, action = str(entry.get("stage", "")), str(entry.get("action", ""))
    return ACTION_TEXT.get((stage, action), f"{stage.capitalize()}: {action}")
