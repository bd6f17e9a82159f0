"""The run pages' WebSocket in the access matrix, through the application Daphne serves
(config.asgi: origin check, then the session cookie, then the consumer): anonymous → closed,
another user → closed, the owner → accepted, for every kind of run; a foreign Origin, or no
Origin, is refused before anything else, even with the owner's cookie."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client

from config.asgi import application
from tests.test_access_matrix import runs  # noqa: F401 - one run of each kind
from tests.test_change_views import repo  # noqa: F401 - its repository

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

SITE = b"http://127.0.0.1:8000"


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


async def connect(run_id: int, *, cookie: str | None = None, origin: bytes | None = SITE):
    headers = [(b"host", b"127.0.0.1:8000")]
    if origin is not None:
        headers.append((b"origin", origin))
    if cookie is not None:
        headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


async def test_anonymous_and_other_users_are_closed_the_owner_is_accepted(alice, bob, runs):  # noqa: F811
    alice_cookie = await sync_to_async(session_cookie)(alice)
    bob_cookie = await sync_to_async(session_cookie)(bob)
    for kind, run in runs.items():
        _, connected, code = await connect(run.pk)
        assert not connected and code == 4401, (kind, code)
        _, connected, _ = await connect(run.pk, cookie="not-a-session-key")
        assert not connected, kind
        _, connected, code = await connect(run.pk, cookie=bob_cookie)
        assert not connected and code == 4404, (kind, code)
        communicator, connected, _ = await connect(run.pk, cookie=alice_cookie)
        assert connected, kind
        await communicator.send_to(text_data=json.dumps({"after": 0}))
        html = await communicator.receive_from(timeout=10)
        assert 'data-seq="1"' in html, kind
        await communicator.disconnect()
    # A run that does not exist is closed like another user's.
    _, connected, code = await connect(999_999, cookie=alice_cookie)
    assert not connected and code == 4404


async def test_a_foreign_or_missing_origin_is_refused_even_for_the_owner(alice, runs):  # noqa: F811
    cookie = await sync_to_async(session_cookie)(alice)
    run = runs["plan"]
    for origin in (b"https://evil.example", b"http://127.0.0.1.evil.example", b"null", None):
        communicator, connected, _ = await connect(run.pk, cookie=cookie, origin=origin)
        assert not connected, origin
    for origin in (b"http://127.0.0.1:8000", b"https://localhost"):
        communicator, connected, _ = await connect(run.pk, cookie=cookie, origin=origin)
        assert connected, origin
        await communicator.disconnect()
