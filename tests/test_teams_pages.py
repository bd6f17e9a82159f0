"""The team pages and the ``team`` command (issue 35): who may see and change what, the
last-admin rule, bad input on every form and flag, and ``membership_changed`` — the message
each membership change sends, after its transaction commits, to the person's pages."""

from __future__ import annotations

import asyncio
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.test import Client
from django.urls import reverse

from agents_app.gates.models import GateRule
from agents_app.teams import services
from agents_app.teams.models import Membership, Role, Team
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

HUGE = "x" * 10_000


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", password=PASSWORD)


@pytest.fixture
def dave(django_user_model):
    return django_user_model.objects.create_user("dave", password=PASSWORD)


@pytest.fixture
def team(alice, bob, carol):
    """Platform: Alice its admin, Bob an approver, Carol a member (Dave is in none)."""
    team = Team.objects.create(name="Platform", created_by=alice)
    for user, role in ((alice, Role.ADMIN), (bob, Role.APPROVER), (carol, Role.MEMBER)):
        Membership.objects.create(team=team, user=user, role=role)
    return team


@pytest.fixture
def security(dave):
    team = Team.objects.create(name="Security", created_by=dave)
    Membership.objects.create(team=team, user=dave, role=Role.ADMIN)
    return team


@pytest.fixture
def rule(team):
    return GateRule.objects.create(team=team, name="Merges", gate="merge_request",
                                   required_approvals=1)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def role_of(team, user):
    return Membership.objects.filter(team=team, user=user).values_list("role", flat=True).first()


class Listener:
    """A channel in the group ``user-<id>`` of the in-memory layer."""

    def __init__(self, user):
        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        async_to_sync(self.layer.group_add)(f"user-{user.pk}", self.channel)

    def messages(self) -> list[dict]:
        async def drain():
            out = []
            while True:
                try:
                    out.append(await asyncio.wait_for(self.layer.receive(self.channel), 0.05))
                except TimeoutError:
                    return out
        return async_to_sync(drain)()


# --- who may do what --------------------------------------------------------------------
# Admin-only POSTs: URL args after the team, and a body that would act.
ADMIN_POSTS = {
    "team_member_add": (lambda t, r, u: (), {"username": "dave", "role": "member"}),
    "team_member_role": (lambda t, r, u: (u["carol"].pk,), {"role": "admin"}),
    "team_member_remove": (lambda t, r, u: (u["carol"].pk,), {}),
    "team_rule_new": (lambda t, r, u: (), {"name": "New", "required_approvals": 1,
                                           "rejections_to_reject": 1}),
    "team_rule_edit": (lambda t, r, u: (r.pk,), {"name": "Renamed", "required_approvals": 1,
                                                  "rejections_to_reject": 1}),
    "team_rule_delete": (lambda t, r, u: (r.pk,), {}),
    "team_rule_move": (lambda t, r, u: (r.pk,), {"direction": "down"}),
    "team_delete": (lambda t, r, u: (), {"confirm": "Platform"}),
}


def state(team):
    return (sorted(Membership.objects.filter(team=team).values_list("user__username", "role")),
            list(GateRule.objects.filter(team=team).values_list("pk", "name", "position")))


@pytest.fixture
def people(alice, bob, carol, dave):
    return {"alice": alice, "bob": bob, "carol": carol, "dave": dave}


@pytest.mark.parametrize("name", sorted(ADMIN_POSTS))
def test_admin_posts_other_roles_and_strangers_change_nothing(name, team, rule, people):
    args, body = ADMIN_POSTS[name]
    GateRule.objects.create(team=team, name="Plans", gate="plan_approval", position=1)
    url = reverse(name, args=[team.pk, *args(team, rule, people)])
    before = state(team)
    anonymous = Client().post(url, body)
    assert anonymous.status_code == 302 and anonymous.url.startswith("/accounts/login/")
    stranger = signed_in(people["dave"]).post(url, body)
    assert stranger.status_code == 404  # the team's existence does not leak
    for who in ("bob", "carol"):  # an approver and a member: told why
        response = signed_in(people[who]).post(url, body)
        assert response.status_code == 403, who
        text = response.content.decode()
        assert "Only admins may" in text and "Ask alice." in text
    assert state(team) == before
    response = signed_in(people["alice"]).post(url, body)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert state(team) != before


@pytest.mark.parametrize("name", ["team", "team_rule_new", "team_rule_edit"])
def test_pages_by_role(name, team, rule, people):
    args = [team.pk] + ([rule.pk] if name == "team_rule_edit" else [])
    url = reverse(name, args=args)
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and anonymous.url.startswith("/accounts/login/")
    assert signed_in(people["dave"]).get(url).status_code == 404
    assert signed_in(people["alice"]).get(url).status_code == 200
    for who in ("bob", "carol"):
        expected = 200 if name == "team" else 403
        assert signed_in(people[who]).get(url).status_code == expected, who


def test_the_team_page_shows_members_and_rules_to_every_member(team, rule, people):
    for who in ("alice", "bob", "carol"):
        html = signed_in(people[who]).get(reverse("team", args=[team.pk])).content.decode()
        assert "Platform" in html and "carol" in html and "approver" in html
        assert "Every pattern&#x27;s merge request gate: 1 approval" in html
        admin_forms = reverse("team_member_add", args=[team.pk]) in html
        assert admin_forms == (who == "alice")
        assert (reverse("team_rule_edit", args=[team.pk, rule.pk]) in html) == (who == "alice")
        assert reverse("team_leave", args=[team.pk]) in html


def test_unknown_and_huge_team_ids_are_404(alice_client):
    assert alice_client.get("/teams/999999/").status_code == 404
    assert alice_client.get("/teams/99999999999999999999999/").status_code == 404
    assert alice_client.post("/teams/999999/leave/").status_code == 404


def test_get_on_post_only_views_is_405(team, alice_client):
    for name in ("team_member_add", "team_leave"):
        assert alice_client.get(reverse(name, args=[team.pk])).status_code == 405
    assert alice_client.get(reverse("team_new")).status_code == 405
    assert alice_client.post(reverse("team_list")).status_code == 405


def test_list_shows_my_teams_with_my_role_and_the_nav_link(team, security, carol):
    client = signed_in(carol)
    response = client.get(reverse("team_list"))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'href="/teams/"' in html and ">Teams</a>" in html  # the nav link
    assert "Platform" in html and "role-member" in html
    assert "Security" not in html  # not hers
    assert Client().get(reverse("team_list")).status_code == 302


# --- creating a team --------------------------------------------------------------------
def test_create_a_team_the_creator_is_its_admin(alice_client, alice,
                                                django_capture_on_commit_callbacks):
    listener = Listener(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("team_new"), {"name": "  Data  "})
    team = Team.objects.get(name="Data")
    assert response.status_code == 302 and response.url == reverse("team", args=[team.pk])
    assert role_of(team, alice) == Role.ADMIN and team.created_by == alice
    assert listener.messages() == [{"type": "access.changed", "team": team.pk}]
    page = alice_client.get(response.url).content.decode()
    assert "Created the team Data; you are its admin." in page


@pytest.mark.parametrize("name,message", [
    ("", "Give the team a name."),
    ("   ", "Give the team a name."),
    ("platform", "A team named &#x27;Platform&#x27; exists already"),
    ("PLATFORM", "A team named &#x27;Platform&#x27; exists already"),
    ("Plat\x00form", "Null characters are not allowed."),
    ("Plat\u202eform", "invisible control characters (U+202E"),
    (HUGE, "at most 80 characters (it has 10000)"),
])
def test_create_a_team_bad_input(team, alice_client, name, message):
    before = Team.objects.count()
    response = alice_client.post(reverse("team_new"), {"name": name})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Team.objects.count() == before


def test_create_resubmitted_makes_one_team(alice_client):
    assert alice_client.post(reverse("team_new"), {"name": "Ops"}).status_code == 302
    again = alice_client.post(reverse("team_new"), {"name": "Ops"})
    assert again.status_code == 400 and "exists already" in again.content.decode()
    assert Team.objects.filter(name__iexact="ops").count() == 1


def test_create_with_htmx_answers_a_client_redirect(alice_client):
    response = alice_client.post(reverse("team_new"), {"name": "Ops"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("team", args=[Team.objects.get().pk])


# --- members ----------------------------------------------------------------------------
def test_add_a_member_with_a_role(team, dave, alice_client, django_capture_on_commit_callbacks):
    listener = Listener(dave)
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("team_member_add", args=[team.pk]),
                                     {"username": "dave", "role": "approver"})
    assert response.status_code == 302 and response.url.endswith("#members")
    assert role_of(team, dave) == Role.APPROVER
    assert Membership.objects.get(team=team, user=dave).added_by.username == "alice"
    assert listener.messages() == [{"type": "access.changed", "team": team.pk}]
    assert signed_in(dave).get(reverse("team", args=[team.pk])).status_code == 200


@pytest.mark.parametrize("body,message", [
    ({"username": "", "role": "member"}, "Give the username of the person to add."),
    ({"username": "nobody", "role": "member"}, "No user &#x27;nobody&#x27;"),
    ({"username": "bob", "role": "member"}, "bob is already a member of Platform (approver)"),
    ({"username": "BOB", "role": "member"}, "No user &#x27;BOB&#x27;"),
    ({"username": "da\x00ve", "role": "member"}, "Null characters are not allowed."),
    ({"username": HUGE, "role": "member"}, "at most 150 characters (it has 10000)"),
    ({"username": "dave", "role": "owner"}, "owner is not a role"),
    ({"username": "dave", "role": ""}, "Choose a role: member, approver, admin."),
    ({"username": "dave", "role": HUGE}, "is not a role"),
])
def test_add_a_member_bad_input(team, dave, alice_client, body, message):
    before = state(team)
    response = alice_client.post(reverse("team_member_add", args=[team.pk]), body)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert state(team) == before


def test_add_resubmitted_adds_once(team, dave, alice_client):
    url = reverse("team_member_add", args=[team.pk])
    assert alice_client.post(url, {"username": "dave", "role": "member"}).status_code == 302
    again = alice_client.post(url, {"username": "dave", "role": "member"})
    assert again.status_code == 400 and "already a member" in again.content.decode()
    assert Membership.objects.filter(team=team, user=dave).count() == 1


def test_change_a_role(team, carol, alice_client, django_capture_on_commit_callbacks):
    listener = Listener(carol)
    url = reverse("team_member_role", args=[team.pk, carol.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(url, {"role": "approver"})
    assert response.status_code == 302 and role_of(team, carol) == Role.APPROVER
    assert listener.messages() == [{"type": "access.changed", "team": team.pk}]
    with django_capture_on_commit_callbacks(execute=True):  # resubmitted: nothing changes
        assert alice_client.post(url, {"role": "approver"}).status_code == 302
    assert listener.messages() == []
    assert "carol was approver already." in alice_client.get(reverse(
        "team", args=[team.pk])).content.decode()


@pytest.mark.parametrize("role,message", [("", "Choose a role"), ("root", "root is not a role"),
                                           (HUGE, "is not a role"), ("ad\x00min", "not a role")])
def test_change_a_role_bad_input(team, carol, alice_client, role, message):
    response = alice_client.post(reverse("team_member_role", args=[team.pk, carol.pk]),
                                 {"role": role})
    assert response.status_code == 400 and message in response.content.decode()
    assert role_of(team, carol) == Role.MEMBER


def test_role_of_someone_not_in_the_team_is_404(team, dave, security, alice_client):
    response = alice_client.post(reverse("team_member_role", args=[team.pk, dave.pk]),
                                 {"role": "admin"})
    assert response.status_code == 404
    assert role_of(team, dave) is None


def test_the_last_admin_cannot_be_demoted_removed_or_leave(team, alice, alice_client):
    problem = ("You are the last admin of Platform: a team always keeps at least one admin. "
               "Make another member admin first.")
    for name, body in (("team_member_role", {"role": "member"}), ("team_member_remove", {})):
        response = alice_client.post(reverse(name, args=[team.pk, alice.pk]), body)
        assert response.status_code == 400 and problem in response.content.decode(), name
    response = alice_client.post(reverse("team_leave", args=[team.pk]))
    assert response.status_code == 400 and problem in response.content.decode()
    assert role_of(team, alice) == Role.ADMIN


def test_with_a_second_admin_the_first_may_step_down(team, alice, bob, alice_client):
    alice_client.post(reverse("team_member_role", args=[team.pk, bob.pk]), {"role": "admin"})
    response = alice_client.post(reverse("team_member_role", args=[team.pk, alice.pk]),
                                 {"role": "member"})
    assert response.status_code == 302 and role_of(team, alice) == Role.MEMBER
    # Now Bob is the last admin: Alice (no longer admin) may not touch him, he may not leave.
    assert alice_client.post(reverse("team_member_remove", args=[team.pk, bob.pk])) \
        .status_code == 403
    response = signed_in(bob).post(reverse("team_leave", args=[team.pk]))
    assert response.status_code == 400
    assert "You are the last admin of Platform" in response.content.decode()


def test_remove_a_member(team, carol, alice_client, django_capture_on_commit_callbacks):
    listener = Listener(carol)
    url = reverse("team_member_remove", args=[team.pk, carol.pk])
    with django_capture_on_commit_callbacks(execute=True):
        assert alice_client.post(url).status_code == 302
    assert role_of(team, carol) is None
    assert listener.messages() == [{"type": "access.changed", "team": team.pk}]
    assert alice_client.post(url).status_code == 404  # resubmitted: not a member any more
    assert signed_in(carol).get(reverse("team", args=[team.pk])).status_code == 404


def test_a_member_leaves(team, carol, django_capture_on_commit_callbacks):
    client = signed_in(carol)
    listener = Listener(carol)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("team_leave", args=[team.pk]))
    assert response.status_code == 302 and response.url == reverse("team_list")
    assert role_of(team, carol) is None
    assert listener.messages() == [{"type": "access.changed", "team": team.pk}]
    assert "You left Platform." in client.get(response.url).content.decode()
    assert client.post(reverse("team_leave", args=[team.pk])).status_code == 404  # again


def test_anonymous_and_strangers_cannot_leave(team, dave):
    response = Client().post(reverse("team_leave", args=[team.pk]))
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")
    assert signed_in(dave).post(reverse("team_leave", args=[team.pk])).status_code == 404
    assert Membership.objects.filter(team=team).count() == 3


# --- membership_changed -----------------------------------------------------------------
def test_membership_changed_is_sent_only_after_the_commit(team, dave, alice_client,
                                                          django_capture_on_commit_callbacks):
    listener = Listener(dave)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        alice_client.post(reverse("team_member_add", args=[team.pk]),
                          {"username": "dave", "role": "member"})
    assert listener.messages() == []  # the transaction has not committed yet
    assert len(callbacks) == 1
    callbacks[0]()
    assert listener.messages() == [{"type": "access.changed", "team": team.pk}]


def test_membership_changed_is_not_sent_when_the_change_rolls_back(
        team, dave, django_capture_on_commit_callbacks):
    listener = Listener(dave)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            services.add_member(team, dave, Role.MEMBER)
            raise RuntimeError("after the insert, before the commit")
    assert callbacks == [] and listener.messages() == []
    assert role_of(team, dave) is None


def test_membership_changed_survives_a_missing_channel_layer(team, dave, settings, caplog,
                                                             django_capture_on_commit_callbacks):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "no.such.Layer"}}
    with django_capture_on_commit_callbacks(execute=True):
        services.add_member(team, dave, Role.MEMBER)
    assert role_of(team, dave) == Role.MEMBER
    assert "could not tell user" in caplog.text


# --- the team command -------------------------------------------------------------------
def team_cmd(*args) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("team", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, out.getvalue()


def test_command_create_add_remove_list(alice, bob, carol, django_capture_on_commit_callbacks):
    listener = Listener(bob)
    with django_capture_on_commit_callbacks(execute=True):
        code, out = team_cmd("create", "Ops", "--admin", "alice")
        assert code == 0 and "Created the team Ops" in out and "alice is its admin" in out
        team = Team.objects.get(name="Ops")
        assert role_of(team, alice) == Role.ADMIN
        code, out = team_cmd("add", "ops", "bob", "--role", "approver")
        assert code == 0 and out.strip() == "Added bob to Ops as approver."
        code, _ = team_cmd("add", "Ops", "carol")
        assert code == 0 and role_of(team, carol) == Role.MEMBER  # the default role
        code, out = team_cmd("remove", "Ops", "carol")
        assert code == 0 and role_of(team, carol) is None
    assert listener.messages() == [{"type": "access.changed", "team": team.pk}]
    code, out = team_cmd("list")
    assert code == 0
    assert out.strip() == f"{team.pk}\tOps\t2 members: alice (admin), bob (approver)"


@pytest.mark.parametrize("args,message", [
    (["create", "Ops"], "create needs --admin USER"),
    (["create", "Ops", "--admin", "nobody"], "--admin: No user 'nobody'"),
    (["create", "Ops", "--admin", "al\x00ice"], "--admin: No user"),
    (["create", "Ops", "--admin", HUGE], "--admin: No user"),
    (["create", "", "--admin", "alice"], "NAME: Give the team a name."),
    (["create", "OPS", "--admin", "alice"], "NAME: A team named 'Ops' exists already"),
    (["create", "Ops", "--admin", "alice"], "NAME: A team named 'Ops' exists already"),
    (["create", "O\x00ps", "--admin", "alice"], "NAME: Null characters are not allowed."),
    (["create", "O\u202eps", "--admin", "alice"], "NAME: The team name contains invisible"),
    (["create", HUGE, "--admin", "alice"], "NAME: Ensure this value has at most 80 characters"),
    (["create", "A", "B", "--admin", "alice"], "create takes 1 argument"),
    (["add", "Ops", "bob", "--role", "owner"], "--role: owner is not a role"),
    (["add", "Ops", "bob", "--role", ""], "--role: Choose a role"),
    (["add", "Ops", "alice"], "USER: alice is already a member of Ops (admin)"),
    (["add", "Ops", "nobody"], "USER: No user 'nobody'"),
    (["add", "Ops", "bo\x00b"], "USER: Null characters are not allowed."),
    (["add", "Ops", HUGE], "USER: Ensure this value has at most 150 characters"),
    (["add", "Nope", "bob"], "TEAM: No team named 'Nope'"),
    (["add", "", "bob"], "TEAM: No team named ''"),
    (["add", HUGE, "bob"], "TEAM: No team named"),
    (["add", "O\x00ps", "bob"], "TEAM: No team named"),
    (["add", "Ops"], "add takes 2 arguments"),
    (["add", "Ops", "bob", "--admin", "bob"], "--admin is for create only"),
    (["remove", "Ops", "alice"], "alice is the last admin of Ops"),
    (["remove", "Ops", "bob"], "bob is not a member of Ops."),
    (["remove", "Ops", "nobody"], "USER: No user 'nobody'"),
    (["remove", "Ops", "bob", "--role", "admin"], "--role is for add only"),
    (["list", "extra"], "list takes no arguments"),
    (["rename", "Ops"], "invalid choice: 'rename'"),
    (["delete"], "delete takes 1 argument"),
    (["delete", "Nope"], "TEAM: No team named 'Nope'"),
    (["delete", "Ops", "--admin", "bob"], "--admin is for create only"),
])
def test_command_bad_input_exits_2_with_one_line(alice, bob, args, message):
    assert team_cmd("create", "Ops", "--admin", "alice")[0] == 0
    before = (list(Team.objects.values_list("name", flat=True)),
              sorted(Membership.objects.values_list("team__name", "user__username", "role")))
    code, text = team_cmd(*args)
    assert code == 2, text
    assert message in text and "\n" not in text.strip()
    assert (list(Team.objects.values_list("name", flat=True)),
            sorted(Membership.objects.values_list("team__name", "user__username", "role"))) \
        == before


def test_command_list_with_no_team():
    assert team_cmd("list") == (0, "No team yet: team create NAME --admin USER.\n")


# --- deleting a team --------------------------------------------------------------------
def team_run(owner, team):
    from agents_app import engine

    return engine.create_run(owner, "plan_execute", "Plan a team picnic", options={},
                             enqueue=False, team=team,
                             models={"planner": "offline/default", "executor": "offline/default",
                                     "synthesizer": "offline/default"})


def delete(client, team, confirm="Platform"):
    return client.post(reverse("team_delete", args=[team.pk]), {"confirm": confirm})


def test_an_admin_deletes_a_team_with_its_rules_and_endpoints_and_its_members_are_told(
        team, rule, people, django_capture_on_commit_callbacks):
    from agents_app.notify.models import Endpoint

    Endpoint.objects.create(owner=people["alice"], team=team, name="hook", style="signed",
                            url_sealed="x", url_hint="https://…")
    listeners = {who: Listener(people[who]) for who in ("alice", "bob", "carol", "dave")}
    alice = signed_in(people["alice"])
    with django_capture_on_commit_callbacks(execute=True):
        response = delete(alice, team)
    assert response.status_code == 302 and response.url == reverse("team_list")
    assert not Team.objects.filter(pk=team.pk).exists()
    assert not Membership.objects.filter(team_id=team.pk).exists()
    assert not GateRule.objects.filter(pk=rule.pk).exists()
    assert not Endpoint.objects.filter(team_id=team.pk).exists()
    for who in ("alice", "bob", "carol"):
        assert listeners[who].messages() == [{"type": "access.changed", "team": team.pk}], who
    assert listeners["dave"].messages() == []
    assert "Deleted the team Platform." in alice.get(reverse("team_list")).content.decode()
    assert delete(alice, team).status_code == 404  # resubmitted: gone


@pytest.mark.parametrize("confirm", ["", "platform", "Platform2", "Plat\x00form", HUGE])
def test_deleting_needs_the_name_typed_exactly(team, alice_client, confirm):
    response = delete(alice_client, team, confirm)
    assert response.status_code == 400
    assert "type its name, Platform, exactly" in response.content.decode()
    assert Team.objects.filter(pk=team.pk).exists() and role_of(team, team.created_by)


def test_a_team_runs_were_made_under_is_kept_and_the_page_says_why(team, alice, alice_client):
    team_run(alice, team)
    response = delete(alice_client, team)
    assert response.status_code == 400
    assert "Platform cannot be deleted: 1 run or review made under it would lose their team" \
        in response.content.decode()
    assert Team.objects.filter(pk=team.pk).exists() and Membership.objects.filter(team=team)


def test_open_gates_and_other_teams_rules_keep_a_team(team, security, alice, dave,
                                                      alice_client):
    from agents_app.gates.models import GateOpening

    run = team_run(dave, security)
    opening = GateOpening.objects.create(run=run, gate="plan_approval", opened_seq=1, seq=1,
                                         assignee_team=team)
    response = delete(alice_client, team)
    assert response.status_code == 400 and "1 open gate waiting on Platform" in \
        response.content.decode()
    GateOpening.objects.filter(pk=opening.pk).update(closed_at=run.created_at)
    GateRule.objects.create(team=security, name="Escalate", gate="plan_approval",
                            escalate_to=team)
    response = delete(alice_client, team)
    assert response.status_code == 400
    assert "(“Escalate” of Security): change it" in response.content.decode()
    assert Team.objects.filter(pk=team.pk).exists()


def test_a_team_with_a_repository_connection_is_kept(team, alice, alice_client):
    from reviews_app.models import Connection

    Connection.objects.create(owner=alice, team=team, provider="github", repository="o/r",
                              api_url="https://api.github.com")
    response = delete(alice_client, team)
    assert response.status_code == 400
    assert "1 repository connection of Platform would lose their team" in \
        response.content.decode()


def test_only_admins_see_the_delete_form(team, people):
    url = reverse("team_delete", args=[team.pk])
    for who in ("alice", "bob", "carol"):
        html = signed_in(people[who]).get(reverse("team", args=[team.pk])).content.decode()
        assert (url in html) == (who == "alice"), who


def test_command_delete(alice, bob):
    assert team_cmd("create", "Ops", "--admin", "alice")[0] == 0
    ops = Team.objects.get(name="Ops")
    team_run(alice, ops)
    code, text = team_cmd("delete", "ops")
    assert code == 2 and "Ops cannot be deleted: 1 run or review made under it" in text
    assert "\n" not in text.strip() and Team.objects.filter(pk=ops.pk).exists()
    assert team_cmd("create", "Spare", "--admin", "bob")[0] == 0
    assert team_cmd("delete", "spare") == (0, "Deleted the team Spare.\n")
    assert not Team.objects.filter(name="Spare").exists()
