"""The inbox's WebSocket (issue 35): a gate's card reaches the open inboxes of the people it
concerns as it opens, in the variant for each (may decide, may only see, started it), changes
when its approvals do and leaves when it is decided; another team's inbox hears nothing; a
page's filters hold; a member removed from the team stops hearing the team at once."""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from agents_app import engine
from agents_app.notify import deliver
from agents_app.patterns.base import Decision
from agents_app.teams import services
from agents_app.teams.models import Membership, Team
from config.asgi import application
from tests.conftest import OFFLINE, PASSWORD
from tests.test_security_websocket import SITE, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


@pytest.fixture(autouse=True)
def memory_layer(settings, monkeypatch):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setattr(deliver, "send", lambda ids: None)


@pytest.fixture
def people(django_user_model):
    make = django_user_model.objects.create_user
    users = {n: make(n, password=PASSWORD) for n in ("alice", "bob", "dave", "erin")}
    platform, other = Team.objects.create(name="Platform"), Team.objects.create(name="Other")
    for name, team, role in (("alice", platform, "approver"), ("bob", platform, "approver"),
                             ("dave", platform, "member"), ("erin", other, "approver")):
        Membership.objects.create(team=team, user=users[name], role=role)
    users["platform"] = platform
    return users


async def inbox(user, query: str = ""):
    cookie = await sync_to_async(session_cookie)(user)
    from django.conf import settings

    comm = WebsocketCommunicator(application, "/ws/inbox/" + (f"?{query}" if query else ""),
                                 headers=[(b"host", b"127.0.0.1:8000"), (b"origin", SITE),
                                          (b"cookie", f"{settings.SESSION_COOKIE_NAME}="
                                                      f"{cookie}".encode())])
    connected, _ = await comm.connect()
    assert connected
    return comm


def start(owner, team, pattern="plan_execute"):
    run = engine.create_run(owner, pattern, "Collect logs, then find the error.", options={},
                            models=OFFLINE, max_cost_usd=Decimal("1"), max_tokens=10_000,
                            enqueue=False, team=team)
    return engine.run_inline(run.pk)


async def test_anonymous_is_closed():
    comm = WebsocketCommunicator(application, "/ws/inbox/",
                                 headers=[(b"host", b"127.0.0.1:8000"), (b"origin", SITE)])
    connected, code = await comm.connect()
    assert not connected and code == 4401


async def test_a_gate_reaches_the_teams_inboxes_in_the_right_variant_and_leaves_when_decided(
        people):
    bob = await inbox(people["bob"])
    dave_all = await inbox(people["dave"], "scope=all")
    dave = await inbox(people["dave"])
    erin = await inbox(people["erin"], "scope=all")
    filtered = await inbox(people["bob"], "pattern=debate")
    run = await sync_to_async(start)(people["alice"], people["platform"])
    got = await bob.receive_from(timeout=5)
    assert f'id="gate-{run.pk}"' in got and 'id="inbox-arrivals" hx-swap-oob="beforeend"' in got
    assert 'name="picks"' in got and 'value="approve"' in got  # Bob may decide it
    seen = await dave_all.receive_from(timeout=5)
    assert f'id="gate-{run.pk}"' in seen and 'name="picks"' not in seen
    assert "For the approvers of team Platform" in seen
    assert f'data-gone="gate-{run.pk}"' in await dave.receive_from(timeout=5)  # not his
    assert await erin.receive_nothing(timeout=0.3)
    assert await filtered.receive_nothing(timeout=0.3)

    def decide():
        run.refresh_from_db()
        engine.decide(run, people["bob"], run.stage_seq, Decision(action="approve",
                                                                  author="bob"), enqueue=False)
    await sync_to_async(decide)()
    assert f'data-gone="gate-{run.pk}"' in await bob.receive_from(timeout=5)
    for comm in (bob, dave_all, dave, erin, filtered):
        await comm.disconnect()


async def test_a_member_removed_from_the_team_hears_no_more_of_it(people):
    dave = await inbox(people["dave"], "scope=all")
    await sync_to_async(services.remove_member)(people["platform"], people["dave"])
    reload = await dave.receive_from(timeout=5)
    assert 'id="inbox-list"' in reload and 'hx-trigger="load"' in reload
    await sync_to_async(start)(people["alice"], people["platform"])
    assert await dave.receive_nothing(timeout=0.5)
    await dave.disconnect()


async def test_a_page_with_an_age_filter_reloads_its_list_instead(people):
    bob = await inbox(people["bob"], "older_than=1")
    await sync_to_async(start)(people["alice"], people["platform"])
    got = await bob.receive_from(timeout=5)
    assert 'hx-get="/inbox/?older_than=1&amp;part=list"' in got
    await bob.disconnect()
