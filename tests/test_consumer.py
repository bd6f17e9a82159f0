"""The run page's WebSocket: refused for anonymous users and other users; sends every
event after the one the page has, in order, once; follows new events live."""

import json

import pytest
from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from agents_app import engine
from agents_app.events import append_events
from agents_app.patterns.base import Event as EventSpec
from agents_app.routing import websocket_urlpatterns
from tests.conftest import OFFLINE

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

application = URLRouter(websocket_urlpatterns)


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def communicator(run_id, user):
    c = WebsocketCommunicator(application, f"/ws/runs/{run_id}/")
    c.scope["user"] = user
    return c


@sync_to_async
def make_run(owner):
    run = engine.create_run(owner, "plan_execute", "Collect logs, then find the error.",
                            options={}, models=OFFLINE, enqueue=False)
    return engine.run_inline(run.pk)


def seqs_in(html):
    import re
    return [int(s) for s in re.findall(r'data-seq="(\d+)"', html)]


async def test_anonymous_is_refused(alice):
    run = await make_run(alice)
    c = communicator(run.pk, AnonymousUser())
    connected, code = await c.connect()
    assert not connected


async def test_another_user_is_refused(alice, bob):
    run = await make_run(alice)
    c = communicator(run.pk, bob)
    connected, _ = await c.connect()
    assert not connected


async def test_owner_gets_events_after_the_cursor_in_order_then_live(alice):
    run = await make_run(alice)
    c = communicator(run.pk, alice)
    connected, _ = await c.connect()
    assert connected
    await c.send_to(text_data=json.dumps({"after": 2}))
    first = await c.receive_from()
    total = run.last_event_seq
    assert seqs_in(first) == list(range(3, total + 1))
    assert 'id="run-header"' in first and 'hx-swap-oob="true"' in first
    # Live: new events written (and announced) after connecting arrive once, in order.
    await sync_to_async(append_events)(run.pk, [EventSpec("note", "one"), EventSpec("note", "two")])
    from agents_app.events import broadcast
    await sync_to_async(broadcast)(run.pk, total + 2)
    live = await c.receive_from()
    assert seqs_in(live) == [total + 1, total + 2]
    # A repeated announcement sends nothing new.
    await sync_to_async(broadcast)(run.pk, total + 2)
    assert await c.receive_nothing(timeout=0.3)
    await c.disconnect()


async def test_reconnect_with_the_latest_cursor_receives_nothing_again(alice):
    run = await make_run(alice)
    c = communicator(run.pk, alice)
    await c.connect()
    await c.send_to(text_data=json.dumps({"after": run.last_event_seq}))
    assert await c.receive_nothing(timeout=0.3)
    await c.disconnect()


async def test_garbage_hello_is_ignored(alice):
    run = await make_run(alice)
    c = communicator(run.pk, alice)
    await c.connect()
    await c.send_to(text_data="not json")
    assert await c.receive_nothing(timeout=0.3)
    await c.disconnect()


async def test_full_asgi_stack_with_session_auth(alice, client):
    """Through AuthMiddlewareStack, a signed-in session cookie is what grants access."""
    run = await make_run(alice)
    await sync_to_async(client.force_login)(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
    c = WebsocketCommunicator(app, f"/ws/runs/{run.pk}/", headers=[(b"cookie", cookie.encode())])
    connected, _ = await c.connect()
    assert connected
    await c.disconnect()
    anon = WebsocketCommunicator(app, f"/ws/runs/{run.pk}/")
    connected, _ = await anon.connect()
    assert not connected


async def test_a_message_sends_only_the_events_the_run_row_already_counts(alice):
    """The header and panels render from the run row; events the row does not count yet (a
    transaction that has not committed its run update, in production) wait for the next
    message, so a message never pairs a newer status with panels picked for older events."""
    from agents_app.models import Event

    run = await make_run(alice)
    total = run.last_event_seq
    await sync_to_async(Event.objects.create)(run=run, seq=total + 1, kind="verified",
                                              message="not counted by the run yet")
    c = communicator(run.pk, alice)
    await c.connect()
    await c.send_to(text_data=json.dumps({"after": total - 1}))
    first = await c.receive_from()
    assert seqs_in(first) == [total]
    await c.disconnect()


async def _messages_until(c, last_seq):
    """Every message until one carries ``last_seq``; their event numbers, in arrival order."""
    seen = []
    while not seen or seen[-1] < last_seq:
        seen += seqs_in(await c.receive_from(timeout=5))
    return seen


async def test_watchers_of_a_run_share_one_subscription_each_event_reaches_each_once(alice):
    """One subscription per run in the process (agents_app.consumers.RunHub) serves every
    watcher: watchers at different cursors each get their own events once, in order; one
    leaving does not disturb the others; the subscription goes with the last watcher."""
    import asyncio

    from agents_app.consumers import _HUBS

    run = await make_run(alice)
    total = run.last_event_seq
    watchers = [communicator(run.pk, alice) for _ in range(3)]
    for c, after in zip(watchers, (total, total, 2), strict=True):
        assert (await c.connect())[0]
        await c.send_to(text_data=json.dumps({"after": after}))
    assert await _messages_until(watchers[2], total) == list(range(3, total + 1))
    hubs = _HUBS[asyncio.get_running_loop()]
    assert list(hubs) == [run.pk] and len(hubs[run.pk].watchers) == 3

    await sync_to_async(append_events)(run.pk, [EventSpec("note", "one"), EventSpec("note", "two")])
    for c in watchers:
        assert await _messages_until(c, total + 2) == [total + 1, total + 2]
    await watchers[0].disconnect()
    await sync_to_async(append_events)(run.pk, [EventSpec("note", "three")])
    for c in watchers[1:]:
        assert await _messages_until(c, total + 3) == [total + 3]
        assert await c.receive_nothing(timeout=0.2)
    for c in watchers[1:]:
        await c.disconnect()
    assert run.pk not in hubs


async def test_events_written_while_a_page_catches_up_arrive_once_in_order(alice, monkeypatch):
    """An announcement that arrives while a watcher is still sending its catch-up is noted and
    sent after it, from its cursor: nothing lost, nothing twice."""
    import asyncio

    from agents_app.consumers import RunConsumer

    run = await make_run(alice)
    total = run.last_event_seq
    real_send = RunConsumer.send_message
    written = []

    async def send_then_write(self, html):
        await real_send(self, html)
        if not written:  # during the first send (the catch-up holds the watcher's lock)
            written.append(True)
            await sync_to_async(append_events)(run.pk, [EventSpec("note", "meanwhile")])
            await asyncio.sleep(0.2)  # the announcement reaches the hub meanwhile

    monkeypatch.setattr(RunConsumer, "send_message", send_then_write)
    c = communicator(run.pk, alice)
    await c.connect()
    await c.send_to(text_data=json.dumps({"after": 0}))
    assert await _messages_until(c, total + 1) == list(range(1, total + 2))
    assert await c.receive_nothing(timeout=0.3)
    await c.disconnect()


async def test_a_failed_read_on_the_live_thread_is_tried_once_more_on_a_new_connection():
    from django.db import OperationalError

    from agents_app.consumers import on_live_thread

    calls = []

    @on_live_thread
    def read(x):
        calls.append(x)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return x * 2

    assert await read(21) == 42
    assert calls == [21, 21]

    @on_live_thread
    def broken():
        raise OperationalError("no such table")

    with pytest.raises(OperationalError):
        await broken()
