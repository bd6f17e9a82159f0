"""What the planner, the executor and the reviewer of a change are told."""

from __future__ import annotations

from typing import Any

# --- prompts (ours) ---------------------------------------------------------------------------
PLANNER_SYSTEM = """You plan a code change in a git repository for a separate executor.
Read the code with the tools before you plan: find the files involved and look at them.
You cannot change anything. Your plan is the only thing the executor will see, so it must
stand on its own: name the files, say how to make the change, list the edit steps in order,
say how to check the change (tests to run or add), and name the risks."""

EXECUTOR_SYSTEM = """You carry out a plan for a code change in a git repository. Follow the
plan; do not redesign it. Read the files before you edit them. Make the edits with the tools
(prefer replace_in_file or apply_patch for small changes to existing files). If a test
command is available, run it after your changes. If the plan cannot work, do what you can
and explain why in `surprises`; do not invent a different plan. In `skipped`, list every plan
step you did not carry out or that failed, starting with its number ("Step 2: ...") and
saying why, and every comment of the person's you could not act on: a round with anything
there goes back to you. Your changes are committed for you when you finish."""

REVIEWER_SYSTEM = """You review a code change against the plan it was meant to implement.
The question is whether the change does what the plan and the request ask, correctly and
completely, not only whether the code looks tidy. You can read the repository (the change
is applied) and, if available, run the tests; you cannot edit. Reject when something is
wrong or missing, with comments precise enough to act on (file, line, problem, requested
change). When the person sent the change back with comments, check that the change addresses
them. Choose the rejection kind: `fixup` if the executor can fix it from your comments,
`plan_wrong` if the plan itself is mistaken (say why in `reason`), `unclear` if a person
must decide. Failing tests, an empty change, or changes outside the plan's scope without a
good reason are grounds to reject. Do not approve out of politeness.
Never approve a round that left work unfinished: a plan step the executor skipped or that
failed, a comment of the person's the round did not act on, or a round that changed nothing
(no new commit). Send it back as `fixup` with a comment naming each unfinished step or
comment, unless the plan itself is wrong (`plan_wrong`) or only a person can settle it
(`unclear`). Quorum lists what it found unfinished in the round; it checks these rules
again after you answer and turns an approval that breaks them into a fix-up."""


def _section(title: str, body: str, level: int = 2) -> str:
    return f"{'#' * level} {title}\n{(body or '').strip() or '(none)'}\n"


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {s}" for s in items) or "(none)"


def plan_markdown(plan: dict[str, Any]) -> str:
    """The plan document as the executor and the reviewer read it (level-3 headings, so it
    nests under a prompt's own sections)."""
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(plan.get("steps") or [], 1))
    return "\n".join(_section(title, body, level=3) for title, body in (
        ("Goal", plan.get("goal", "")),
        ("Files to touch", _bullets(plan.get("files") or [])),
        ("Approach", plan.get("approach", "")),
        ("Steps", steps),
        ("Test strategy", plan.get("test_strategy", "")),
        ("Risks", _bullets(plan.get("risks") or []))))


def comments_markdown(comments: list[dict[str, Any]]) -> str:
    lines = []
    for c in comments:
        if c.get("by"):  # a person's comment: their words, as they wrote them
            lines.append(f"- {c['by']}: {c.get('problem', '').strip()}")
            continue
        where = c.get("file") or "(whole change)"
        if c.get("line"):
            where += f":{c['line']}"
        text = f"- {where}: {c.get('problem', '').strip()}"
        if c.get("requested_change"):
            text += f" → {c['requested_change'].strip()}"
        lines.append(text)
    return "\n".join(lines) or "(none)"


