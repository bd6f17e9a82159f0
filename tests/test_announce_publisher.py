"""The announcer's Redis publisher (events._Publisher): what it publishes reaches a real
subscriber of the Redis pub/sub channel layer, as ``group_send`` would; a Redis that is away
fails the batch quickly and whole (the announcer then repeats it); layers and hosts it does
not handle are left to ``group_send``. And the announcer gathers the runs that commit within
its window into one batch."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer

from agents_app import events
from tests.stack import free_port, redis_port, start_redis


def _url() -> str:
    return f"redis://127.0.0.1:{redis_port()}/0"


async def _received(layer, channel: str, timeout: float) -> list[dict]:
    got = []
    try:
        while True:
            got.append(await asyncio.wait_for(layer.receive(channel), timeout))
    except TimeoutError:
        return got


@pytest.mark.integration
def test_a_subscriber_of_the_layer_receives_each_run_s_newest_announcement(redis_server):
    publisher = events._Publisher.for_layer(RedisPubSubChannelLayer(hosts=[_url()]))
    assert publisher is not None

    async def scenario():
        watcher = RedisPubSubChannelLayer(hosts=[_url()])  # a Daphne process of its own
        channel = await watcher.new_channel()
        await watcher.group_add(events.group_name(7), channel)
        await watcher.group_add(events.group_name(9), channel)
        failed = await asyncio.to_thread(publisher.send_all, {7: 12, 8: 3, 9: 1})
        got = await _received(watcher, channel, 1.0)
        await watcher.flush()
        return failed, got

    failed, got = asyncio.run(scenario())
    assert failed == {}
    # Run 8 has no watcher here: its announcement reaches nobody, and is no failure.
    assert sorted(got, key=lambda m: m["seq"]) == [{"type": "run.event", "seq": 1},
                                                    {"type": "run.event", "seq": 12}]


@pytest.mark.integration
def test_the_same_message_as_group_send_on_the_same_channel(redis_server):
    """Byte for byte what the layer's own ``group_send`` publishes, seen by a plain Redis
    subscriber of every channel."""
    import redis

    client = redis.Redis.from_url(_url())
    sub = client.pubsub()
    sub.psubscribe("*")
    assert sub.get_message(timeout=2)["type"] == "psubscribe"
    layer = RedisPubSubChannelLayer(hosts=[_url()])

    async def via_group_send():
        await layer.group_send(*events._message(41, 5))
        await layer.flush()

    asyncio.run(via_group_send())
    publisher = events._Publisher.for_layer(RedisPubSubChannelLayer(hosts=[_url()]))
    assert publisher is not None and publisher.send_all({41: 5}) == {}
    seen = []
    deadline = time.monotonic() + 5
    while len(seen) < 2 and time.monotonic() < deadline:
        message = sub.get_message(timeout=0.5)
        if message and message["type"] == "pmessage":
            seen.append((message["channel"], message["data"]))
    sub.close()
    client.close()
    assert len(seen) == 2 and seen[0] == seen[1], seen


def test_redis_away_fails_the_whole_batch_at_once_and_says_so(caplog):
    publisher = events._Publisher.for_layer(
        RedisPubSubChannelLayer(hosts=[f"redis://127.0.0.1:{free_port()}/0"]))
    assert publisher is not None
    events._warned.clear()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="quorum.events"):
        failed = publisher.send_all({3: 4, 5: 6})
    assert time.monotonic() - started < 2  # refused, not waited out
    assert failed == {3: 4, 5: 6}
    assert "could not announce event" in caplog.text


@pytest.mark.integration
def test_after_redis_restarts_the_next_batch_goes_out_on_a_new_connection(tmp_path):
    """The pooled connection is closed once Redis has restarted; the batch after the
    restart is not lost to it."""
    import redis

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = start_redis(tmp_path, port)
    try:
        publisher = events._Publisher.for_layer(RedisPubSubChannelLayer(hosts=[url]))
        assert publisher is not None and publisher.send_all({1: 1}) == {}
        server.stop()
        server = start_redis(tmp_path, port)
        sub = redis.Redis.from_url(url).pubsub()
        sub.subscribe("asgi__group__run-1")
        assert sub.get_message(timeout=2)["type"] == "subscribe"
        assert publisher.send_all({1: 2}) == {}
        message = sub.get_message(timeout=2)
        sub.close()
        assert message is not None and message["type"] == "message"
    finally:
        server.stop()


def test_layers_and_hosts_it_does_not_handle_are_left_to_group_send():
    assert events._Publisher.for_layer(InMemoryChannelLayer()) is None
    assert events._Publisher.for_layer(None) is None
    # A host with options of its own (here: sentinels) is the layer's own business.
    sentinel = {"sentinels": [("127.0.0.1", 26379)], "master_name": "main"}
    assert events._Publisher.for_layer(RedisPubSubChannelLayer(hosts=[sentinel])) is None
    options = {"address": "redis://127.0.0.1:6379/0", "ssl_cert_reqs": None}
    assert events._Publisher.for_layer(RedisPubSubChannelLayer(hosts=[options])) is None


def test_a_layer_unlike_the_pinned_one_is_left_to_group_send(monkeypatch, caplog):
    """Should an upgrade of channels_redis rename what the publisher reads, it is found
    when the publisher is made, not at the first send (which would stop the announcer)."""
    from channels_redis.pubsub import RedisPubSubLoopLayer

    monkeypatch.delattr(RedisPubSubLoopLayer, "_get_group_channel_name")
    with caplog.at_level(logging.WARNING, logger="quorum.events"):
        assert events._Publisher.for_layer(RedisPubSubChannelLayer(hosts=[_url()])) is None
    assert "announcing through group_send" in caplog.text


def test_the_announcer_gathers_runs_committing_within_its_window_into_one_batch(monkeypatch):
    batches: list[dict[int, int]] = []
    sent = threading.Event()

    class Recorder:
        def send_all(self, batch):
            batches.append(dict(batch))
            sent.set()
            return {}

    monkeypatch.setattr(events._Publisher, "for_layer", classmethod(lambda cls, layer: Recorder()))
    announcer = events._Announcer()
    announcer.GATHER = 0.3
    announcer.announce(1, 2)
    time.sleep(0.05)  # the thread is awake and gathering
    announcer.announce(2, 5)
    announcer.announce(1, 3)  # the same run again: only its newest number is sent
    assert sent.wait(5)
    announcer.flush(5)
    assert batches == [{1: 3, 2: 5}]
