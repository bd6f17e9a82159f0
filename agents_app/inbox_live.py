"""The inbox, live (issue 35): when a gate opens, its approvals change or it is decided, its
card is rendered once and pushed to every inbox concerned — the owner's for a personal run;
the team's, and the team it was assigned or escalated to, for a team's run — over the
Channels groups ``inbox-user-<id>`` and ``inbox-team-<id>``. Each open inbox page keeps its
own filters and picks the card's variant (may decide it, only sees it, started it where the
rule asks for others); a page whose filters a card cannot be checked against here (age,
cost, deadline, assignee) reloads its list instead. Rendering once per change, not once per
watcher, is what lets a gate reach 200 members' open inboxes within two seconds
(tests/benchmarks/bench_inbox_fanout.py)."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import replace

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.db import transaction
from django.http import QueryDict
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape

from common import turns

from .models import Run
from .teams.services import user_group

log = logging.getLogger("quorum.inbox")

CARD = "agents_app/_inbox_card.html"


def user_inbox(user_id: int) -> str:
    return f"inbox-user-{user_id}"


def team_inbox(team_id: int) -> str:
    return f"inbox-team-{team_id}"


def changed(run_id: int) -> None:
    """Push the run's card (or its removal) once the current transaction commits."""
    transaction.on_commit(lambda: push(run_id))


def message_for(run_id: int) -> tuple[list[str], dict] | None:
    """The groups to tell and what to tell them about the run's gate now."""
    from .gates import core
    from .gates.models import GateOpening
    from .inbox import build

    run = Run.objects.filter(pk=run_id).select_related("merge_request", "team").first()
    if run is None:
        return None
    stop = GateOpening.objects.filter(run=run).select_related(
        "assignee_user", "assignee_team", "run").order_by("-opened_seq").first()
    groups = [user_inbox(run.owner_id)] if run.team_id is None else [team_inbox(run.team_id)]
    if stop is not None:
        if stop.assignee_team_id:
            groups.append(team_inbox(stop.assignee_team_id))
        if stop.assignee_user_id:
            groups.append(user_inbox(stop.assignee_user_id))
    message = {"type": "inbox.gate", "run": run.pk, "open": bool(run.is_waiting),
               "pattern": run.pattern, "gate": run.gate, "team": run.team_id,
               "deciders": [], "excluded": []}
    if run.is_waiting:
        card = build(None, [run])[0]
        message["deciders"] = [u.pk for u in core.deciders(stop)] if stop else [run.owner_id]
        if stop is not None and (stop.policy or {}).get("exclude_initiator"):
            message["excluded"] = [run.owner_id]
        for name, variant in (("decider", replace(card, can_decide=True)),
                              ("viewer", replace(card, can_decide=False)),
                              ("initiator", replace(card, can_decide=True, excluded=True))):
            message[name] = render_to_string(CARD, {"c": variant, "oob": ""})
    return list(dict.fromkeys(groups)), message


def push(run_id: int) -> None:
    """Best effort: with the channel layer away, open inboxes catch up on their next reload
    (every 20 s); so do they for a command that defers its announcements (a review from the
    command line, over in a moment: it loads no channel layer at all)."""
    from .events import _announcer

    if _announcer.deferring():
        return
    try:
        layer = get_channel_layer()
        found = message_for(run_id) if layer is not None else None
        if found is None:
            return
        groups, message = found
        if _loop_running():  # async_to_sync refuses this thread: send from one of its own
            sender = threading.Thread(target=_send, args=(layer, groups, message),
                                      name="quorum-inbox-push", daemon=True)
            sender.start()
            sender.join(5)
        else:
            _send(layer, groups, message)
    except Exception as exc:  # noqa: BLE001 - the gate is saved; pages reload their list
        log.warning("could not push run %s to the inboxes: %s", run_id, exc)


def _loop_running() -> bool:
    """Whether this thread runs an event loop (a caller such as Playwright's sync API, or
    an async test, deciding a gate in it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _send(layer, groups: list[str], message: dict) -> None:
    async def send_all() -> None:  # one event loop (and one Redis connection) for them all
        for group in groups:
            await layer.group_send(group, message)

    try:
        with turns.waiting():  # a round trip to Redis: a wait outside the process
            async_to_sync(send_all)()
    except Exception as exc:  # noqa: BLE001 - as in push: best effort
        log.warning("could not push %s to the inboxes: %s", message.get("run"), exc)


def removal(run_id: int) -> str:
    """The card leaves the page if the page shows it (static/quorum/app.js moves what arrives
    in ``#inbox-gone`` and ``#inbox-arrivals``: a card decided before the page loaded is not
    there, and that is no error)."""
    return f'<div id="inbox-gone" hx-swap-oob="beforeend"><span data-gone="gate-{run_id}"></span></div>'


def arrival(run_id: int, card: str) -> str:
    """The card replaces the page's card of the run, or is added at the end (oldest first)."""
    return f'<div id="inbox-arrivals" hx-swap-oob="beforeend">{card}</div>'



class InboxConsumer(AsyncWebsocketConsumer):
    """One open inbox page: in its owner's group and each of their teams' groups, and told
    when their teams change (``user-<id>``), so a member removed from a team stops receiving
    that team's cards at once."""

    async def connect(self):
        from .inbox import Filters

        user = self.scope.get("user")
        if user is None or not user.is_authenticated or self.channel_layer is None:
            await self.close(code=4401)
            return
        self.user_id = user.pk
        self.query = self.scope.get("query_string", b"").decode("latin-1")[:2000]
        self.filters = Filters.read(QueryDict(self.query))
        self.joined: list[str] = []
        await self._join()
        await self.channel_layer.group_add(user_group(self.user_id), self.channel_name)
        await self.accept()

    @database_sync_to_async
    def _groups(self) -> list[str]:
        from .teams.models import Membership

        teams = Membership.objects.filter(user_id=self.user_id).values_list("team_id",
                                                                             flat=True)
        return [user_inbox(self.user_id), *(team_inbox(t) for t in teams)]

    async def _join(self) -> None:
        wanted = await self._groups()
        for group in set(self.joined) - set(wanted):
            await self.channel_layer.group_discard(group, self.channel_name)
        for group in set(wanted) - set(self.joined):
            await self.channel_layer.group_add(group, self.channel_name)
        self.joined = wanted

    async def disconnect(self, code):
        if self.channel_layer is None or not hasattr(self, "joined"):
            return
        for group in [*self.joined, user_group(self.user_id)]:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def access_changed(self, message):
        """The person's teams changed: follow the new ones only, and reload the list (a
        card of a team they left goes with it)."""
        await self._join()
        await self.send(text_data=self._reload())

    def _reload(self) -> str:
        url = reverse("inbox") + "?" + (self.query + "&" if self.query else "") + "part=list"
        return (f'<div id="inbox-list" hx-swap-oob="true" hx-get="{escape(url)}" '
                'hx-trigger="load" hx-swap="outerHTML"></div>')

    async def inbox_gate(self, message):
        f = self.filters
        run = int(message["run"])
        if (f.pattern and message["pattern"] != f.pattern) or (
                f.gate and message["open"] and message["gate"] != f.gate):
            return
        if (f.team == "personal" and message["team"] is not None) or (
                f.team.isdigit() and message["team"] != int(f.team)):
            return
        decider = self.user_id in message["deciders"]
        if not message["open"] or (f.scope == "decide" and not decider):
            await self.send(text_data=removal(run))
            return
        if f.narrowed:
            await self.send(text_data=self._reload())
            return
        if self.user_id in message["excluded"]:
            card = message["initiator"]
        else:
            card = message["decider"] if decider else message["viewer"]
        await self.send(text_data=arrival(run, card))
