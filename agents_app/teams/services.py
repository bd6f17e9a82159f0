"""Changes to teams and their members, shared by the pages and the ``team`` command.

Every change to a membership ends with ``membership_changed``: after the transaction commits,
the person's open pages are told (over Channels, group ``user-<id>``) that what they may see
has changed. A team always keeps at least one admin: removing, demoting or the leaving of
its last admin is refused with ``TeamError``."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from common import turns

from .models import Membership, Role, Team

log = logging.getLogger("quorum.teams")


class TeamError(Exception):
    """A change refused for a reason a person can act on; the message says which."""


def user_group(user_id: int) -> str:
    return f"user-{user_id}"


def membership_changed(user_id: int, team_id: int) -> None:
    """Tell ``user_id``'s open pages that their access to ``team_id`` changed: once the
    current transaction commits (at once outside one), ``{"type": "access.changed", "team":
    team_id}`` goes to the Channels group ``user-<user_id>``. Best effort: with the channel
    layer away the change stands, and the pages see it on their next load."""
    transaction.on_commit(lambda: _send(int(user_id), int(team_id)))


def _send(user_id: int, team_id: int) -> None:
    try:
        layer = get_channel_layer()
        if layer is None:
            return
        with turns.waiting():  # a round trip to Redis: a wait outside the process
            async_to_sync(layer.group_send)(user_group(user_id),
                                            {"type": "access.changed", "team": team_id})
    except Exception as exc:  # noqa: BLE001 - Redis away: the membership is saved anyway
        log.warning("could not tell user %s that their access to team %s changed: %s",
                    user_id, team_id, exc)


def lock(team: Team) -> Team:
    """The team's row, locked until the transaction ends (PostgreSQL): two admins changing
    members at once are taken one after the other, so the last-admin check holds."""
    return Team.objects.select_for_update().get(pk=team.pk)


def admins(team: Team) -> int:
    return Membership.objects.filter(team=team, role=Role.ADMIN).count()


def approvers(team: Team) -> int:
    """How many members may decide the team's gates (approvers and admins)."""
    from .models import DECIDING_ROLES

    return Membership.objects.filter(team=team, role__in=DECIDING_ROLES).count()


def _last_admin_message(team: Team, user, *, yourself: bool) -> str:
    who = "You are" if yourself else f"{user.get_username()} is"
    return (f"{who} the last admin of {team.name}: a team always keeps at least one admin. "
            "Make another member admin first.")


def create_team(name: str, admin) -> Team:
    """A new team named ``name`` (checked by ``TeamForm``) with ``admin`` as its admin."""
    with transaction.atomic():
        team = Team.objects.create(name=name, created_by=admin)
        Membership.objects.create(team=team, user=admin, role=Role.ADMIN, added_by=admin)
        membership_changed(admin.pk, team.pk)
    log.info("team %s created by user %s", team.pk, admin.pk)
    return team


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def delete_team(team: Team, by=None) -> None:
    """Delete ``team``, its memberships, its gate rules and its notification endpoints.
    Refused (``TeamError``, saying what to do) while something that outlives it names it:
    runs, reviews or experiments made under it (their history keeps their team), gates still
    open for it, or another team's rule that hands gates to it."""
    from django.db.models import ProtectedError, Q

    from reviews_app.models import Connection

    from ..gates.models import GateOpening, GateRule
    from ..models import Experiment, Run

    with transaction.atomic():
        lock(team)
        runs = Run.objects.filter(team=team).count()
        experiments = Experiment.objects.filter(team=team).count()
        if runs or experiments:
            held = " and ".join(_plural(n, w) for n, w in ((runs, "run or review"),
                                                              (experiments, "experiment")) if n)
            raise TeamError(f"{team.name} cannot be deleted: {held} made under it would "
                            "lose their team. Its members can leave it instead.")
        connections = Connection.objects.filter(team=team).count()
        if connections:
            raise TeamError(f"{_plural(connections, 'repository connection')} of {team.name} "
                            "would lose their team: delete them before deleting the team.")
        gates = GateOpening.objects.filter(Q(team=team) | Q(assignee_team=team),
                                           closed_at__isnull=True).count()
        if gates:
            raise TeamError(f"{_plural(gates, 'open gate')} waiting on {team.name}: decide "
                            "them or hand them on before deleting the team.")
        rules = list(GateRule.objects.filter(Q(assign_team=team) | Q(escalate_to=team))
                     .exclude(team=team)
                     .values_list("team__name", "name")[:3])
        if rules:
            named = ", ".join(f"“{rule}” of {owner}" for owner, rule in rules)
            raise TeamError(f"Another team's rule hands gates to {team.name} ({named}): "
                            "change it before deleting the team.")
        members = list(Membership.objects.filter(team=team).values_list("user_id", flat=True))
        team_id = team.pk
        try:
            team.delete()
        except ProtectedError as exc:  # something named above missed: say so, never a 500
            raise TeamError(f"{team.name} is still named by {len(exc.protected_objects)} "
                            "record(s) that keep their team: it cannot be deleted.") from None
        for user_id in members:
            membership_changed(user_id, team_id)
    log.info("team %s deleted by %s", team_id, getattr(by, "pk", "the command line"))


def add_member(team: Team, user, role: str, by=None) -> Membership:
    with transaction.atomic():
        lock(team)
        if existing := Membership.objects.filter(team=team, user=user).first():
            raise TeamError(f"{user.get_username()} is already a member of {team.name} "
                            f"({existing.role}): change their role instead.")
        membership = Membership.objects.create(team=team, user=user, role=role, added_by=by)
        membership_changed(user.pk, team.pk)
    log.info("user %s added to team %s as %s by %s", user.pk, team.pk, role,
             getattr(by, "pk", "the command line"))
    return membership


def set_role(team: Team, user, role: str, by=None) -> bool:
    """``user``'s role in ``team`` becomes ``role``; False when it was that already."""
    with transaction.atomic():
        lock(team)
        membership = Membership.objects.filter(team=team, user=user).first()
        if membership is None:
            raise TeamError(f"{user.get_username()} is not a member of {team.name}.")
        if membership.role == role:
            return False
        if membership.role == Role.ADMIN and admins(team) == 1:
            raise TeamError(_last_admin_message(team, user, yourself=by == user))
        membership.role = role
        membership.save(update_fields=["role"])
        membership_changed(user.pk, team.pk)
    log.info("user %s is now %s in team %s (by %s)", user.pk, role, team.pk,
             getattr(by, "pk", "the command line"))
    return True


def remove_member(team: Team, user, by=None) -> None:
    """``user`` leaves ``team`` (``by`` is ``user`` when they leave themselves)."""
    with transaction.atomic():
        lock(team)
        membership = Membership.objects.filter(team=team, user=user).first()
        if membership is None:
            raise TeamError(f"{user.get_username()} is not a member of {team.name}.")
        if membership.role == Role.ADMIN and admins(team) == 1:
            raise TeamError(_last_admin_message(team, user, yourself=by == user))
        membership.delete()
        membership_changed(user.pk, team.pk)
    log.info("user %s removed from team %s by %s", user.pk, team.pk,
             getattr(by, "pk", "the command line"))
