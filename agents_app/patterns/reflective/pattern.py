"""Reflective (actor / critic): the actor drafts, the critic judges the draft, the actor
revises with the critique, until the critic approves or ``max_reflections`` rounds are done.

Approval is a field of the critic's structured answer, never a word searched for in free
text: "not approved yet" must not end the loop.

Stages: ``draft:N`` (the actor writes draft N) and ``critique:N`` (the critic judges it).
Each draft and critique is an ``Item`` written with its stage, so the page can show every
round and what changed between drafts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from ..base import (
    Event,
    ForkEdit,
    Item,
    ItemEdited,
    ModelClient,
    OfflineReply,
    Pattern,
    StageResult,
)
from ..gate_input import check_field
from ..options import PatternOptions, option
from . import offline
from .prompts import actor_messages, critic_messages


class Critique(BaseModel):
    """The critic's judgement of one draft."""

    approved: bool = Field(description="True only if the draft fully meets the task and needs "
                                        "no further revision.")
    summary: str = Field(description="The judgement in one or two sentences.")
    issues: list[str] = Field(default_factory=list, description="Concrete problems to fix, "
                              "most important first. Empty when approved.")
    score: int = Field(default=5, ge=1, le=10, description="Quality from 1 (poor) to 10.")

    @field_validator("issues")
    @classmethod
    def _clean(cls, items: list[str]) -> list[str]:
        return [s.strip() for s in items if s and s.strip()]


MAX_DRAFT_CHARS = 50_000


class ForkDraft(BaseModel):
    """A fork's edit of the draft the critic is about to read."""

    text: str = Field(description="The draft, in Markdown.")


class ReflectiveOptions(PatternOptions):
    max_reflections: int = option(3, label="Max rounds", ge=1, le=10,
                                  help="most actor/critic rounds")


class Reflective(Pattern):
    name = "reflective"
    label = "Reflective (actor and critic)"
    stage_labels = {"draft": "Draft {0}", "critique": "Critique of draft {0}"}
    purpose = "For writing that gets better with critique: draft, critique, revise."
    summary = ("An actor drafts, a critic judges the draft against the task, the actor revises "
               "until the critic approves or the round limit is reached.")
    roles = ("actor", "critic")
    options = ReflectiveOptions
    live_events = {"draft_written": ("items-panel",), "critique": ("items-panel",)}

    def offline_replies(self) -> list[OfflineReply]:
        return [(None, "actor", offline.actor), ("Critique", "critic", offline.critic)]

    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = self.check_options(options)
        return {"task": task, "options": opts, "draft": "", "critique": None, "round": 0}

    def first_stage(self, state: dict[str, Any]) -> str:
        return "draft:1"

    def status_for(self, stage: str) -> str:
        return "executing" if stage.startswith("draft") else "reviewing"

    def describe_stage(self, stage: str) -> str | None:
        kind, n = stage.split(":")
        if kind == "draft":
            return "The actor is writing the first draft." if n == "1" else \
                f"The actor is revising (draft {n})."
        return f"The critic is judging draft {n}."

    def run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        kind, n = stage.split(":")
        if kind == "draft":
            return self._draft(int(n), state, client)
        if kind == "critique":
            return self._critique(int(n), state, client)
        raise ValueError(f"unknown stage {stage!r}")

    def _draft(self, n: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        messages = actor_messages(state["task"], state["draft"], state["critique"]) if n > 1 \
            else actor_messages(state["task"])
        draft = client.complete("actor", messages).text.strip()
        state = {**state, "draft": draft, "round": n}
        return StageResult(state=state, next_stage=f"critique:{n}",
                           records=[Item("draft", str(n), {"round": n, "text": draft})],
                           events=[Event("draft_written", f"Draft {n} written "
                                         f"({len(draft.split())} words).", {"round": n})])

    def _critique(self, n: int, state: dict[str, Any], client: ModelClient) -> StageResult:
        messages = critic_messages(state["task"], n, state["draft"])
        critique: Critique = client.complete("critic", messages, schema=Critique).data
        data = critique.model_dump()
        state = {**state, "critique": data}
        record = Item("critique", str(n), {"round": n, **data})
        limit = int(state["options"]["max_reflections"])
        if critique.approved:
            return StageResult(state=state, outcome="completed", answer=state["draft"],
                               records=[record], events=[Event(
                                   "critique", f"The critic approved draft {n} (score "
                                   f"{critique.score}/10): {critique.summary[:200]}",
                                   {"round": n, "approved": True})])
        if n >= limit:
            return StageResult(state=state, outcome="completed", answer=state["draft"],
                               records=[record], events=[Event(
                                   "critique", f"Draft {n} not approved (score "
                                   f"{critique.score}/10); the limit of {limit} rounds is "
                                   "reached, so it is the answer, unapproved.",
                                   {"round": n, "approved": False, "limit": True})])
        return StageResult(state=state, next_stage=f"draft:{n + 1}", records=[record],
                           events=[Event("critique", f"The critic asked for a revision of "
                                         f"draft {n} ({len(critique.issues)} issues, score "
                                         f"{critique.score}/10).", {"round": n,
                                                                     "approved": False})])

    # --- forks (issue 33): the draft before the critic reads it -----------------------------
    def fork_edit(self, stage: str, gate: str, state: dict[str, Any]) -> ForkEdit | None:
        kind, _, n = stage.partition(":")
        if kind != "critique" or not state.get("draft"):
            return None

        def apply(st: dict[str, Any], value: ForkDraft, author: str) -> tuple[dict[str, Any],
                                                                              list[Any]]:
            text = check_field("The draft", value.text, max_chars=MAX_DRAFT_CHARS)
            if text == st["draft"].strip():
                return st, []
            return {**st, "draft": text}, [ItemEdited("draft", n, {
                "round": int(n), "text": text, "edited_by": author})]

        return ForkEdit(ForkDraft, {"text": state["draft"]},
                        f"Draft {n}: the text the critic reads", apply)
