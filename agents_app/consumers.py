"""The run page's live channel. The page renders from the database, connects, and says
which event it has last (``{"after": N}``); the consumer then sends every event after N in
order and keeps its own cursor, so a reconnect or a reload never loses or repeats one."""

from __future__ import annotations

import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from .events import group_name
from .models import Event, Run
from .views import render_live

_PANELS_BY_KIND = {
    "model_call": {"calls-panel"},
    "plan_proposed": {"plan-panel"},
    "plan_edited": {"plan-panel"},
    "plan_decided": {"plan-panel"},
    "plan_trimmed": {"plan-panel"},
    "gate_opened": {"plan-panel", "items-panel"},
    "step_completed": {"steps-panel"},
    "step_failed": {"steps-panel"},
    "run_finished": {"answer-panel", "steps-panel", "plan-panel", "items-panel"},
    "draft_written": {"items-panel"},
    "critique": {"items-panel"},
    "round_finished": {"items-panel"},
    "argument_failed": {"items-panel"},
    "concluded": {"items-panel"},
    "tool_observed": {"items-panel"},
    "tool_gate": {"items-panel"},
    "tool_decided": {"items-panel"},
    "loop_stopped": {"items-panel"},
    "final_answer": {"items-panel", "answer-panel"},
    "sketched": {"items-panel"},
    "sketches_trimmed": {"items-panel"},
    "evidence": {"items-panel"},
    "organized": {"items-panel"},
    "verified": {"items-panel"},
    "delegated": {"items-panel"},
    "work_done": {"items-panel"},
    "lead_review": {"items-panel"},
    "assignee_unknown": {"items-panel"},
    "run_cancelled": {"plan-panel", "items-panel"},
    "budget_exceeded": {"plan-panel", "items-panel"},
}
BATCH = 200


class RunConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.run_id = int(self.scope["url_route"]["kwargs"]["pk"])
        if not await self._owns(user):
            await self.close(code=4404)
            return
        self.cursor: int | None = None
        self.group = group_name(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        try:
            after = int(json.loads(text_data or "{}").get("after", 0))
        except (ValueError, TypeError, AttributeError):
            return
        self.cursor = max(0, after)
        await self._flush()

    async def run_event(self, message):
        if self.cursor is not None and message.get("seq", 0) > self.cursor:
            await self._flush()

    async def _flush(self):
        while True:
            html, newest = await self._render_after(self.cursor)
            if newest is None:
                return
            self.cursor = newest
            await self.send(text_data=html)

    @database_sync_to_async
    def _owns(self, user) -> bool:
        return Run.objects.filter(pk=self.run_id, owner=user).exists()

    @database_sync_to_async
    def _render_after(self, cursor: int):
        # The run first, then only the events it already counts: they were written in the same
        # transaction as the state the header and panels show, so a message never shows a
        # newer status ("Completed") beside panels chosen for older events.
        run = Run.objects.get(pk=self.run_id)
        events = list(Event.objects.filter(run_id=self.run_id, seq__gt=cursor,
                                           seq__lte=run.last_event_seq).order_by("seq")[:BATCH])
        if not events:
            return "", None
        panels = {"header"}
        for e in events:
            panels |= _PANELS_BY_KIND.get(e.kind, set())
        return render_live(run, events, panels), events[-1].seq
