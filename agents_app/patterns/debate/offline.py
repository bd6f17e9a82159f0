"""The offline model's debaters and judge: deterministic and labelled. Each position restates
its stance on the question's key terms; the judge counts the rounds and favours no one."""

from __future__ import annotations

import re
from typing import Any

from ...llm.offline import LABEL, clip, key_terms, sections
from .prompts import (
    DEBATER_SYSTEM,
    POSITIONS,
    QUESTION,
    ROUND,
    TRANSCRIPT,
    TRANSCRIPT_SO_FAR,
    YOUR_TURN,
)

# The position's name and stance, read back from the first line of the system prompt.
_WHO = re.compile(re.escape(DEBATER_SYSTEM.split("\n", 1)[0])
                  .replace(re.escape("{name}"), '(?P<name>[^"]+)')
                  .replace(re.escape("{stance}"), "(?P<stance>.+)"))
_ROUND = re.compile(rf"^### {re.escape(ROUND)} (\d+)", re.MULTILINE)


def debater(messages: list[dict[str, str]]) -> str:
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    who = _WHO.search(system)
    secs = sections(messages)
    question = secs.get(QUESTION, "")
    name = who.group("name") if who else "A position"
    stance = who.group("stance") if who else ""
    reply = "It answers the other side's last points in turn. " if TRANSCRIPT_SO_FAR in secs \
        else ""
    return (f"**{name}** ({clip(stance, 120)}) on “{clip(question, 120)}”: "
            f"{reply}The case rests on {', '.join(key_terms(question, 3)) or 'the question itself'}. "
            f"({secs.get(YOUR_TURN, '')}) {LABEL}")


def judge(messages: list[dict[str, str]]) -> dict[str, Any]:
    secs = sections(messages)
    positions = [line[2:].split(":", 1)[0] for line in secs.get(POSITIONS, "").splitlines()
                 if line.startswith("- ")]
    rounds = len(set(_ROUND.findall(secs.get(TRANSCRIPT, ""))))
    return {"conclusion": f"The positions {', '.join(positions)} argued for {rounds} round(s). "
                          f"The offline model weighs nothing, so it favours no one. {LABEL}",
            "favoured": "", "key_points": []}
