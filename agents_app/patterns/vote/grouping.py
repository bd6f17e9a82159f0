"""Grouping the voters' answers: the aggregator's schema, the checks that turn whatever it
returned into a valid partition of the voters, and the plain text grouping used when its
grouping leaves voters out (and by the offline aggregator).

Model output is untrusted: a voter the aggregator names twice stays in its first group, a
voter number that gave no answer is dropped, a representative outside its group is replaced
by the group's first voter, and voters in no group are grouped by their normalised text. Every
repair is said in ``notes`` so the page can show it. The result is deterministic: groups by
size, largest first, then by their first voter.
"""

from __future__ import annotations

import re
from typing import TypedDict

from pydantic import BaseModel, Field

from ..gate_input import without_control_characters

MAX_LABEL = 80


class AnswerGroup(BaseModel):
    voters: list[int] = Field(description="The numbers of the voters whose answers are "
                                          "equivalent (as in “Voter N”).")
    representative: int = Field(default=0, description="The number of the voter whose answer "
                                                       "best stands for the group.")
    label: str = Field(default="", description="A few words naming what the group's answers "
                                               "say.")


class Grouping(BaseModel):
    """The aggregator's grouping of the voters' answers."""

    groups: list[AnswerGroup] = Field(default_factory=list, description="Every voter in "
                                      "exactly one group.")
    summary: str = Field(default="", description="One sentence: how the answers differ, or "
                                                 "that they agree.")


class VoteGroup(TypedDict):
    """A group of equivalent answers, as the run keeps it."""

    voters: list[int]
    representative: int
    label: str
    answer: str


def normalise(text: str) -> str:
    """``text`` compared loosely: case, punctuation, Markdown marks and spacing ignored."""
    return " ".join(re.sub(r"[\W_]+", " ", (text or "").lower()).split())


def label_for(text: str) -> str:
    """A label made from an answer: its first line of words, clipped."""
    for line in (text or "").splitlines():
        words = " ".join(re.sub(r"^[\s>*+-]*(?:\d+[.)])?|[*_`#]", "", line).split())
        if words:
            return clip(words)
    return "(empty answer)"


def clip(text: str, n: int = MAX_LABEL) -> str:
    text = " ".join(without_control_characters(text or "").split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def group_by_text(answers: dict[int, str]) -> list[VoteGroup]:
    """Voters whose answers are the same once normalised, each set a group."""
    by_text: dict[str, list[int]] = {}
    for voter in sorted(answers):
        by_text.setdefault(normalise(answers[voter]), []).append(voter)
    return [{"voters": members, "representative": members[0],
             "label": label_for(answers[members[0]]), "answer": answers[members[0]]}
            for members in by_text.values()]


def ordered(groups: list[VoteGroup]) -> list[VoteGroup]:
    return sorted(groups, key=lambda g: (-len(g["voters"]), g["voters"][0]))


def settle(grouping: Grouping | None, answers: dict[int, str]) -> tuple[list[VoteGroup], list[str]]:
    """The groups of ``answers`` (voter number → text) from the aggregator's ``grouping``
    (None: it gave none), repaired into a partition of the voters, and what was repaired."""
    notes: list[str] = []
    placed: dict[int, int] = {}
    groups: list[VoteGroup] = []
    for n, proposed in enumerate(grouping.groups if grouping else [], 1):
        members: list[int] = []
        for voter in proposed.voters:
            if voter in members:
                continue
            if voter not in answers:
                notes.append(f"Group {n} named voter {voter}, who gave no answer in this "
                             "round: left out.")
            elif voter in placed:
                notes.append(f"Voter {voter} was put in groups {placed[voter]} and {n}: kept "
                             f"in group {placed[voter]}.")
            else:
                placed[voter] = n
                members.append(voter)
        if not members:
            continue
        members.sort()
        rep = proposed.representative
        if rep not in members:
            if rep:
                notes.append(f"Group {n}'s representative, voter {rep}, is not in the group: "
                             f"voter {members[0]} stands for it.")
            rep = members[0]
        groups.append({"voters": members, "representative": rep,
                       "label": clip(proposed.label) or label_for(answers[rep]),
                       "answer": answers[rep]})
    missing = {v: t for v, t in answers.items() if v not in placed}
    if missing and grouping is not None:
        names = ", ".join(map(str, sorted(missing)))
        notes.append(f"Voter{'s' if len(missing) > 1 else ''} {names} "
                     f"{'were' if len(missing) > 1 else 'was'} in no group: grouped by "
                     "their text.")
    groups += group_by_text(missing)
    return ordered(groups), notes


def percent(groups: list[VoteGroup], voters: int) -> int:
    """The share of the voters in the largest group, in whole percent (for people: the
    threshold itself is compared exactly, by ``settled``)."""
    return round(len(groups[0]["voters"]) * 100 / voters) if groups and voters else 0


def settled(groups: list[VoteGroup], voters: int, threshold: int) -> bool:
    """True when the largest group alone reaches ``threshold`` percent of the voters. A tie
    for the largest group never settles the vote: nothing says which of them is right."""
    if not groups:
        return False
    top = len(groups[0]["voters"])
    if len(groups) > 1 and len(groups[1]["voters"]) == top:
        return False
    return top * 100 >= threshold * voters
