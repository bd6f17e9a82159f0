"""The run pages' WebSocket in the access matrix, through the application Daphne serves
(config.asgi: origin check, then the session cookie, then the consumer): anonymous → closed,
another user → closed, the owner → accepted, for every kind of run; a foreign Origin, or no
Origin, is refused before anything else, even with the owner's cookie: the origin is the
site's own (scheme, host and port) or one of CSRF_TRUSTED_ORIGINS. Paths with ids no run can
have close cleanly, and a cursor message the page could not have sent is ignored."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client

from agents_app.consumers import parse_cursor
from config.asgi import application
from config.origin import CLOSE_FOREIGN_ORIGIN
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


async def connect(run_id: int, *, cookie: str | None = None, origin: bytes | None = SITE,
                  host: bytes = b"127.0.0.1:8000", scheme: str = "ws", extra=()):
    headers = [(b"host", host), *extra]
    if origin is not None:
        headers.append((b"origin", origin))
    if cookie is not None:
        headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)
    communicator.scope["scheme"] = scheme
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
    # Another port of the same host shares the session cookie: that is the hole this closes.
    for origin in (b"http://127.0.0.1:8001", b"http://127.0.0.1", b"https://127.0.0.1:8000",
                   b"http://localhost:8000", b"https://evil.example",
                   b"http://127.0.0.1.evil.example:8000", b"http://evil.example@127.0.0.1:8000",
                   b"http://127.0.0.1:8000/path", b"ws://127.0.0.1:8000", b"http://[::1", b"null", b"",
                   None):
        communicator, connected, code = await connect(run.pk, cookie=cookie, origin=origin)
        assert not connected and code == CLOSE_FOREIGN_ORIGIN, origin
    for origin in (b"http://127.0.0.1:8000", b"HTTP://127.0.0.1:8000", b"http://127.0.0.1:8000/"):
        communicator, connected, _ = await connect(run.pk, cookie=cookie, origin=origin)
        assert connected, origin
        await communicator.disconnect()


async def test_trusted_origins_count_with_their_scheme_and_port(alice, runs, settings):  # noqa: F811
    settings.CSRF_TRUSTED_ORIGINS = ["https://quorum.example.com", "https://*.corp.example:8443"]
    cookie = await sync_to_async(session_cookie)(alice)
    run = runs["plan"]
    for origin in (b"https://quorum.example.com", b"https://quorum.example.com:443",
                   b"https://corp.example:8443", b"https://a.b.corp.example:8443"):
        communicator, connected, _ = await connect(run.pk, cookie=cookie, origin=origin)
        assert connected, origin
        await communicator.disconnect()
    for origin in (b"http://quorum.example.com", b"https://quorum.example.com:8443",
                   b"https://corp.example", b"https://xcorp.example:8443"):
        _, connected, code = await connect(run.pk, cookie=cookie, origin=origin)
        assert not connected and code == CLOSE_FOREIGN_ORIGIN, origin


async def test_the_site_origin_follows_the_host_the_scheme_and_the_proxy(alice, runs, settings):  # noqa: F811
    cookie = await sync_to_async(session_cookie)(alice)
    run = runs["plan"]
    cases = [  # (host, scope scheme, extra headers, origin, accepted)
        (b"localhost", "ws", [], b"http://localhost", True),
        (b"localhost:80", "ws", [], b"http://localhost", True),
        (b"localhost", "wss", [], b"https://localhost", True),
        (b"localhost", "wss", [], b"http://localhost", False),
        (b"localhost", "ws", [], b"https://localhost", False),
        (b"evil.example", "ws", [], b"http://evil.example", False),  # Host not allowed
        # Without SECURE_PROXY_SSL_HEADER a forwarded scheme is not believed.
        (b"localhost", "ws", [(b"x-forwarded-proto", b"https")], b"https://localhost", False),
    ]
    for host, scheme, extra, origin, accepted in cases:
        _, connected, _ = await connect(run.pk, cookie=cookie, origin=origin, host=host,
                                        scheme=scheme, extra=extra)
        assert connected is accepted, (host, scheme, extra, origin)
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    for proto, origin, accepted in ((b"https", b"https://localhost", True),
                                    (b"https", b"http://localhost", False),
                                    (b"http", b"https://localhost", False)):
        _, connected, _ = await connect(run.pk, cookie=cookie, origin=origin, host=b"localhost",
                                        extra=[(b"x-forwarded-proto", proto)])
        assert connected is accepted, (proto, origin)


async def test_ids_that_no_run_can_have_close_cleanly(alice, runs):  # noqa: F811
    cookie = await sync_to_async(session_cookie)(alice)
    for path in ("/ws/runs/99999999999999999999/", "/ws/runs/9223372036854775808/",
                 "/ws/runs/-1/", "/ws/runs/0/", "/ws/runs/abc/", "/ws/nothing/"):
        communicator = WebsocketCommunicator(application, path, headers=[
            (b"host", b"127.0.0.1:8000"), (b"origin", SITE),
            (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode())])
        connected, code = await communicator.connect()
        assert not connected and code == 4404, (path, code)


async def test_a_cursor_the_page_could_not_have_sent_is_ignored(alice, runs):  # noqa: F811
    cookie = await sync_to_async(session_cookie)(alice)
    communicator, connected, _ = await connect(runs["plan"].pk, cookie=cookie)
    assert connected
    for junk in ("[" * 3000 + "]" * 3000, '{"after": 1e400}', '{"after": NaN}',
                 '{"after": 99999999999999999999999}', "[1]", "not json"):
        await communicator.send_to(text_data=junk)
    # A huge cursor is clamped (nothing after it); the connection still serves the page.
    await communicator.send_to(text_data=json.dumps({"after": 0}))
    html = await communicator.receive_from(timeout=10)
    assert 'data-seq="1"' in html
    await communicator.disconnect()


async def test_the_cursor_parser_refuses_junk_and_clamps():
    assert parse_cursor('{"after": 5}') == 5
    assert parse_cursor('{"after": -3}') == 0
    assert parse_cursor('{"after": 99999999999999999999999}') == 2**63 - 1
    for junk in ("[" * 3000 + "]" * 3000, '{"after": 1e400}', '{"after": NaN}', "[1]", "x"):
        assert parse_cursor(junk) is None, junk[:20]
