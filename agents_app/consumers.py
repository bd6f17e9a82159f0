"""The run page's live channel. The page renders from the database, connects, and says
which event it has last (``{"after": N}``); the consumer then sends every event after N in
order and keeps its own cursor, so a reconnect or a reload never loses or repeats one.

Announcements (``agents_app.events``: events up to N of a run exist) reach a process once per
run, not once per watcher: a ``RunHub`` holds the run's one group subscription in this process
and hands each announcement to its watchers, which share one render per cursor and are sent it
in turn (issue 17: 200 watchers of a run paid 200 channel-layer deliveries and dispatches for
every announcement)."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.db import DatabaseError, connection

from .converters import MAX_ID
from .events import group_name
from .live import panels_for, render_live
from .models import Event, Run
from .patterns import safe_json
from .teams.access import visible

BATCH = 200
log = logging.getLogger("quorum.live")

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


# The channel's database reads (the owner check, the renders) run on a thread of their own,
# not on the one thread that all other database work of this process shares (sessions, every
# HTTP request): a burst of connections or page loads no longer queues ahead of the render
# that 200 watchers are waiting for. That thread keeps its connection between reads (a new
# SQLite connection and its set-up per read was a large share of the channel's work); a read
# that fails on it closes it and is tried once more on a new one.
_LIVE_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quorum-live-db")


def on_live_thread(fn):
    """``fn`` (a database read) as a coroutine run on the live channel's database thread."""
    def read(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DatabaseError:  # a connection the server dropped, a locked file: once more
            connection.close()
            return fn(*args, **kwargs)

    run = sync_to_async(read, thread_sensitive=False, executor=_LIVE_THREAD)

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        return await run(*args, **kwargs)
    return wrapper


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


async def shared_render(run_id: int, run_key: tuple, cursor: int, seq: int = 0):
    """The message for the events of the run after ``cursor``: (html, newest seq or None,
    whether it reaches the run's last event). ``seq`` is an event known to exist (announced
    after its commit): a render of this run and cursor that another watcher made, or is
    making, serves if it reaches ``seq``; otherwise this one reads the database."""
    key = (run_key, cursor)
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
        result = await _render_after(run_id, run_key, cursor)
    except BaseException:
        future.cancel()
        raise
    finally:
        if _INFLIGHT.get(key) is future:
            del _INFLIGHT[key]
    future.set_result(result)
    return result


@on_live_thread
def _render_after(run_id: int, run_key: tuple, cursor: int):
    # The run first, then only the events it already counts: they were written in the same
    # transaction as the state the header and panels show, so a message never shows a newer
    # status ("Completed") beside panels chosen for older events.
    run = Run.objects.get(pk=run_id)
    key = (run_key, cursor, run.last_event_seq)
    cached = _RENDERED.get(key)
    if cached is not None:
        return cached
    events = list(Event.objects.filter(run_id=run_id, seq__gt=cursor,
                                       seq__lte=run.last_event_seq).order_by("seq")[:BATCH])
    if not events:
        return "", None, True
    panels = panels_for(run, {e.kind for e in events})
    newest = events[-1].seq
    result = render_live(run, events, panels), newest, newest >= run.last_event_seq
    _remember(_RENDERED, key, result)
    _remember(_LATEST, (run_key, cursor), result)
    return result


class RunHub:
    """The one subscription to a run's channel group in this process (and event loop), for
    every watcher of the run here. An announcement groups the watchers that are waiting for
    it by cursor; each group gets one render, sent to its watchers in turn. A watcher busy
    with its own catch-up (its hello, an earlier announcement) notes the announcement and
    catches up from its cursor once done, so each event reaches it once and in order."""

    def __init__(self, layer, run_id: int):
        self.layer, self.run_id = layer, run_id
        self.watchers: set[RunConsumer] = set()
        self.ready = asyncio.get_running_loop().create_future()
        self.channel = ""
        self._listener: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        try:
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(group_name(self.run_id), self.channel)
        except BaseException as exc:
            self.ready.set_exception(exc)
            self.ready.exception()  # retrieved here: the watchers that wait re-raise it
            raise
        self._listener = asyncio.create_task(self._listen())
        self.ready.set_result(None)

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
        if self.channel:
            try:
                await self.layer.group_discard(group_name(self.run_id), self.channel)
            except Exception as exc:  # Redis away: its subscriptions went with it
                log.debug("run %s: could not leave the group: %s", self.run_id, exc)

    async def _listen(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
                self.announce(int(message.get("seq", 0)))
            except asyncio.CancelledError:
                raise
            except Exception:  # a bad message or the layer hiccuping: keep listening
                log.warning("run %s: live announcement not handled", self.run_id, exc_info=True)
                await asyncio.sleep(0.5)

    def announce(self, seq: int) -> None:
        groups: dict[tuple, list[RunConsumer]] = {}
        for w in self.watchers:
            if w.cursor is None or seq <= w.cursor:
                continue
            if w.lock.locked():
                w.wanted = max(w.wanted, seq)
            else:
                groups.setdefault((w.run_key, w.cursor), []).append(w)
        for (run_key, cursor), watchers in groups.items():
            self._spawn(self._serve(run_key, cursor, watchers, seq))

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, run_key: tuple, cursor: int, watchers: list, seq: int) -> None:
        mine, start = [], cursor
        for w in watchers:
            if w.lock.locked():  # sending already: its sender sends this afterwards
                w.wanted = max(w.wanted, seq)
            elif w.cursor == cursor:  # still where it was: served here (a free lock: no wait)
                await w.lock.acquire()
                mine.append(w)
            elif w.cursor is not None and w.cursor < seq:  # moved on, not as far as seq
                self._spawn(w.catch_up(seq))
        try:
            while mine:
                html, newest, complete = await shared_render(self.run_id, run_key, cursor, seq)
                if newest is None:
                    break
                for w in mine:
                    w.cursor = newest
                    await w.send_message(html)
                cursor = newest
                if complete:
                    break
        except Exception:  # the database away: the pages reconnect and catch up from the database
            log.warning("run %s: could not render a live update", self.run_id, exc_info=True)
            for w in mine:
                self._spawn(w.close(code=1011))
        finally:
            again: dict[tuple, list[RunConsumer]] = {}  # announced while this was sending
            for w in mine:
                w.lock.release()
                # Only after progress: nothing newer in the database (a run deleted) ends it.
                if w.wanted > (w.cursor or 0) and cursor != start:
                    again.setdefault((w.run_key, w.cursor), []).append(w)
            for (key, at), group in again.items():
                self._spawn(self._serve(key, at, group, max(w.wanted for w in group)))


_HUBS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> {run id: hub}


async def join_hub(watcher: RunConsumer) -> RunHub:
    hubs = _HUBS.setdefault(asyncio.get_running_loop(), {})
    hub = hubs.get(watcher.run_id)
    if hub is None:
        hub = hubs[watcher.run_id] = RunHub(watcher.channel_layer, watcher.run_id)
        hub.watchers.add(watcher)
        try:
            await hub.start()
        except BaseException:
            if hubs.get(watcher.run_id) is hub:
                del hubs[watcher.run_id]
            raise
    else:
        hub.watchers.add(watcher)
        await asyncio.shield(hub.ready)
    return hub


async def leave_hub(watcher: RunConsumer, hub: RunHub) -> None:
    hub.watchers.discard(watcher)
    hubs = _HUBS.get(asyncio.get_running_loop(), {})
    if not hub.watchers and hubs.get(hub.run_id) is hub:
        del hubs[hub.run_id]
        await hub.close()


class RunConsumer(AsyncWebsocketConsumer):
    cursor: int | None = None
    hub: RunHub | None = None

    async def dispatch(self, message):
        """Channels' dispatch, without its ``aclose_old_connections()`` before every message.
        That is a hop onto the one thread all database work of this process shares, per
        message per connection: 200 watchers of a run put 200 hops in front of the render of
        every event (issue 17). Every database touch here goes through ``on_live_thread``
        (its own connection) or Channels' ``database_sync_to_async`` (which closes stale
        connections before and after itself)."""
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
        seen = await self._owns(user)
        if seen is None:
            await self.close(code=4404)
            return
        created_at, team_id = seen
        self.run_key = (self.run_id, created_at)
        if team_id is not None and self.channel_layer is not None:
            # Told when the person's memberships change, to close the page if they lose it.
            self.access_group = f"user-{user.pk}"
            await self.channel_layer.group_add(self.access_group, self.channel_name)
        self.lock = asyncio.Lock()  # held while events are being sent to this page
        self.wanted = 0  # the newest event announced while the lock was held
        # Subscribed before the page's hello is read: whatever commits after the hello's
        # database read is announced to this watcher.
        self.hub = await join_hub(self)
        await self.accept()

    async def disconnect(self, code):
        if getattr(self, "access_group", None) and self.channel_layer is not None:
            await self.channel_layer.group_discard(self.access_group, self.channel_name)
        if self.hub is not None:
            hub, self.hub = self.hub, None
            await leave_hub(self, hub)

    async def receive(self, text_data=None, bytes_data=None):
        after = parse_cursor(text_data)
        if after is None or self.hub is None:
            return
        await self.catch_up(after=after)

    async def catch_up(self, seq: int = 0, after: int | None = None):
        """Send every event after the cursor (``after``: the page's, from its hello), then
        those announced meanwhile."""
        async with self.lock:
            if after is not None:
                self.cursor = after
            if self.cursor is None:
                return
            await self._flush(seq)
            while self.wanted > self.cursor:
                before = self.cursor
                await self._flush(self.wanted)
                if self.cursor == before:  # nothing newer in the database (a run deleted)
                    break

    async def _flush(self, seq: int = 0):
        while True:
            html, newest, complete = await shared_render(self.run_id, self.run_key,
                                                         self.cursor, seq)
            if newest is None:
                return
            self.cursor = newest
            await self.send_message(html)
            if complete:  # up to the run's last event: later ones are announced when written
                return

    async def send_message(self, html: str):
        try:
            await self.send(text_data=html)
        except Exception as exc:  # the page has gone: its disconnect is on its way
            log.debug("run %s: a live update was not sent: %s", self.run_id, exc)

    @on_live_thread
    def _owns(self, user):
        """(created_at, team_id) if ``user`` may see the run (its owner, or a member of its
        team: agents_app/teams/access.py), else None."""
        return visible(Run.objects.filter(pk=self.run_id), user).values_list(
            "created_at", "team_id").first()

    async def access_changed(self, message):
        """The person's teams changed (agents_app/teams/services.py): a page of a team's run
        they may no longer see is closed at once, before its next event."""
        if await self._owns(self.scope["user"]) is None:
            await self.close(code=4403)
