"""The scorecard as text: Markdown tables for ``manage.py calibrate`` and the benchmark, and
the figures' wording the page shares (``recall_text``, ``money``)."""

from __future__ import annotations

from typing import Any

from .scoring import WHOLE


def fraction(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def interval(row: dict[str, Any]) -> str:
    if row.get("low") is None:
        return "n/a"
    return f"{row['low']:.2f}–{row['high']:.2f}"


def recall_text(row: dict[str, Any]) -> str:
    if not row["defects"]:
        return "n/a (no defect examined)"
    return f"{fraction(row['recall'])} ({row['found']}/{row['defects']})"


def money(value: float | None, *, none: str = "n/a") -> str:
    if value is None:
        return none
    return "$0" if value == 0 else f"${value:.4f}"


def fp_text(row: dict[str, Any]) -> str:
    if not row["clean"]:
        return "n/a (no clean diff examined)"
    return f"{row['fp_per_clean']:.2f} ({row['clean_findings']} on {row['clean']})"


def name(row: dict[str, Any]) -> str:
    return "whole review" if row["role"] == WHOLE else row["role"]


def lines(card: dict[str, Any], *, details: bool = False) -> list[str]:
    """The scorecard as Markdown: a header, the main table, recall by category, what only
    one reviewer found, what was not examined, and the precision from triage."""
    out = [f"Calibration of the code review: set {card['set']!r}, batch {card['batch']}"
           f" (started {card.get('started') or 'unknown'})",
           f"{card['cases']} case(s) reviewed of {card['set_cases']} "
           f"({card['clean_cases']} clean, {card['defects']} known defects); "
           f"{card['scored']} scored; total cost {money(card['cost_usd'])}. "
           f"A finding matches a defect in the same file within ±{card['slack']} lines, "
           "of its category when the defect has one."]
    if card.get("missing"):
        out.append(f"Not started: {card['missing']} case(s) of the set have no run in this "
                   "batch.")
    for f in card["failed"]:
        out.append(f"Failed: {f['case']} (run {f['run']}): {f['error']}")
    if card["unfinished"]:
        out.append("Not finished yet: " + ", ".join(
            f"{u['case']} ({u['status']})" for u in card["unfinished"]))
    out += ["", "| reviewer | model | recall (found/examined) | 95% interval | not examined "
            "| false positives per clean diff | other findings on flagged diffs "
            "| cost per true finding | found by no other |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in card["rows"]:
        out.append(f"| {name(row)} | {row['model']} | {recall_text(row)} | {interval(row)} "
                   f"| {len(row['not_examined'])} | {fp_text(row)} | {row['extra']} "
                   f"| {money(row['cost_per_find'], none='n/a (none found)')} "
                   f"| {'—' if row['role'] == WHOLE else len(row['unique'])} |")
    cats = sorted({c for row in card["rows"] for c in row["by_category"]})
    if cats:
        out += ["", "Found / examined, by the defect's category:", "",
                "| reviewer | " + " | ".join(cats) + " |",
                "|---|" + "---:|" * len(cats)]
        for row in card["rows"]:
            cells = [f"{row['by_category'][c][0]}/{row['by_category'][c][1]}"
                     if c in row["by_category"] else "—" for c in cats]
            out.append(f"| {name(row)} | " + " | ".join(cells) + " |")
    for row in card["rows"]:
        if row["role"] != WHOLE and row["unique"]:
            out.append(f"\nFound only by {row['role']} ({row['model']}): "
                       + "; ".join(row["unique"]))
    for row in card["rows"]:
        if row["not_examined"]:
            shown = row["not_examined"] if details else row["not_examined"][:5]
            more = len(row["not_examined"]) - len(shown)
            out.append(f"\nNot examined by {name(row)} (not counted as missed): "
                       + "; ".join(shown) + (f"; and {more} more" if more else ""))
    out += ["", "Precision from your triage of real reviews (accepted / decided):"]
    if not card["precision"]:
        out.append(card.get("precision_note") or "no triaged reviews yet")
    else:
        out += ["", "| reviewer | model | precision | 95% interval | accepted | rejected |",
                "|---|---|---:|---:|---:|---:|"]
        for p in card["precision"]:
            out.append(f"| {p['role']} | {p['model']} | {p['precision']:.2f} "
                       f"| {interval(p)} | {p['accepted']} | {p['rejected']} |")
    if details:
        out += ["", "| case | run | defects found | missed | not examined | findings "
                "| not matching a defect |", "|---|---:|---:|---|---|---:|---:|"]
        for c in card["case_results"]:
            missed = [d["where"] for d in c["defects"] if d["seen"] and not d["found"]]
            blind = [d["where"] for d in c["defects"] if not d["seen"]]
            out.append(f"| {c['case']} | {c['run']} | {c['defects_found']}/{len(c['defects'])} "
                       f"| {', '.join(missed) or '—'} | {', '.join(blind) or '—'} "
                       f"| {c['findings']} | {c['unmatched']} |")
    return out

