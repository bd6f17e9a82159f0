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
    register_tools()
    register_team()


# --- ReAct and ReWOO -------------------------------------------------------------------------------
_ARITH = re.compile(r"(?<![\w.])(\(?\s*\d[\d.\s()*/+\-%]*[*/+\-%]\s*\(?\s*\d[\d.\s()*/+\-%]*)")
_TIME = re.compile(r"\b(time|date|today|now|day)\b", re.IGNORECASE)


_ASK = re.compile(r"\bask me\b[\s,:]*(?P<what>[^.?!\n]*)", re.IGNORECASE)
_LOCAL_TIME = re.compile(r"\b(?:my|local)\s+(?:time\s*zone|time|city)\b|\bwhere I am\b",
                         re.IGNORECASE)
ZONE_QUESTION = "Which time zone are you in (for example Europe/Paris)?"
_THEN = re.compile(r",?\s+(?:and\s+)?then\b|,\s+and\b", re.IGNORECASE)
_ABOUT = re.compile(r"^(?:for|about)\s+", re.IGNORECASE)
_YOURS = {"i": "you", "me": "you", "my": "your", "mine": "yours", "am": "are", "i'm": "you're"}
_PERSON = re.compile(r"\b(?:I'm|I|me|my|mine|am)\b", re.IGNORECASE)


def _planned_calls(task: str, timezone: str = "UTC") -> list[tuple[str, str, dict]]:
    """The tool calls a task spells out: arithmetic, and a question about the time."""
    calls = []
    for m in _ARITH.finditer(task):
        expression = m.group(1).strip().rstrip("?.")
        if any(op in expression for op in "*/+-%"):
            calls.append((f"What is {expression}?", "calculator", {"expression": expression}))
    if _TIME.search(task):
        calls.append(("What is the current time?", "current_time", {"timezone": timezone}))
    return calls[:4]


def person_question(task: str) -> str:
    """What the offline agent asks the person before anything else: what the task tells it
    to ask ("…, ask me which city to visit"), or the time zone a question about their local
    time leaves out. "" when it has nothing to ask."""
    if m := _ASK.search(task):
        # "ask me which city I live in, then …" → "Please tell me which city you live in."
        what = _THEN.split(m.group("what"), 1)[0].strip(" ,;:-")
        what = _ABOUT.sub("", _PERSON.sub(lambda p: _YOURS[p.group(0).lower()], what))
        return f"Please tell me {what}." if what else "What should I know for this task?"
    if _LOCAL_TIME.search(task) and _TIME.search(task):
        return ZONE_QUESTION
    return ""


def _person_answer(messages) -> str | None:
    """The person's answer to the agent's question, once there is one."""
    for m in messages:
        if m.get("role") == "user" and m["content"].startswith("## Observation (ask_person"):
            return m["content"].split("\n", 1)[-1].split(" answered: ", 1)[-1].strip()
    return None


def _zone(answer: str | None) -> str:
    from zoneinfo import ZoneInfo

    try:
        return answer.strip() if answer and ZoneInfo(answer.strip()) else "UTC"
    except (ValueError, KeyError, OSError):  # not a zone name (KeyError): the clock says UTC
        return "UTC"


def _observations(messages) -> list[str]:
    return [m["content"].split("\n", 1)[-1] for m in messages
            if m.get("role") == "user" and m["content"].startswith("## Observation")
            and not m["content"].startswith("## Observation (ask_person")]


def react_thought(messages) -> dict:
    task = sections(messages).get("Task", "")
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    # The question comes first, and only when the person can be asked (ask_person is a tool).
    question = person_question(task) if "### ask_person" in system else ""
    answer = _person_answer(messages)
    calls = [(question, "ask_person", {"question": question})] if question else []
    calls += _planned_calls(task, _zone(answer))
    done = sum(1 for m in messages if m.get("role") == "assistant")
    if done < len(calls):
        query, tool, args = calls[done]
        why = ("Only the person running this can tell." if tool == "ask_person"
               else f"The {tool} tool can tell.")
        return {"thought": f"{query} {why} {PLAIN_LABEL}",
                "action": {"type": "tool_call", "tool": tool, "input": args}}
    found = _observations(messages)
    lines = [f"You told me: {answer}"] if answer is not None else []
    lines += [f"- {o}" for o in found]
    if not lines:
        lines = ["The offline model can only use the calculator and the clock for what the "
                 "task spells out; there was nothing for it to look up here."]
    return {"thought": f"I have what I can get. {PLAIN_LABEL}",
            "action": {"type": "final_answer", "answer": "\n".join(lines) + f"\n\n{LABEL}"}}


def react_final(messages) -> dict:
    answer = _person_answer(messages)
    found = ([f"You told me: {answer}"] if answer is not None else []) + \
        [f"- {o}" for o in _observations(messages)]
    return {"answer": ("\n".join(found) or "Nothing was found.") + f"\n\n{LABEL}"}


def rewoo_sketch(messages) -> dict:
    calls = _planned_calls(sections(messages).get("Task", ""))
    return {"needs_tools": bool(calls), "reasoning": f"Calls the task spells out. {PLAIN_LABEL}",
            "sketches": [{"query": q, "tool": t, "arguments": a} for q, t, a in calls]}


def rewoo_organize(messages) -> dict:
    evidence = sections(messages).get("Evidence", "")
    items = re.findall(r"^\[(E\d+)\] .*?:\n(.*?)(?=^\[E\d+\] |\Z)", evidence,
                       re.MULTILINE | re.DOTALL)
    good = [(i, text.strip()) for i, text in items if not text.startswith("ERROR")]
    if not good:
        return {"answer": f"The evidence is not enough to answer. {LABEL}", "citations": [],
                "confidence": 0.1, "insufficient": True}
    lines = "\n".join(f"- {text.splitlines()[0]} [{i}]" for i, text in good)
    return {"answer": f"From the evidence:\n\n{lines}\n\n{LABEL}",
            "citations": [i for i, _ in good], "confidence": 0.6, "insufficient": False}


def rewoo_verify(messages) -> dict:
    secs = sections(messages)
    known = set(re.findall(r"^\[(E\d+)\]", secs.get("Evidence", ""), re.MULTILINE))
    cited = set(re.findall(r"\[(E\d+)\]", secs.get("Answer to check", "")))
    unknown = sorted(cited - known)
    return {"supported": not unknown,
            "problems": [f"{c} is not in the evidence." for c in unknown]}


def register_tools() -> None:
    from . import offline

    offline.register("Thought", react_thought, role="agent")
    offline.register("FinalAnswer", react_final, role="agent")
    offline.register("Sketch", rewoo_sketch)
    offline.register("Organized", rewoo_organize)
    offline.register("Verification", rewoo_verify)


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
