"""Manage teams from the command line, as the team pages do (issue 35):

    team create NAME --admin USER     a new team, USER its admin
    team add TEAM USER [--role ROLE]  add USER (role: member, approver or admin)
    team remove TEAM USER             remove USER (never the team's last admin)
    team delete TEAM                  delete the team (refused while runs, experiments or
                                      open gates name it, as on its page)
    team list                         every team with its members and their roles

Names and roles are checked by the pages' own forms, so they are refused with the same
words. Exit 0 on success; 2, with one line on stderr, on bad input."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from agents_app.cli import CheckedCommand, bad_input
from agents_app.patterns.gate_input import control_characters
from agents_app.teams import services
from agents_app.teams.forms import MemberAddForm, TeamForm
from agents_app.teams.models import Membership, Role, Team

USAGE = {"create": "team create NAME --admin USER", "add": "team add TEAM USER [--role ROLE]",
         "remove": "team remove TEAM USER", "delete": "team delete TEAM", "list": "team list"}
ARGS = {"create": 1, "add": 2, "remove": 2, "delete": 1, "list": 0}


def _first_error(form) -> str:
    field, errors = next(iter(form.errors.items()))
    label = {"__all__": "", "name": "NAME", "username": "USER", "role": "--role"}.get(field, field)
    return (f"{label}: " if label else "") + " ".join(errors)


class Command(CheckedCommand):
    help = ("Manage teams: create NAME --admin USER; add TEAM USER [--role ROLE]; remove TEAM "
            "USER; delete TEAM; list. Exit 2 with one line on bad input.")
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("action", choices=tuple(USAGE))
        parser.add_argument("targets", nargs="*", metavar="NAME|TEAM USER")
        parser.add_argument("--admin", default=None, help="create: the team's first admin")
        parser.add_argument("--role", default=None,
                            help="add: member (default), approver or admin")

    def handle(self, *args, **opts):
        action, given = opts["action"], opts["targets"]
        if len(given) != ARGS[action]:
            raise bad_input(f"{action} takes {ARGS[action] or 'no'} argument"
                            f"{'s' if ARGS[action] != 1 else ''}: {USAGE[action]}.")
        if opts["admin"] is not None and action != "create":
            raise bad_input(f"--admin is for create only: {USAGE[action]}.")
        if opts["role"] is not None and action != "add":
            raise bad_input(f"--role is for add only: {USAGE[action]}.")
        getattr(self, f"do_{action}")(*given, **opts)

    # --- actions --------------------------------------------------------------------------
    def do_create(self, name, *, admin, **_):
        if admin is None:
            raise bad_input(f"create needs --admin USER (the team's first admin): "
                            f"{USAGE['create']}.")
        user = self._user(admin, "--admin")
        form = TeamForm({"name": name})
        if not form.is_valid():
            raise bad_input(_first_error(form))
        team = services.create_team(form.cleaned_data["name"], user)
        self.stdout.write(f"Created the team {team.name} (id {team.pk}); "
                          f"{user.get_username()} is its admin.")

    def do_add(self, team_name, username, *, role, **_):
        team = self._team(team_name)
        form = MemberAddForm({"username": username, "role": Role.MEMBER if role is None
                              else role}, team=team)
        if not form.is_valid():
            raise bad_input(_first_error(form))
        try:
            services.add_member(team, form.user, form.cleaned_data["role"])
        except services.TeamError as exc:
            raise bad_input(str(exc)) from None
        self.stdout.write(f"Added {form.user.get_username()} to {team.name} as "
                          f"{form.cleaned_data['role']}.")

    def do_remove(self, team_name, username, **_):
        team = self._team(team_name)
        user = self._user(username, "USER")
        try:
            services.remove_member(team, user)
        except services.TeamError as exc:
            raise bad_input(str(exc)) from None
        self.stdout.write(f"Removed {user.get_username()} from {team.name}.")

    def do_delete(self, team_name, **_):
        team = self._team(team_name)
        try:
            services.delete_team(team)
        except services.TeamError as exc:
            raise bad_input(str(exc)) from None
        self.stdout.write(f"Deleted the team {team.name}.")

    def do_list(self, **_):
        teams = list(Team.objects.order_by("name"))
        if not teams:
            self.stdout.write("No team yet: team create NAME --admin USER.")
            return
        members: dict[int, list[str]] = {}
        for m in Membership.objects.select_related("user").order_by("user__username"):
            members.setdefault(m.team_id, []).append(f"{m.user.get_username()} ({m.role})")
        for team in teams:
            who = members.get(team.pk, [])
            self.stdout.write(f"{team.pk}\t{team.name}\t{len(who)} member"
                              f"{'s' if len(who) != 1 else ''}: {', '.join(who) or 'none'}")

    # --- lookups --------------------------------------------------------------------------
    def _user(self, username: str, option: str):
        User = get_user_model()
        user = None
        if len(username) <= 150 and not control_characters(username):  # PostgreSQL: no NUL
            user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
        if user is None:
            raise bad_input(f"{option}: No user {username[:150]!r}: check the spelling.")
        return user

    def _team(self, name: str) -> Team:
        team = None
        if name.strip() and len(name) <= 200 and not control_characters(name):
            team = Team.objects.filter(name__iexact=name.strip()).first()
        if team is None:
            raise bad_input(f"TEAM: No team named {name[:100]!r} (team list shows them).")
        return team
