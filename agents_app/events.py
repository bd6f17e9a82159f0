"""Events: written to the database first (ordered per run), then announced to the run's
channel group once the transaction commits. A page renders from the database and then
subscribes, so a dropped announcement costs nothing but a moment's delay."""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction
from django.db.models import F, IntegerField
from django.db.models.expressions import CombinedExpression

from . import prepared
from .models import Event, Run
from .patterns.base import Event as EventSpec
from .returning import update_returning

log = logging.getLogger("quorum.events")


def group_name(run_id: int) -> str:
    return f"run-{run_id}"


def append_events(run_id: int, specs: Iterable[EventSpec], **run_updates) -> int | None:
    """Write ``specs`` as the run's next events, and return the number of the last one (None
    when there were none). ``run_updates`` (e.g. counters as F expressions) go into the same
    UPDATE of the run row that numbers the events."""
    specs = list(specs)
    if not specs:
        if run_updates:
            Run.objects.filter(pk=run_id).update(**run_updates)
        return None
    # One UPDATE … RETURNING numbers the events (the row's write lock orders writers), then
    # one INSERT writes them. No savepoint: inside a stage's transaction a failure here fails
    # that whole transaction anyway.
    with transaction.atomic(savepoint=False):
        if any(hasattr(v, "resolve_expression") for v in run_updates.values()):
            row = update_returning(Run.objects.filter(pk=run_id),
                                   {"last_event_seq": next_seqs(len(specs)), **run_updates},
                                   ["last_event_seq"])
        else:  # plain values (a status): the statement prepared once per set of fields
            names = tuple(sorted(run_updates))
            row = prepared.update(
                ("append_events", names), lambda: _numbering(names),
                {"run": run_id, "n": len(specs), **{f"set_{k}": run_updates[k] for k in names}},
                ["last_event_seq"])
        if row is None:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        write_events(run_id, row["last_event_seq"], specs)
    return row["last_event_seq"]


def _numbering(names: tuple[str, ...]):
    """The UPDATE that reserves a run's next event numbers and sets the fields ``names``."""
    return (Run.objects.filter(pk=prepared.slot(Run, "run", "id")),
            {"last_event_seq": F("last_event_seq") + prepared.Slot("n", IntegerField()),
             **{k: prepared.slot(Run, f"set_{k}", k) for k in names}})


def next_seqs(n: int) -> CombinedExpression:
    """The run row's update that reserves its next ``n`` event numbers."""
    return F("last_event_seq") + n


def write_events(run_id: int, newest: int, specs: list[EventSpec]) -> None:
    """Insert ``specs`` as the events numbered up to ``newest`` (reserved by the caller's
    update of the run row, in the current transaction), in one prepared INSERT; announced once
    it commits."""
    if not specs:
        return
    first = newest - len(specs) + 1
    prepared.insert(Event, [{"run_id": run_id, "seq": first + i, "kind": s.kind,
                             "message": s.message[:4000], "data": s.data}
                            for i, s in enumerate(specs)])
    transaction.on_commit(lambda: broadcast(run_id, newest))


def broadcast(run_id: int, seq: int) -> None:
    """Tell the run's watchers that events up to ``seq`` exist. Best effort by design."""
    if _announcer.deferring():  # no channel layer (and no Redis import) before it is due
        _announcer.announce(run_id, seq)
        return
    layer = get_channel_layer()
    if layer is None:
        return
    if isinstance(layer, InMemoryChannelLayer):  # one process (tests): send in place
        _send(lambda: async_to_sync(layer.group_send)(*_message(run_id, seq)), run_id, seq)
        return
    _announcer.announce(run_id, seq)


@contextmanager
def announcements_deferred(seconds: float) -> Iterator[None]:
    """See ``_Announcer.defer``: for a command whose runs are mostly over in a moment."""
    _announcer.defer(seconds)
    try:
        yield
    finally:
        _announcer.end_deferral()


def _message(run_id: int, seq: int):
    return group_name(run_id), {"type": "run.event", "seq": seq}


def _send(fn, run_id: int, seq: int) -> bool:
    try:
        fn()
    except Exception as exc:  # Redis away: the events are safe in the database
        _not_sent(run_id, seq, exc)
        return False
    return True


def _not_sent(run_id: int, seq: int, exc: BaseException) -> None:
    level = logging.DEBUG if _warned else logging.WARNING
    log.log(level, "could not announce event %s of run %s (live pages catch up when the "
            "channel layer is back): %s", seq, run_id, exc)
    _warned.add(True)


_warned: set[bool] = set()


class _Announcer:
    """Announces from one long-lived event loop per process.

    ``async_to_sync(group_send)`` from a worker thread opens a new event loop and a new
    Redis connection on every call, which made announcing the largest CPU cost of a run
    (docs/BENCHMARKS.md). Here one daemon thread keeps a loop (so the layer keeps its
    connection), and pending announcements coalesce per run: watchers read the event rows
    from the database, so only the newest sequence number of a run needs to be sent.

    Sends to the Redis pub/sub layer go out as one pipeline of ``PUBLISH`` per batch
    (``_Publisher``); any other layer's through ``group_send`` on the thread's loop.

    Once a send fails (Redis restarting), announcements are repeated every ``REPEAT_EVERY``
    seconds, the failed ones and every one made since, until ``REPEAT_FOR`` seconds pass
    without a failure. Sending again once Redis is back is not enough: a page's server
    subscribes to the run's group again only some seconds later (its reconnection backs
    off), and what is published before that reaches nobody, so a run whose last events fell
    in that window would leave its open pages behind for good (tests/faults/redis_restart.py).
    A watcher sends from its own cursor, so a repeat shows nothing twice.
    """

    REPEAT_EVERY = 2.0
    REPEAT_FOR = 60.0
    # Once woken, the thread waits this long before it takes the batch, so that the runs
    # committing meanwhile go out in the same batch: with 200 runs at once, 20 ms took the
    # announcer from ~7 to ~3 ms of CPU per run (docs/BENCHMARKS.md, "Sixth round"), for at
    # most 20 ms more between an event and its page.
    GATHER = 0.02

    def __init__(self) -> None:
        self._pending: dict[int, int] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._recent: dict[int, int] = {}  # announced since the last failure (serve thread)
        self._failed_at: float | None = None
        self._repeated_at = 0.0
        self._defer_until = 0.0
        self._timer: threading.Timer | None = None

    def defer(self, seconds: float) -> None:
        """Start announcing only ``seconds`` from now. A command-line run (``manage.py
        review`` of the offline model ends in about a second) then never loads the channel
        layer and Redis (0.4 s of its start-up) when it ends sooner, and what it would have
        announced is dropped: no page of that run could have been open yet, and a page
        opened later renders it from the database. A longer run is announced from then on."""
        with self._lock:
            self._defer_until = time.monotonic() + seconds

    def deferring(self) -> bool:
        return time.monotonic() < self._defer_until

    def end_deferral(self) -> None:
        """The deferring command has finished: what it announced before the announcer was due
        is dropped (see ``defer``), and announcements go out at once again."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._thread is None or not self._thread.is_alive():
                self._pending = {}
                self._idle.set()
            self._defer_until = 0.0

    def announce(self, run_id: int, seq: int) -> None:
        with self._lock:
            if seq > self._pending.get(run_id, 0):
                self._pending[run_id] = seq
            if self._pid != os.getpid() or self._thread is None or not self._thread.is_alive():
                wait = self._defer_until - time.monotonic()
                if wait <= 0:
                    self._start_locked()
                elif self._timer is None:
                    self._timer = threading.Timer(wait, self._start_when_due)
                    self._timer.daemon = True
                    self._timer.start()
            self._idle.clear()
        self._wake.set()

    def _start_locked(self) -> None:
        self._pid = os.getpid()  # a forked child needs its own thread
        self._thread = threading.Thread(target=self._serve, name="quorum-announcer",
                                        daemon=True)
        self._thread.start()

    def _start_when_due(self) -> None:
        with self._lock:
            self._timer = None
            if self._pending and (self._thread is None or not self._thread.is_alive()):
                self._start_locked()
        self._wake.set()

    def flush(self, timeout: float = 2.0) -> None:
        """Wait (briefly) until everything announced so far has been sent (what is still
        deferred is dropped: see ``defer``)."""
        if self._thread is not None and self._thread.is_alive():
            self._idle.wait(timeout)

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        layer = get_channel_layer()
        publisher = _Publisher.for_layer(layer)  # None: every send through group_send
        while True:
            self._wake.wait(self.REPEAT_EVERY if self._failed_at is not None else None)
            time.sleep(self.GATHER)  # let the announcements of other runs' commits join
            self._wake.clear()
            with self._lock:
                batch, self._pending = self._pending, {}
            now = time.monotonic()
            if self._failed_at is not None and now - self._failed_at > self.REPEAT_FOR:
                self._failed_at, self._recent = None, {}
            if self._failed_at is not None:
                for run_id, seq in batch.items():
                    self._recent[run_id] = max(seq, self._recent.get(run_id, 0))
                if now - self._repeated_at >= self.REPEAT_EVERY:
                    batch, self._repeated_at = dict(self._recent), now
            failed = (publisher.send_all(batch) if publisher is not None
                      else self._send_all(loop, layer, batch))
            if failed:
                if self._failed_at is None:
                    self._recent = dict(batch)
                self._failed_at = time.monotonic()
            with self._lock:
                if not self._pending:
                    self._idle.set()


    @staticmethod
    def _send_all(loop: asyncio.AbstractEventLoop, layer, batch: dict[int, int]) -> dict[int, int]:
        """Send a batch in one turn of the loop (one ``run_until_complete`` per announcement
        cost more CPU than the sends); the announcements that failed."""
        if not batch:
            return {}
        items = list(batch.items())

        async def send_all():
            return await asyncio.gather(*(layer.group_send(*_message(run_id, seq))
                                          for run_id, seq in items), return_exceptions=True)

        try:
            results = loop.run_until_complete(send_all())
        except Exception as exc:  # the loop itself failed: treat every send as failed
            results = [exc] * len(items)
        failed = {}
        for (run_id, seq), result in zip(items, results, strict=True):
            if isinstance(result, BaseException):
                _not_sent(run_id, seq, result)
                failed[run_id] = seq
        return failed


class _Publisher:
    """Announcements to a ``RedisPubSubChannelLayer``, published with a plain blocking Redis
    client: one pipeline of ``PUBLISH`` per batch and Redis host, to the channel and in the
    encoding the layer itself uses (its group naming, sharding and serializer), so that its
    subscribers (each Daphne process) receive what ``group_send`` would have sent. Through
    ``group_send`` each announcement cost a turn of the asyncio loop and a round trip of
    redis' asyncio client, one after another: ~10 ms of CPU per run with 200 runs at once,
    against ~7 ms this way, and ~3 ms with the announcer's window (docs/BENCHMARKS.md,
    "Sixth round").

    Only for hosts given as an address (``redis://…``, as the settings give ``REDIS_URL``);
    for any other form (sentinels, options) ``for_layer`` gives None and ``group_send`` sends.
    ``tests/test_announce_publisher.py`` holds it to a real subscriber of the layer."""

    # A Redis that stops answering holds the announcer this long (a pipeline is not retried
    # on a timeout; a refused connection fails at once), and a failed batch is the
    # announcer's to repeat. A pooled connection that Redis closed by restarting is replaced
    # when it is next taken from the pool.
    TIMEOUT = 5.0

    def __init__(self, layer, half, clients: list) -> None:
        self._serialize = layer.serialize
        self._half = half  # the layer's per-loop half: its names and shards
        self._clients = clients  # a client per shard, in the half's order

    @classmethod
    def for_layer(cls, layer) -> _Publisher | None:
        from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer

        if not isinstance(layer, RedisPubSubChannelLayer):
            return None
        import redis

        try:
            # Made only to ask the layer its channel names and shards: it connects nothing
            # until used, and this one is never used.
            half = RedisPubSubLoopLayer(*layer._args, **layer._kwargs, channel_layer=layer)
            hosts = [dict(shard.host) for shard in half._shards]
            half._shards.index(half._get_shard(half._get_group_channel_name(group_name(0))))
        except Exception:  # noqa: BLE001 - a layer unlike the one pinned: send its own way
            log.warning("announcing through group_send: the channel layer's hosts could not "
                        "be read", exc_info=True)
            return None
        clients = []
        for host in hosts:
            address = host.pop("address", None)
            if address is None or host:
                return None
            clients.append(redis.Redis.from_url(address, socket_timeout=cls.TIMEOUT,
                                                socket_connect_timeout=cls.TIMEOUT))
        return cls(layer, half, clients)

    def send_all(self, batch: dict[int, int]) -> dict[int, int]:
        """Publish a batch; the announcements that failed."""
        by_shard: dict[int, list[tuple[int, int, str, bytes]]] = {}
        for run_id, seq in batch.items():
            group, message = _message(run_id, seq)
            channel = self._half._get_group_channel_name(group)
            shard = self._half._shards.index(self._half._get_shard(channel))
            by_shard.setdefault(shard, []).append((run_id, seq, channel,
                                                   self._serialize(message)))
        failed: dict[int, int] = {}
        for shard, items in by_shard.items():
            pipe = self._clients[shard].pipeline(transaction=False)
            for _run_id, _seq, channel, data in items:
                pipe.publish(channel, data)
            try:
                results = pipe.execute(raise_on_error=False)
            except Exception as exc:  # Redis away: the events are safe in the database
                results = [exc] * len(items)
            for (run_id, seq, _channel, _data), result in zip(items, results, strict=True):
                if isinstance(result, BaseException):
                    _not_sent(run_id, seq, result)
                    failed[run_id] = seq
        return failed


_announcer = _Announcer()
atexit.register(_announcer.flush)
