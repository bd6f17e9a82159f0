"""Quorum vote (self-consistency across models): N voters answer the same task independently
and side by side, an aggregator groups the equivalent answers, and the share of voters in the
largest group is the agreement. At or above the threshold the run completes with that group's
answer; below it the run waits at the ``vote_pick`` gate, where a person picks a group's
answer, edits one and picks it, or asks for another round (with feedback the voters read),
until ``max_rounds`` rounds are done; after the last round only picking or editing remain.

Models: every voter slot is a role of its own, ``voter_1`` … ``voter_7``, beside
``aggregator``. The engine routes a call by its role through the run's role → model map,
filled from the start form's model fields (or ``--model voter_2=…`` on the command line,
``QUORUM_MODEL_VOTER_2`` in the environment), so voters of different model families need
nothing more than those fields: even-numbered voters default to the model of another family
when the server has one. A run with fewer voters leaves the higher slots unused.

Stages: ``vote:R`` (the voters of round R answer in parallel; each answer an
``Item("answer", "R:i")``), ``aggregate:R`` (the grouping, an ``Item("grouping", "R")``) and
``final:R`` (the answer a person chose). A decision at the gate is an ``Item("decision", "R")``.
The aggregator names a representative voter per group, so the answer a run ends with is
always one a voter wrote (or a person's edit of one), never the aggregator's own text. Its
grouping is checked and repaired (``grouping.settle``); if it fails, the answers are grouped
by their normalised text. Agreement counts every voter, so one that failed counts against it,
and a tie for the largest group never settles the vote. From round 2 on the voters read the
previous round's groups and the person's feedback.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ..base import (
    Decision,
    Event,
    ForkEdit,
    Gate,
    InvalidDecision,
    Item,
    ItemEdited,
    ModelClient,
    ModelError,
    OfflineReply,
    Pattern,
    StageResult,
)
from ..gate_input import check_field, check_text
from ..options import PatternOptions, option
from ..parallel import run_parallel
from . import offline
from .grouping import (
    MAX_LABEL,
    Grouping,
    VoteGroup,
    group_by_text,
    label_for,
    ordered,
    percent,
    settle,
    settled,
)
from .prompts import aggregator_messages, voter_messages

MAX_VOTERS = 7
VOTER_ROLES = tuple(f"voter_{i}" for i in range(1, MAX_VOTERS + 1))
GATE = "vote_pick"
ACTIONS = ("pick", "edit", "again")
MAX_ANSWER_CHARS = 20_000


class ForkGroup(BaseModel):
    voters: list[int] = Field(description="The numbers of the voters whose answers are "
                                          "equivalent.")
    label: str = Field(default="", description="A few words naming what they say (empty: "
                                               "made from the answer).")
    representative: int = Field(default=0, description="The voter whose answer stands for "
                                                       "the group (0: its first voter).")


class ForkGrouping(BaseModel):
    """A fork's edit of a round's grouping, at the gate."""

    groups: list[ForkGroup] = Field(default_factory=list)


def voter_role(i: int) -> str:
    return f"voter_{i}"


class VoteOptions(PatternOptions):
    voters: int = option(3, label="Voters", ge=2, le=MAX_VOTERS,
                         help="models answering the task independently (roles voter_1 to "
                              "voter_7)")
    threshold: int = option(75, label="Agreement needed (%)", ge=50, le=100,
                            help="share of the voters the largest group needs for the run to "
                                 "finish on its own; below it, you choose")
    max_rounds: int = option(2, label="Rounds", ge=1, le=5,
                             help="rounds of voting; you may ask for another until the last")
    timeout: float = option(180.0, label="Seconds per round", hidden=True)


class QuorumVote(Pattern):
    name = "vote"
    label = "Quorum vote"
    purpose = "For a question with one right answer: several models answer, the most agreed wins."
    summary = ("Several models answer the same task independently; an aggregator groups the "
               "equivalent answers, and the largest group's answer wins when enough voters "
               "agree. Otherwise you pick, edit, or ask for another round.")
    stage_labels = {"vote": "Round {0}: the voters answer", "aggregate": "Round {0}: grouping "
                    "the answers", "final": "The chosen answer (round {0})"}
    stage_lines = {"vote": "Round {0}: the voters are answering the task independently.",
                   "aggregate": "Round {0}: the aggregator is grouping equivalent answers.",
                   "final": "Finishing with the answer you chose."}
    gate_lines = {GATE: "Waiting for you: the voters did not agree enough. Pick an answer, "
                        "edit one, or ask for another round."}
    status_lines = {"executing": "The voters are answering again.",
                    "reviewing": "The aggregator is grouping the answers.",
                    "synthesizing": "The run is finishing with the answer chosen."}
    roles = (*VOTER_ROLES, "aggregator")
    role_defaults = {role: "other-family" for role in VOTER_ROLES[1::2]}
    options = VoteOptions
    gates = (GATE,)
    gate_labels = {GATE: "Awaiting your pick"}
    live_events = {"votes_cast": ("items-panel",), "answers_grouped": ("items-panel",),
                   "vote_decided": ("items-panel",)}

    def offline_replies(self) -> list[OfflineReply]:
        replies: list[OfflineReply] = [(None, voter_role(i), offline.voter(i))
                                       for i in range(1, MAX_VOTERS + 1)]
        return [*replies, (Grouping.__name__, "aggregator", offline.aggregator)]

    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = self.check_options(options)
        return {"task": task, "options": opts, "round": 0, "answers": [], "groups": [],
                "feedback": "", "chosen": None}

    def first_stage(self, state: dict[str, Any]) -> str:
        return "vote:1"

    def roles_used(self, options: dict[str, Any]) -> tuple[str, ...]:
        """The first ``voters`` voter slots and the aggregator: the higher slots are unused."""
        voters = int(options.get("voters") or len(VOTER_ROLES))
        return (*VOTER_ROLES[:voters], "aggregator")

    def status_for(self, stage: str) -> str:
        kind = (stage or "").split(":")[0]
        return {"vote": "executing", "aggregate": "reviewing"}.get(kind, "synthesizing")

    def run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        kind, _, n = stage.partition(":")
        if kind == "vote":
            return self._vote(int(n), state, client)
        if kind == "aggregate":
            return self._aggregate(int(n), state, client)
        if kind == "final":
            return self._final(int(n), state)
        raise ValueError(f"unknown stage {stage!r}")

    # --- stages -----------------------------------------------------------------------------
    def _vote(self, r: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        opts = state["options"]
        n = int(opts["voters"])
        earlier = [{"label": g["label"], "answer": g["answer"], "size": len(g["voters"])}
                   for g in state["groups"]] if r > 1 else None
        messages = voter_messages(state["task"], earlier, state["feedback"] if r > 1 else "")

        def answer(i: int) -> str:
            return client.complete(voter_role(i), messages, key=voter_role(i)).text.strip()

        jobs = {str(i): (lambda i=i: answer(i)) for i in range(1, n + 1)}
        outcomes = run_parallel(jobs, float(opts["timeout"]), n)
        answers: list[dict[str, Any]] = []
        records: list[Item] = []
        events: list[Event] = []
        for i in range(1, n + 1):
            out = outcomes[str(i)]
            text = out.value or ""
            error = out.error or ("" if text else "The model returned an empty answer.")
            a = {"round": r, "voter": i, "role": voter_role(i), "text": text, "error": error,
                 "seconds": round(out.seconds, 2)}
            answers.append(a)
            records.append(Item("answer", f"{r}:{i}", a))
            if error:
                events.append(Event("vote_failed", f"Round {r}: voter {i} gave no answer "
                                    f"({error[:200]}).", {"round": r, "voter": i}))
        state = {**state, "round": r, "answers": answers, "groups": [], "chosen": None}
        answered = [a for a in answers if not a["error"]]
        if not answered:
            reasons = "; ".join(f"voter {a['voter']}: {a['error'][:200]}" for a in answers)
            return StageResult(state=state, outcome="failed", records=records, events=events,
                               error=f"Round {r}: no voter answered ({reasons}).")
        events.append(Event("votes_cast", f"Round {r}: {len(answered)} of {n} voters "
                            "answered.", {"round": r}))
        return StageResult(state=state, next_stage=f"aggregate:{r}", records=records,
                           events=events)

    def _aggregate(self, r: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        opts = state["options"]
        n, threshold = int(opts["voters"]), int(opts["threshold"])
        answers = {a["voter"]: a["text"] for a in state["answers"] if not a["error"]}
        summary, notes = "", []
        if len(answers) == 1:
            groups = group_by_text(answers)
        else:
            try:
                grouping: Grouping = client.complete(
                    "aggregator", aggregator_messages(state["task"], answers),
                    schema=Grouping).data
            except ModelError as exc:
                groups, notes = ordered(group_by_text(answers)), [
                    f"The aggregator failed ({str(exc)[:200]}): the answers were grouped by "
                    "their text, which can only understate the agreement."]
            else:
                groups, notes = settle(grouping, answers)
                summary = grouping.summary.strip()[:500]
        share = percent(groups, n)
        done = settled(groups, n, threshold)
        record = Item("grouping", str(r), {
            "round": r, "groups": groups, "agreement": share, "threshold": threshold,
            "voters": n, "settled": done, "notes": notes, "summary": summary})
        top = groups[0]
        said = (f"Round {r}: {len(top['voters'])} of {n} voters agree ({share}%; "
                f"{threshold}% needed), in {len(groups)} group{'s' if len(groups) > 1 else ''}.")
        events = [Event("answers_grouped", said, {"round": r, "agreement": share})]
        events += [Event("grouping_repaired", note, {"round": r}) for note in notes]
        state = {**state, "groups": groups}
        if done:
            chosen = {"round": r, "group": 1, "answer": top["answer"], "edited": False,
                      "by": ""}
            return StageResult(state={**state, "chosen": chosen}, outcome="completed",
                               answer=top["answer"], records=[record], events=[*events, Event(
                                   "vote_settled", f"The vote is settled: “{top['label']}” "
                                   f"(voter {top['representative']}'s answer).",
                                   {"round": r})])
        last = r >= int(opts["max_rounds"])
        return StageResult(state=state, gate=Gate(GATE, {
            "round": r, "agreement": share, "groups": len(groups), "last_round": last}),
            records=[record], events=events)

    def _final(self, r: int, state: dict[str, Any]) -> StageResult:
        chosen = state["chosen"]
        return StageResult(state=state, outcome="completed", answer=chosen["answer"],
                           events=[Event("answer", "The run ends with the answer "
                                         f"{chosen['by'] or 'you'} chose.", {"round": r})])

    # --- the gate ---------------------------------------------------------------------------
    def decide(self, gate: str, state: dict[str, Any], decision: Decision) -> StageResult:
        if gate != GATE:
            raise InvalidDecision(f"This run has no {gate!r} gate.")
        r, groups = int(state["round"]), state["groups"]
        limit = int(state["options"]["max_rounds"])
        who = decision.author or "You"
        if decision.action == "again":
            if r >= limit:
                raise InvalidDecision(f"Round {r} was the last of {limit}: pick an answer or "
                                      "edit one.")
            feedback = check_text("Your feedback", (decision.feedback or "").strip())
            record = Item("decision", str(r), {"round": r, "action": "again", "group": None,
                                               "edited": False, "feedback": feedback,
                                               "by": decision.author})
            return StageResult(state={**state, "feedback": feedback, "chosen": None},
                               next_stage=f"vote:{r + 1}", records=[record], events=[Event(
                                   "vote_decided", f"{who} asked for round {r + 1}"
                                   + (" with feedback." if feedback else "."), {"round": r})])
        if decision.action not in ACTIONS:
            raise InvalidDecision("Pick an answer, edit one, or ask for another round.")
        edits = decision.edits if isinstance(decision.edits, dict) else {}
        g = edits.get("group")
        if not isinstance(g, int) or isinstance(g, bool) or not 1 <= g <= len(groups):
            raise InvalidDecision(f"There is no group {g} in round {r}: choose one of the "
                                  f"{len(groups)} groups shown.")
        group = groups[g - 1]
        text, edited = group["answer"], False
        if decision.action == "edit":
            text = (edits.get("answer") or "").strip()
            if not text:
                raise InvalidDecision("The edited answer is empty: write the answer, or pick "
                                      "the group's answer as it is.")
            if len(text) > MAX_ANSWER_CHARS:
                raise InvalidDecision(f"The edited answer is {len(text):,} characters; the "
                                      f"limit is {MAX_ANSWER_CHARS:,}.")
            check_text("The edited answer", text)
            edited = text != group["answer"].strip()
        chosen = {"round": r, "group": g, "answer": text, "edited": edited,
                  "by": decision.author}
        record = Item("decision", str(r), {"round": r, "action": decision.action, "group": g,
                                           "label": group["label"], "edited": edited,
                                           "feedback": "", "by": decision.author})
        how = "edited and picked" if edited else "picked"
        return StageResult(state={**state, "chosen": chosen}, next_stage=f"final:{r}",
                           records=[record], events=[Event(
                               "vote_decided", f"{who} {how} the answer of group {g} "
                               f"(“{group['label']}”).", {"round": r, "group": g})])

    # --- forks (issue 33): the grouping at the gate -------------------------------------------
    def decided_on(self, gate: str, state: dict[str, Any]) -> Any:
        """The round's answers and groups, without how long each voter took."""
        return {**state, "answers": [{k: v for k, v in a.items() if k != "seconds"}
                                     for a in state["answers"]]}

    def fork_edit(self, stage: str, gate: str, state: dict[str, Any]) -> ForkEdit | None:
        if gate != GATE or not state.get("groups"):
            return None
        r = int(state["round"])
        value = {"groups": [{"voters": g["voters"], "label": g["label"],
                             "representative": g["representative"]} for g in state["groups"]]}

        def apply(st: dict[str, Any], edit: ForkGrouping, author: str) -> tuple[
                dict[str, Any], list[Any]]:
            groups = self.edited_groups(st, edit)
            if groups == st["groups"]:
                return st, []
            opts = st["options"]
            n, threshold = int(opts["voters"]), int(opts["threshold"])
            note = f"Grouped by {author or 'a person'} when this run was forked."
            return {**st, "groups": groups}, [ItemEdited("grouping", str(r), {
                "round": r, "groups": groups, "agreement": percent(groups, n),
                "threshold": threshold, "voters": n, "settled": settled(groups, n, threshold),
                "notes": [note], "summary": "", "edited_by": author})]

        return ForkEdit(ForkGrouping, value, f"Round {r}: the groups of equivalent answers",
                        apply)

    @staticmethod
    def edited_groups(state: dict[str, Any], edit: ForkGrouping) -> list[VoteGroup]:
        """A person's grouping of the round's answers, checked: every voter who answered in
        exactly one group, no other voter; InvalidDecision naming what is wrong."""
        answers = {a["voter"]: a["text"] for a in state["answers"] if not a["error"]}
        r = state["round"]
        if not edit.groups:
            raise InvalidDecision("The grouping has no groups: put every voter who answered "
                                  "in one group.")
        placed: dict[int, int] = {}
        groups: list[VoteGroup] = []
        for n, g in enumerate(edit.groups, 1):
            if not g.voters:
                raise InvalidDecision(f"Group {n} has no voters: remove it or name its voters.")
            for voter in g.voters:
                if voter not in answers:
                    raise InvalidDecision(f"Group {n} names voter {voter}, who gave no answer "
                                          f"in round {r}.")
                if voter in placed:
                    raise InvalidDecision(f"Voter {voter} is in groups {placed[voter]} and "
                                          f"{n}: put each voter in one group.")
                placed[voter] = n
            members = sorted(g.voters)
            rep = g.representative or members[0]
            if rep not in members:
                raise InvalidDecision(f"Group {n}'s representative, voter {rep}, is not in the "
                                      "group.")
            label = check_field(f"Group {n}'s label", g.label, max_chars=MAX_LABEL,
                                required=False) or label_for(answers[rep])
            groups.append({"voters": members, "representative": rep, "label": label,
                           "answer": answers[rep]})
        if missing := sorted(set(answers) - set(placed)):
            raise InvalidDecision(f"Voter{'s' if len(missing) > 1 else ''} "
                                  f"{', '.join(map(str, missing))} "
                                  f"{'are' if len(missing) > 1 else 'is'} in no group: put "
                                  "every voter who answered in one group.")
        return ordered(groups)
