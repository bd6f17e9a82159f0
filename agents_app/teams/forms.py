"""The forms of the team pages; the ``team`` command cleans its arguments with the same ones,
so a name or a role is refused with the same words on the page and on the command line."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from ..patterns.gate_input import control_message
from .models import Membership, Role, Team

NAME_MAX = Team._meta.get_field("name").max_length


def _clean_text(value: str, what: str) -> str:
    if message := control_message(what, value):
        raise forms.ValidationError(message)
    return value


class TeamForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX, label="Team name",
                           error_messages={"required": "Give the team a name."})

    def clean_name(self) -> str:
        name = _clean_text(self.cleaned_data["name"], "The team name")
        if twin := Team.objects.filter(name__iexact=name).first():
            raise forms.ValidationError(
                f"A team named {twin.name!r} exists already (names are compared without "
                "regard to case): choose another name, or ask its admins to add you.")
        return name


ROLE_CHOICES = [(r.value, r.label) for r in Role]


class RoleField(forms.ChoiceField):
    def __init__(self, **kwargs):
        super().__init__(choices=ROLE_CHOICES, error_messages={
            "required": "Choose a role: " + ", ".join(Role.values) + ".",
            "invalid_choice": "%(value)s is not a role: choose one of "
                              + ", ".join(Role.values) + "."}, **kwargs)


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username",
                               error_messages={"required": "Give the username of the person "
                                                           "to add."})
    role = RoleField(initial=Role.MEMBER)

    def __init__(self, *args, team: Team, **kwargs):
        super().__init__(*args, **kwargs)
        self.team = team
        self.user = None

    def clean_username(self):
        username = _clean_text(self.cleaned_data["username"], "The username")
        User = get_user_model()
        user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
        if user is None:
            raise forms.ValidationError(f"No user {username!r}: check the spelling.")
        if existing := Membership.objects.filter(team=self.team, user=user).first():
            raise forms.ValidationError(f"{username} is already a member of {self.team.name} "
                                        f"({existing.role}): change their role instead.")
        self.user = user
        return username


class RoleForm(forms.Form):
    role = RoleField()
