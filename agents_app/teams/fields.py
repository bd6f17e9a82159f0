"""The "Team" choice of the forms that start something (a run, a change, a review, an
experiment, a connection): Personal, or one of the teams the person belongs to. A person in
no team sees no such field."""

from __future__ import annotations

from django import forms

from .access import user_teams

FIELD = "sharing"  # not "team": the team-lead pattern has an option of that name
PERSONAL = "Personal: only you"


def add_team_field(form: forms.Form, user) -> None:
    teams = user_teams(user) if user is not None else None
    if teams is None or not teams.exists():
        return
    form.fields[FIELD] = forms.ModelChoiceField(
        queryset=teams, required=False, empty_label=PERSONAL, label="Team",
        help_text="A team's members see it; its approvers decide its gates.",
        error_messages={"invalid_choice": "Choose one of your teams, or Personal."})


def chosen_team(form: forms.Form):
    return form.cleaned_data.get(FIELD) if FIELD in form.fields else None
