"""Every page, export and WebSocket of a team's run, review, change, experiment and
connection, for the five people issue 35 names: its owner, a member of its team, an approver
of its team, a member of another team, and anonymous. Members see; approvers (and the owner
while a member) act; another team's member gets the same 404 as a stranger, and changes
nothing; a member removed from the team loses it at once, an open page included."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from agents_app.models import Experiment, Run
from agents_app.teams import services
from agents_app.teams.models import Membership, Team
from reviews_app.models import Connection
from tests.conftest import PASSWORD
from tests.test_access_matrix import CASES, runs, snapshot, url_for  # noqa: F401
from tests.test_change_views import repo  # noqa: F401 - its repository

pytestmark = pytest.mark.django_db(transaction=True)

# The kinds of object that may belong to a team (runs of every kind and what hangs off them).
SHARED = {"plan", "react", "vote", "change", "review", "experiment", "connection", "teamgate"}
BODY = {"seq": 0, "action": "approve", "verdict": "approve", "decision": "accept"}


@pytest.fixture
def shared(runs, django_user_model):  # noqa: F811
    """Every run, experiment and connection of Alice's made Platform's (Alice its admin,
    Carol a member); Frank an approver of it; Dave a member of Guild only."""
    platform = Team.objects.get(name="Platform")
    guild = Team.objects.get(name="Guild")
    Run.objects.all().update(team=platform)
    Experiment.objects.all().update(team=platform)
    Connection.objects.all().update(team=platform)
    frank = django_user_model.objects.create_user("frank", password=PASSWORD)
    Membership.objects.create(team=platform, user=frank, role="approver")
    dave = django_user_model.objects.get(username="dave")
    Membership.objects.create(team=guild, user=dave, role="member")
    for run in runs.values():
        run.refresh_from_db()
    return runs


def shared_cases():
    return sorted(n for n, c in CASES.items() if c[0] in SHARED)


def test_a_member_of_the_team_sees_every_page_and_export(shared):
    carol = Client()
    carol.force_login(Run.objects.first().team.memberships.get(user__username="carol").user)
    for name in shared_cases():
        url, method, _ = url_for(name, shared)
        if method != "GET":
            continue
        response = carol.get(url)
        assert response.status_code in (200, 302), (name, response.status_code)
        if response.status_code == 302:
            assert not response.url.startswith("/accounts/login/"), name


def test_a_plain_member_may_not_act_and_changes_nothing(shared):
    carol = Client()
    carol.force_login(Membership.objects.get(user__username="carol", team__name="Platform").user)
    before = snapshot()
    for name in shared_cases():
        url, method, _ = url_for(name, shared)
        if method == "POST":
            response = carol.post(url, BODY)
            assert response.status_code == 403, (name, response.status_code)
    assert snapshot() == before


def test_another_teams_member_gets_404_for_everything(shared):
    dave = Client()
    dave.force_login(Membership.objects.get(user__username="dave").user)
    before = snapshot()
    for name in shared_cases():
        url, method, _ = url_for(name, shared)
        response = dave.get(url) if method == "GET" else dave.post(url, BODY)
        assert response.status_code == 404, (name, response.status_code)
    assert snapshot() == before
    # Nor is any of it in his lists.
    for page in ("/", "/changes/", "/reviews/", "/experiments/", "/inbox/",
                 "/reviews/connections/"):
        text = dave.get(page).content.decode()
        for run in shared.values():
            assert f"/runs/{run.pk}/" not in text and f"/reviews/{run.pk}/" not in text, page


def test_an_approver_may_act(shared):
    frank = Client()
    frank.force_login(Membership.objects.get(user__username="frank").user)
    url, _, _ = url_for("plan_decision", shared)
    response = frank.post(url, BODY)
    assert response.status_code not in (403, 404), response.status_code
    url, _, _ = url_for("cancel_run", shared)
    assert frank.post(url).status_code in (200, 302)


def test_anonymous_is_sent_to_sign_in(client, shared):
    for name in shared_cases():
        url, method, _ = url_for(name, shared)
        response = client.get(url) if method == "GET" else client.post(url, BODY)
        assert response.status_code == 302 and response.url.startswith("/accounts/login/"), name


def test_a_member_removed_from_the_team_loses_every_page_at_once(shared):
    carol_user = Membership.objects.get(user__username="carol", team__name="Platform").user
    carol = Client()
    carol.force_login(carol_user)
    url, _, _ = url_for("run_detail", shared)
    assert carol.get(url).status_code == 200
    services.remove_member(Team.objects.get(name="Platform"), carol_user)
    assert carol.get(url).status_code == 404
    # Even the runs she started while a member.
    Run.objects.filter(pk=shared["plan"].pk).update(owner=carol_user)
    assert carol.get(url).status_code == 404


@pytest.mark.asyncio
async def test_an_open_run_page_is_closed_when_its_watcher_leaves_the_team(shared, settings):
    from tests.test_security_websocket import connect, session_cookie

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    carol_user = await sync_to_async(lambda: Membership.objects.get(
        user__username="carol", team__name="Platform").user)()
    cookie = await sync_to_async(session_cookie)(carol_user)
    communicator, connected, _ = await connect(shared["plan"].pk, cookie=cookie)
    assert connected
    team = await sync_to_async(Team.objects.get)(name="Platform")
    await sync_to_async(services.remove_member)(team, carol_user)
    closed = await communicator.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4403}
    # A personal run's page is not subscribed to membership changes at all.
    await communicator.disconnect()
