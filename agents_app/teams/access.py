"""Who may see and who may decide (issue 35). A personal item (no team) is its owner's alone.
A team's item is seen by the team's members and decided by its approvers and admins — its
initiator included only while a member: a member removed from a team loses its items at
once, the runs they started too. Every view, WebSocket and export asks here."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from .models import DECIDING_ROLES, Membership


def team_ids(user, *, deciding: bool = False) -> QuerySet:
    """The ids of the user's teams (those where they decide, with ``deciding``), as a
    subquery."""
    rows = Membership.objects.filter(user_id=user.pk)
    if deciding:
        rows = rows.filter(role__in=DECIDING_ROLES)
    return rows.values("team_id")


def assigned_runs(user) -> QuerySet:
    """The ids of runs whose open gate is assigned (or escalated) to the user or to one of
    their teams, as a subquery: those people see the run while the gate waits for them."""
    from ..gates.models import GateOpening

    return GateOpening.objects.filter(closed_at__isnull=True).filter(
        Q(assignee_user_id=user.pk) | Q(assignee_team_id__in=team_ids(user))).values("run_id")


def visible_q(user, *, owner: str = "owner", team: str = "team", run: str | None = None) -> Q:
    """The filter of what ``user`` may see: their personal items and their teams' items, and
    (``run``: the field holding a run's id) runs whose open gate is assigned to them or their
    team. ``owner`` and ``team`` name the fields (``run__owner`` for a review, say)."""
    branches = visible_branches(user, owner=owner, team=team, run=run)
    q = branches[0]
    for branch in branches[1:]:
        q |= branch
    return q


def visible_branches(user, *, owner: str = "owner", team: str = "team",
                     run: str | None = None) -> list[Q]:
    """``visible_q`` as the filters it ORs: the person's personal items, their teams' items,
    the runs assigned to them (those that apply). A list sorted by a key reads each in its own
    index order and merges them (``history._sorted_page``): no index orders their OR."""
    if not getattr(user, "is_authenticated", False):
        return [Q(pk__in=[])]
    # The person's teams and the runs assigned to them are read first (a few ids): an empty
    # list drops its branch, so a person in no team gets the plain owner filter the history's
    # indexes serve, and no list page joins a subquery into an OR (which no index serves).
    branches = [Q(**{owner: user, f"{team}__isnull": True})]
    if teams := list(team_ids(user).values_list("team_id", flat=True)):
        branches.append(Q(**{f"{team}__in": teams}))
    if run is not None and (runs := list(assigned_runs(user).values_list("run_id", flat=True)
                                         [:1000])):
        branches.append(Q(**{f"{run}__in": runs}))
    return branches


def visible(queryset: QuerySet, user, **fields) -> QuerySet:
    if "run" not in fields:  # a run, or a review (of a run): assigned gates count too
        name = queryset.model._meta.label
        fields["run"] = {"agents_app.Run": "pk", "reviews_app.Review": "run_id"}.get(name)
    return queryset.filter(visible_q(user, **fields))


def role_in(user, team_id: int | None) -> str | None:
    if team_id is None or not getattr(user, "is_authenticated", False):
        return None
    return Membership.objects.filter(user_id=user.pk, team_id=team_id).values_list(
        "role", flat=True).first()


def can_see(user, item) -> bool:
    """``item`` has ``owner_id`` and ``team_id`` (a run, an experiment, a connection)."""
    if not getattr(user, "is_authenticated", False):
        return False
    if item.team_id is None and item.owner_id == user.pk:
        return True
    if item.team_id is not None and role_in(user, item.team_id) is not None:
        return True
    return _assigned(user, item)


def _assigned(user, item) -> bool:
    from ..models import Run

    return isinstance(item, Run) and assigned_runs(user).filter(run_id=item.pk).exists()


def can_decide(user, item) -> bool:
    """May ``user`` decide the gates of ``item``: its owner when personal, an approver or
    admin of its team otherwise (a gate's rule may narrow this further: the initiator
    excluded, a deadline's escalation widens it — agents_app/gates/core.py)."""
    if not getattr(user, "is_authenticated", False):
        return False
    if item.team_id is None:
        return item.owner_id == user.pk
    return role_in(user, item.team_id) in DECIDING_ROLES


def can_manage(user, item) -> bool:
    """Decide, cancel, retry, fork into the team: the owner while they may still see it, a
    deciding member of its team, or those its open gate is assigned or escalated to."""
    if not can_see(user, item):
        return False
    if item.team_id is not None and item.owner_id == user.pk and role_in(
            user, item.team_id) is None:
        return _assigned(user, item)
    return item.owner_id == user.pk or can_decide(user, item) or _assigned(user, item)


def can_administer(user, item) -> bool:
    """Change or delete a team's connection (its token, its webhook secret): the owner of a
    personal one, an admin of the team otherwise."""
    if not getattr(user, "is_authenticated", False):
        return False
    if item.team_id is None:
        return item.owner_id == user.pk
    from .models import Role

    return role_in(user, item.team_id) == Role.ADMIN


def user_teams(user, *, deciding: bool = False):
    from .models import Team

    if not getattr(user, "is_authenticated", False):
        return Team.objects.none()
    return Team.objects.filter(pk__in=team_ids(user, deciding=deciding)).order_by("name")
