"""The kombu patch in ``agents_app/tasks.py`` is still needed, and still does its job, on the
installed kombu. No Redis: nothing listens on the broker's port, and the one command kombu
sends when it makes a channel (PING) is answered here.

When kombu is upgraded, ``test_the_patch_is_applied_on_this_kombu`` fails: add the new
version to ``KOMBU_LOSES_CONNINFO`` and run these tests again. If
``test_unpatched_kombu_still_loses_the_connection_info`` then fails, kombu no longer loses the
connection info: remove the patch (and this file)."""

from unittest import mock

import kombu
import pytest
import redis
from kombu import Connection
from kombu.transport import redis as kombu_redis

from agents_app import tasks

NOWHERE = "redis://127.0.0.1:1/0"  # port 1: connecting is refused at once


def collected_channel():
    """A worker's channel after Redis went away: one message not yet acknowledged (a stage
    running, ``acks_late``), then the connection collected as Celery's consumer does on a
    connection error. The channel keeps its transport; the transport lost its client."""
    conn = Connection(NOWHERE)
    with mock.patch.object(redis.Redis, "ping", return_value=True):
        channel = conn.default_channel
    channel.qos._delivered["running-stage"] = object()
    conn.collect(socket_timeout=0.1)
    assert channel.connection is not None and channel.connection.client is None
    return channel


def unpatched():
    current = kombu_redis.Channel._connparams
    return mock.patch.object(kombu_redis.Channel, "_connparams",
                             getattr(current, "__wrapped__", current))


def test_unpatched_kombu_still_loses_the_connection_info():
    with unpatched():
        channel = collected_channel()
        with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'hostname'"):
            channel._connparams()
        # What closing the channel does: its pools go, then the unacknowledged messages are
        # put back through a new client. The AttributeError is not a connection error, so
        # Celery treats it as unrecoverable and the worker stops.
        channel._disconnect_pools()
        with pytest.raises(AttributeError, match="hostname"):
            channel.qos.restore_unacked()


def test_the_patch_is_applied_on_this_kombu():
    assert kombu.__version__ in tasks.KOMBU_LOSES_CONNINFO, (
        f"kombu is now {kombu.__version__}: add it to tasks.KOMBU_LOSES_CONNINFO and run "
        "test_unpatched_kombu_still_loses_the_connection_info; if that fails, remove the patch")
    assert getattr(kombu_redis.Channel._connparams, "quorum_patched", False)


def test_with_the_patch_the_channel_fails_as_a_connection_error():
    channel = collected_channel()
    params = channel._connparams()
    assert (params["host"], params["port"]) == ("127.0.0.1", 1)
    channel._disconnect_pools()
    with pytest.raises(redis.ConnectionError):  # Redis is down: recoverable, Celery goes on
        channel.qos.restore_unacked()
    with pytest.raises(redis.ConnectionError):  # a stage's acknowledgement, likewise
        channel.qos.ack("running-stage")
