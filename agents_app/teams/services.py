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
