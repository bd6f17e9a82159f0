"""The team pages: my teams, a team's members and gate rules, and the forms that change them.

Who may do what, one rule for every view here: anonymous visitors are sent to sign in; a
team is a 404 to whoever is not its member (GET and POST alike, so its existence does not
leak); every member sees the team page and may leave; only admins change members and rules
— a member who is not an admin gets a 403 that says so."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.db.models import Case, Count, IntegerField, Max, Value, When
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from common.web import go

from ..gates.models import GateRule
from ..gates.rule_forms import GateRuleForm, describe
from . import services
from .forms import MemberAddForm, RoleForm, TeamForm
from .models import Membership, Role, Team

log = logging.getLogger("quorum.teams")

_RANK = Case(When(role=Role.ADMIN, then=Value(0)), When(role=Role.APPROVER, then=Value(1)),
             default=Value(2), output_field=IntegerField())


def _team_url(team: Team, anchor: str = "") -> str:
    return reverse("team", args=[team.pk]) + (f"#{anchor}" if anchor else "")


def _membership(request, pk: int) -> Membership:
    """The signed-in person's membership of team ``pk``; a 404 when they have none."""
    membership = (Membership.objects.select_related("team")
                  .filter(team_id=pk, user=request.user).first())
    if membership is None:
        raise Http404("No such team.")
    return membership


def _not_admin(request, membership: Membership, what: str):
    """The 403 a member who is not an admin gets for an admin's action."""
    team = membership.team
    names = list(team.memberships.filter(role=Role.ADMIN).order_by("user__username")
                 .values_list("user__username", flat=True))
    return render(request, "agents_app/teams/forbidden.html", {
        "team": team, "what": what, "admins": names, "membership": membership}, status=403)


def _list_page(request, form: TeamForm | None = None, status: int = 200):
    mine = (Membership.objects.filter(user=request.user).select_related("team")
            .annotate(members=Count("team__memberships")).order_by("team__name"))
    return render(request, "agents_app/teams/list.html",
                  {"memberships": mine, "form": form or TeamForm()}, status=status)


@login_required
@require_GET
def team_list(request):
    return _list_page(request)


@login_required
@require_POST
def team_new(request):
    form = TeamForm(request.POST)
    if form.is_valid():
        try:
            team = services.create_team(form.cleaned_data["name"], request.user)
        except IntegrityError:  # the same name saved between the check and the insert
            form.add_error("name", "A team with this name was just created: choose another.")
        else:
            messages.success(request, f"Created the team {team.name}; you are its admin.")
            return go(request, _team_url(team))
    return _list_page(request, form=form, status=400)


def _page(request, membership: Membership, *, status: int = 200, problem: str = "",
          add_form: MemberAddForm | None = None):
    team = membership.team
    members = (team.memberships.select_related("user", "added_by")
               .annotate(rank=_RANK).order_by("rank", "user__username"))
    rules = list(team.gate_rules.select_related("assign_user", "assign_team", "escalate_to"))
    for rule in rules:
        rule.summary = describe(rule)  # type: ignore[attr-defined]
    admin = membership.role == Role.ADMIN
    return render(request, "agents_app/teams/team.html", {
        "team": team, "membership": membership, "is_admin": admin, "members": members,
        "admins": sum(1 for m in members if m.role == Role.ADMIN),
        "rules": rules, "roles": Role.choices, "problem": problem,
        "add_form": add_form or MemberAddForm(team=team),
    }, status=status)


@login_required
@require_GET
def team_page(request, pk):
    return _page(request, _membership(request, pk))


@login_required
@require_POST
def team_member_add(request, pk):
    membership = _membership(request, pk)
    if membership.role != Role.ADMIN:
        return _not_admin(request, membership, "add members")
    team = membership.team
    form = MemberAddForm(request.POST, team=team)
    if form.is_valid():
        try:
            services.add_member(team, form.user, form.cleaned_data["role"], by=request.user)
        except services.TeamError as exc:  # added by someone else since the form was checked
            form.add_error("username", str(exc))
        else:
            messages.success(request, f"Added {form.user.get_username()} to {team.name} as "
                                      f"{form.cleaned_data['role']}.")
            return go(request, _team_url(team, "members"))
    return _page(request, membership, status=400, add_form=form)


def _member(team: Team, user_id: int):
    """The user behind a member row of ``team`` (404 when they are not a member any more)."""
    return get_object_or_404(get_user_model(), pk=user_id, memberships__team=team)


@login_required
@require_POST
def team_member_role(request, pk, user):
    membership = _membership(request, pk)
    if membership.role != Role.ADMIN:
        return _not_admin(request, membership, "change roles")
    team = membership.team
    person = _member(team, user)
    form = RoleForm(request.POST)
    if not form.is_valid():
        return _page(request, membership, status=400, problem=" ".join(form.errors["role"]))
    role = form.cleaned_data["role"]
    try:
        changed = services.set_role(team, person, role, by=request.user)
    except services.TeamError as exc:
        return _page(request, membership, status=400, problem=str(exc))
    name = person.get_username()
    messages.success(request, f"{name} is now {role}." if changed else f"{name} was {role} "
                                                                       "already.")
    return go(request, _team_url(team, "members"))


@login_required
@require_POST
def team_member_remove(request, pk, user):
    membership = _membership(request, pk)
    if membership.role != Role.ADMIN:
        return _not_admin(request, membership, "remove members")
    team = membership.team
    person = _member(team, user)
    try:
        services.remove_member(team, person, by=request.user)
    except services.TeamError as exc:
        return _page(request, membership, status=400, problem=str(exc))
    if person == request.user:
        messages.success(request, f"You left {team.name}.")
        return go(request, reverse("team_list"))
    messages.success(request, f"Removed {person.get_username()} from {team.name}.")
    return go(request, _team_url(team, "members"))


@login_required
@require_POST
def team_leave(request, pk):
    membership = _membership(request, pk)
    team = membership.team
    try:
        services.remove_member(team, request.user, by=request.user)
    except services.TeamError as exc:
        return _page(request, membership, status=400, problem=str(exc))
    messages.success(request, f"You left {team.name}.")
    return go(request, reverse("team_list"))


@login_required
@require_POST
def team_delete(request, pk):
    membership = _membership(request, pk)
    if membership.role != Role.ADMIN:
        return _not_admin(request, membership, "delete the team")
    team = membership.team
    if request.POST.get("confirm", "").strip() != team.name:
        return _page(request, membership, status=400,
                     problem=f"To delete the team, type its name, {team.name}, exactly.")
    try:
        services.delete_team(team, by=request.user)
    except services.TeamError as exc:
        return _page(request, membership, status=400, problem=str(exc))
    messages.success(request, f"Deleted the team {team.name}.")
    return go(request, reverse("team_list"))


# --- gate rules ---------------------------------------------------------------------------

def _rule_form(request, membership: Membership, rule: GateRule | None):
    team = membership.team
    data = request.POST if request.method == "POST" else None
    form = GateRuleForm(data, instance=rule, team=team, editor=request.user)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            services.lock(team)  # one position each, even for two rules added at once
            saved = form.save(commit=False)
            if rule is None:
                saved.team = team
                saved.created_by = request.user
                top = team.gate_rules.aggregate(top=Max("position"))["top"]
                saved.position = 0 if top is None else top + 1
            saved.save()
        log.info("gate rule %s of team %s %s by user %s", saved.pk, team.pk,
                 "edited" if rule else "created", request.user.pk)
        messages.success(request, f"Saved the rule {saved.name}.")
        return go(request, _team_url(team, "rules"))
    return render(request, "agents_app/teams/rule_form.html",
                  {"team": team, "form": form, "rule": rule},
                  status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def team_rule_new(request, pk):
    membership = _membership(request, pk)
    if membership.role != Role.ADMIN:
        return _not_admin(request, membership, "add gate rules")
    return _rule_form(request, membership, None)


@login_required
@require_http_methods(["GET", "POST"])
def team_rule_edit(request, pk, rule):
    membership = _membership(request, pk)
    if membership.role != Role.ADMIN:
        return _not_admin(request, membership, "edit gate rules")
    return _rule_form(request, membership,
                      get_object_or_404(GateRule, pk=rule, team=membership.team))


@login_required
@require_POST
def team_rule_delete(request, pk, rule):
    membership = _membership(request, pk)
    if membership.role != Role.ADMIN:
        return _not_admin(request, membership, "delete gate rules")
    found = get_object_or_404(GateRule, pk=rule, team=membership.team)
    name = found.name
    found.delete()
    log.info("gate rule %s of team %s deleted by user %s", rule, pk, request.user.pk)
    messages.success(request, f"Deleted the rule {name}.")
    return go(request, _team_url(membership.team, "rules"))


@login_required
@require_POST
def team_rule_move(request, pk, rule):
    membership = _membership(request, pk)
    if membership.role != Role.ADMIN:
        return _not_admin(request, membership, "reorder gate rules")
    team = membership.team
    direction = request.POST.get("direction", "")
    if direction not in ("up", "down"):
        get_object_or_404(GateRule, pk=rule, team=team)
        return _page(request, membership, status=400,
                     problem="Move a rule up or down (direction “up” or “down”).")
    with transaction.atomic():
        services.lock(team)
        order = list(team.gate_rules.select_for_update().order_by("position", "pk"))
        index = next((i for i, r in enumerate(order) if r.pk == rule), None)
        if index is None:
            raise Http404("No such rule.")
        other = index - 1 if direction == "up" else index + 1
        moved = 0 <= other < len(order)
        if moved:
            order[index], order[other] = order[other], order[index]
        for position, r in enumerate(order):  # positions 0..n-1, whatever they were
            if r.position != position:
                GateRule.objects.filter(pk=r.pk).update(position=position)
    name = order[other if moved else index].name
    if moved:
        messages.success(request, f"Moved the rule {name} {direction}.")
    else:
        messages.info(request, f"The rule {name} is {'first' if direction == 'up' else 'last'} "
                               "already.")
    return go(request, _team_url(team, "rules"))
