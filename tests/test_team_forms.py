"""The Team choice of the start forms (issue 35): a run, a review, an experiment or a
connection is the team's when its starter picks one of their teams; a team they are not in
(or, for a connection, do not run) is refused with a clear message and nothing is made; a
person in no team sees no such choice."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents_app import engine
from agents_app.models import Run
from agents_app.teams.models import Membership, Team
from reviews_app.models import Connection

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_schedule(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)


@pytest.fixture
def teams(alice, bob):
    mine, theirs = Team.objects.create(name="Mine"), Team.objects.create(name="Theirs")
    Membership.objects.create(team=mine, user=alice, role="member")
    Membership.objects.create(team=theirs, user=bob, role="admin")
    return mine, theirs


def test_a_person_in_no_team_sees_no_team_choice(alice_client):
    assert 'name="sharing"' not in alice_client.get(reverse("dashboard")).content.decode()


def test_a_run_started_for_a_team_is_the_teams(alice_client, teams):
    mine, theirs = teams
    page = alice_client.get(reverse("dashboard")).content.decode()
    assert 'name="sharing"' in page and "Mine" in page and "Theirs" not in page
    response = alice_client.post(reverse("start_run"), {
        "pattern": "plan_execute", "task": "Plan a picnic", "sharing": mine.pk})
    assert response.status_code == 302
    assert Run.objects.get().team == mine
    response = alice_client.post(reverse("start_run"), {
        "pattern": "plan_execute", "task": "Plan a picnic", "sharing": theirs.pk})
    assert response.status_code == 400 and "Choose one of your teams" in \
        response.content.decode()
    for bad in ("x", "\x00", "9" * 30):
        assert alice_client.post(reverse("start_run"), {
            "pattern": "plan_execute", "task": "Plan", "sharing": bad}).status_code == 400
    assert Run.objects.count() == 1
    alice_client.post(reverse("start_run"), {"pattern": "plan_execute", "task": "Mine only",
                                             "sharing": ""})
    assert Run.objects.get(task="Mine only").team is None


def test_a_connection_is_put_in_a_team_only_by_its_admin(alice, bob, client, teams):
    mine, theirs = teams
    client.force_login(alice)  # a plain member of Mine: no choice at all
    assert 'name="sharing"' not in client.get(reverse("connection_new")).content.decode()
    client.force_login(bob)
    page = client.get(reverse("connection_new")).content.decode()
    assert 'name="sharing"' in page and "Theirs" in page
    response = client.post(reverse("connection_new"), {
        "provider": "github", "repository": "octo/widgets", "api_url": "",
        "token": "ghp_" + "a" * 36, "publish_policy": "after_triage",
        "auto_min_severity": "high", "auto_min_confidence": "0.7", "sharing": mine.pk})
    assert response.status_code == 400 and not Connection.objects.exists()


def test_a_rule_form_names_no_team_its_editor_is_not_in(alice_client, alice, teams):
    mine, theirs = teams
    Membership.objects.filter(team=mine, user=alice).update(role="admin")
    page = alice_client.get(reverse("team_rule_new", args=[mine.pk])).content.decode()
    assert "Theirs" not in page
    response = alice_client.post(reverse("team_rule_new", args=[mine.pk]), {
        "name": "Escalate", "required_approvals": 1, "rejections_to_reject": 1,
        "deadline_minutes": 10, "escalate_minutes_before": 5, "escalate_to": theirs.pk})
    assert response.status_code == 400 and not mine.gate_rules.exists()
