"""The offline model's answers for the reflective and debate patterns: deterministic, labelled,
shaped like real answers so every page and limit of those patterns can be tried without a key.
No reasoning happens here."""

from __future__ import annotations

import re

from .offline import LABEL, PLAIN_LABEL, key_terms, sections


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def debater(messages) -> str:
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    name = re.search(r'as "([^"]+)"', system)
    stance = re.search(r"Your stance: (.+)", system)
    secs = sections(messages)
    question = secs.get("Question", "")
    turn = secs.get("Your turn", "")
    who = name.group(1) if name else "A position"
    earlier = "Transcript so far" in secs
    reply = ("It answers the other side's last points in turn. " if earlier else "")
    return (f"**{who}** ({_clip(stance.group(1) if stance else '', 120)}) on “{_clip(question, 120)}”: "
            f"{reply}The case rests on {', '.join(key_terms(question, 3)) or 'the question itself'}. "
            f"({turn}) {LABEL}")


def judge(messages) -> dict:
    secs = sections(messages)
    positions = [line[2:].split(":", 1)[0] for line in secs.get("Positions", "").splitlines()
                 if line.startswith("- ")]
    rounds = len(set(re.findall(r"^### Round (\d+)", secs.get("Transcript", ""), re.MULTILINE)))
    return {"conclusion": f"The positions {', '.join(positions)} argued for {rounds} round(s). "
                          f"The offline model weighs nothing, so it favours no one. {LABEL}",
            "favoured": "", "key_points": []}


def register() -> None:
    from . import offline

    offline.register(None, debater, role="debater")
    offline.register("Conclusion", judge, role="judge")
    register_team()


# --- Team lead -----------------------------------------------------------------------------------
def _team(messages) -> list[str]:
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    return re.findall(r"^- ([A-Za-z][\w-]*):", system, re.MULTILINE)


def delegation(messages) -> dict:
    from .offline import split_task

    task = sections(messages).get("Task", "")
    team = _team(messages) or ["member"]
    parts = split_task(task) or [f"Gather what is needed for: {_clip(task, 150)}",
                                 f"Write the answer to: {_clip(task, 150)}"]
    return {"subtasks": [{"assignee": team[i % len(team)], "task": p}
                         for i, p in enumerate(parts[:6])]}


def lead_review(messages) -> dict:
    log = sections(messages).get("Work log", "")
    team = _team(messages) or ["member"]
    if "Check the results" not in log:
        return {"complete": False, "reason": f"One check before the answer. {PLAIN_LABEL}",
                "reassignments": [{"assignee": team[0],
                                   "task": "Check the results so far against the task."}]}
    return {"complete": True, "reassignments": [], "reason": f"Enough to answer. {PLAIN_LABEL}"}


def member(messages) -> str:
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    who = re.search(r"You are ([\w-]+)", system)
    secs = sections(messages)
    subtask = secs.get("Your subtask", "")
    prior = "Results so far" in secs
    return (f"**{who.group(1) if who else 'member'}** on “{_clip(subtask, 150)}”: covers "
            f"{', '.join(key_terms(subtask, 3)) or 'the subtask'}"
            + ("; builds on the earlier results." if prior else ".") + f" {LABEL}")


def lead_text(messages) -> str:
    log = sections(messages).get("Results", "")
    parts = re.findall(r"^### (T\d+) — ([\w-]+)", log, re.MULTILINE)
    lines = "\n".join(f"- {t} by {who}" for t, who in parts)
    return f"The team's results, combined:\n\n{lines}\n\n{LABEL}"


def register_team() -> None:
    from . import offline

    offline.register("Delegation", delegation, role="lead")
    offline.register("LeadReview", lead_review, role="lead")
    offline.register(None, lead_text, role="lead")
    offline.register(None, member, role="member")
