"""Whether a round finished its work. The reviewer is told these rules (prompts.py), the offline
reviewer applies them, and the pattern checks them again after any reviewer answers: a round
with a plan step not done, a comment of the person's not acted on, or no change at all is
never approved (rounds.py overrules such an approval to a fix-up, saying why)."""

from __future__ import annotations

import re
from typing import Any

# "Step 2: …", "step #2 - …", "2. …", "2) …" at the start of a skipped entry.
_STEP_NUMBER = re.compile(r"^\s*(?:step\s*#?\s*(\d+)\b\s*[:.)\-–—]?|#?(\d+)\s*[.):]\s)\s*",
                          re.IGNORECASE)


def _norm(text: str) -> str:
    return " ".join((text or "").split()).casefold()


def steps_not_done(steps: list[str], skipped: list[str]) -> dict[str, Any]:
    """Which plan steps the executor's ``skipped`` entries name (by number, "Step 2: …", or by
    containing the step's text), each with why; the entries that name no step are ``other``
    (a comment it could not act on, say). ``{"plan_steps": n, "steps": [{"number", "step",
    "why"}], "other": [...]}``."""
    found: dict[int, dict[str, Any]] = {}
    other: list[str] = []
    for entry in skipped:
        number, rest = None, entry.strip()
        m = _STEP_NUMBER.match(entry)
        if m and 1 <= int(m[1] or m[2]) <= len(steps):
            number, rest = int(m[1] or m[2]), entry[m.end():].strip()
        if number is None:  # the step's own text, the longest that fits (steps can nest)
            hits = [(len(s), i) for i, s in enumerate(steps, 1) if _norm(s) and
                    _norm(s) in _norm(entry)]
            number = max(hits)[1] if hits else None
        if number is None:
            other.append(entry.strip())
            continue
        step = steps[number - 1]
        if rest.startswith(step):  # "Step 2: <the step> — why": keep the why
            rest = rest[len(step):].lstrip(" :—–-").strip()
        why = rest or "the executor gave no reason"
        if number in found:
            found[number]["why"] += f"; {why}"
        else:
            found[number] = {"number": number, "step": step, "why": why}
    return {"plan_steps": len(steps), "steps": [found[n] for n in sorted(found)],
            "other": other}


def headline(not_done: dict[str, Any] | None) -> str:
    """"1 of 2 plan steps not done" (and the other items), or "" when everything was done."""
    if not not_done:
        return ""
    parts = []
    if not_done.get("steps"):
        total = not_done.get("plan_steps") or len(not_done["steps"])
        parts.append(f"{len(not_done['steps'])} of {total} plan step{'s' if total != 1 else ''} "
                     "not done")
    if not_done.get("other"):
        n = len(not_done["other"])
        parts.append(f"{n} other item{'s' if n != 1 else ''} not done")
    return "; ".join(parts)


def _quoted(text: str, limit: int = 300) -> str:
    text = " ".join((text or "").split())
    return "“" + (text if len(text) <= limit else text[:limit - 1] + "…") + "”"


def round_problems(last_round: dict[str, Any], *, branch_empty: bool) -> list[dict[str, Any]]:
    """What the round left unfinished, as review comments for the executor (empty: nothing).
    ``last_round`` is the pattern's record of the round (its report, commit, the person's
    comments it had to address, and its ``not_done``); ``branch_empty``: the branch has no
    change against the base."""
    rnd = last_round.get("round")
    not_done = last_round.get("not_done") or {}
    problems = [{"file": "", "line": None,
                 "problem": f"Plan step {s['number']} was not done ({_quoted(s['step'])}): "
                            f"{s['why']}",
                 "requested_change": f"Carry out step {s['number']} of the plan."}
                for s in not_done.get("steps") or []]
    problems += [{"file": "", "line": None, "problem": f"Not done: {entry}",
                  "requested_change": "Do it, or explain why it cannot be done."}
                 for entry in not_done.get("other") or []]
    asked = last_round.get("addressing") or []
    if not last_round.get("commit"):
        if asked:
            problems += [{"file": "", "line": None,
                          "problem": f"Round {rnd} made no change after the comment of "
                                     f"{c.get('by')}: {_quoted(c.get('problem', ''))}.",
                          "requested_change": "Act on the comment."} for c in asked]
        elif branch_empty:
            problems.append({"file": "", "line": None, "problem": "The branch has no change "
                             "against the base, so there is nothing to merge.",
                             "requested_change": "Make the change the plan describes."})
        else:
            problems.append({"file": "", "line": None, "problem": f"Round {rnd} made no change: "
                             "the branch is as it was before this round.",
                             "requested_change": "Make the changes the comments ask for."})
    return problems
