"""The run page's live channel. The page renders from the database, connects, and says
which event it has last (``{"after": N}``); the consumer then sends every event after N in
order and keeps its own cursor, so a reconnect or a reload never loses or repeats one."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from .converters import MAX_ID
from .events import group_name
from .live import panels_for, render_live
from .models import Event, Run
from .patterns import safe_json

BATCH = 200

# Messages rendered in this process. A message depends only on the run and the events after the
# cursor (no user, no request), and every watcher of a run usually has the same cursor, so one
# render serves them all: ``_RENDERED`` by (run, cursor, the run's last_event_seq) for the
# database path, ``_LATEST`` by (run, cursor) → the newest render, for announcements it already
# covers (answered without a database round trip). A run is (id, created_at), so an id used
# again (a database flushed with its sequences reset) never meets another run's message.
_RENDERED: OrderedDict[tuple, tuple[str, int | None, bool]] = OrderedDict()
_LATEST: OrderedDict[tuple, tuple[str, int, bool]] = OrderedDict()
_CACHE_MAX = 256
_cache_lock = threading.Lock()
_INFLIGHT: dict[tuple, asyncio.Future] = {}  # renders under way, by (run, cursor)


def _remember(cache: OrderedDict, key, value) -> None:
    with _cache_lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _CACHE_MAX:
            cache.popitem(last=False)


class NoSuchChannel(AsyncWebsocketConsumer):
    """Any WebSocket path that is not a run's: closed as "not found"."""

    async def connect(self):
        await self.close(code=4404)


def parse_cursor(text: str | None) -> int | None:
    """The ``after`` of a page's ``{"after": N}``, within 0..MAX_ID; None if unreadable."""
    try:
        after = int(safe_json.loads(text or "{}").get("after", 0))
    except (ValueError, TypeError, AttributeError, OverflowError):  # junk, NaN, 1e400
        return None
    return min(max(0, after), MAX_ID)


class RunConsumer(AsyncWebsocketConsumer):
    async def dispatch(self, message):
        """Channels' dispatch, without its ``aclose_old_connections()`` before every message.
        That is a hop onto the one thread all database work of this process shares, per
        message per connection: 200 watchers of a run put 200 hops in front of the render of
        every event (issue 17). Every database touch here goes through
        ``database_sync_to_async``, which closes stale connections before and after itself."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.run_id = int(self.scope["url_route"]["kwargs"]["pk"])
        created_at = await self._owns(user)
        if created_at is None:
            await self.close(code=4404)
            return
        self.run_key = (self.run_id, created_at)
        self.cursor: int | None = None
        self.group = group_name(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        after = parse_cursor(text_data)
        if after is None:
            return
        self.cursor = after
        await self._flush()

    async def run_event(self, message):
        seq = message.get("seq", 0)
        if self.cursor is not None and seq > self.cursor:
            await self._flush(seq)

    async def _flush(self, seq: int = 0):
        """Send every event after the cursor. ``seq`` is an event known to exist (announced
        after its commit): a render of this run and cursor that another watcher made, or is
        making, serves if it reaches ``seq``; otherwise this watcher renders."""
        while True:
            html, newest, complete = await self._shared_render(self.cursor, seq)
            if newest is None:
                return
            self.cursor = newest
            await self.send(text_data=html)
            if complete:  # up to the run's last event: later ones are announced when written
                return

    async def _shared_render(self, cursor: int, seq: int):
        key = (self.run_key, cursor)
        if seq:
            latest = _LATEST.get(key)
            if latest is not None and latest[1] >= seq:
                return latest
            pending = _INFLIGHT.get(key)
            if pending is not None:
                await asyncio.wait([pending])
                if not pending.cancelled():
                    result = pending.result()
                    if result[1] is not None and result[1] >= seq:
                        return result
        future = asyncio.get_running_loop().create_future()
        _INFLIGHT[key] = future
        try:
            result = await self._render_after(cursor)
        except BaseException:
            future.cancel()
            raise
        finally:
            if _INFLIGHT.get(key) is future:
                del _INFLIGHT[key]
        future.set_result(result)
        return result

    @database_sync_to_async
    def _owns(self, user):
        """The run's created_at if ``user`` owns it, else None."""
        return Run.objects.filter(pk=self.run_id, owner=user).values_list(
            "created_at", flat=True).first()

    @database_sync_to_async
    def _render_after(self, cursor: int):
        # The run first, then only the events it already counts: they were written in the same
        # transaction as the state the header and panels show, so a message never shows a
        # newer status ("Completed") beside panels chosen for older events.
        run = Run.objects.get(pk=self.run_id)
        key = (self.run_key, cursor, run.last_event_seq)
        cached = _RENDERED.get(key)
        if cached is not None:
            return cached
        events = list(Event.objects.filter(run_id=self.run_id, seq__gt=cursor,
                                           seq__lte=run.last_event_seq).order_by("seq")[:BATCH])
        if not events:
            return "", None, True
        panels = panels_for(run, {e.kind for e in events})
        newest = events[-1].seq
        result = render_live(run, events, panels), newest, newest >= run.last_event_seq
        _remember(_RENDERED, key, result)
        _remember(_LATEST, (self.run_key, cursor), result)
        return result
