"""A team's gate rules (issue 35): the form's checks with their messages, the pages that
create, edit, reorder and delete rules (400 and nothing saved on bad input), and a rule in
words."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents_app.gates.models import GateRule
from agents_app.gates.rule_forms import GateRuleForm, describe, gate_names
from agents_app.patterns import PATTERNS
from agents_app.teams.models import Membership, Role, Team
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

HUGE = "x" * 10_000


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", password=PASSWORD)


@pytest.fixture
def team(alice, bob, carol):
    """Platform: Alice admin, Bob approver, Carol member — two who decide gates."""
    team = Team.objects.create(name="Platform", created_by=alice)
    for user, role in ((alice, Role.ADMIN), (bob, Role.APPROVER), (carol, Role.MEMBER)):
        Membership.objects.create(team=team, user=user, role=role)
    return team


@pytest.fixture
def security(django_user_model):
    dave = django_user_model.objects.create_user("dave", password=PASSWORD)
    team = Team.objects.create(name="Security")
    Membership.objects.create(team=team, user=dave, role=Role.ADMIN)
    return team


VALID = {"name": "Merges", "pattern": "", "gate": "", "repository": "", "paths": "",
         "required_approvals": "1", "rejections_to_reject": "1", "deadline_minutes": "",
         "remind_minutes_before": "", "escalate_minutes_before": "", "default_action": ""}


def form(team, **changes) -> GateRuleForm:
    return GateRuleForm({**VALID, **changes}, team=team)


def errors(team, **changes) -> dict[str, str]:
    f = form(team, **changes)
    assert not f.is_valid()
    return {k: " ".join(v) for k, v in f.errors.items()}


def test_the_full_rule_is_valid_and_reads_as_a_sentence(team, security, bob):
    f = form(team, name="Change merges", pattern="plan_execute_review", gate="merge_request",
             repository="acme/*", paths="src/**\n\n  docs/*.md  \n", required_approvals="2",
             exclude_initiator="on", rejections_to_reject="2", assign_user=str(bob.pk),
             deadline_minutes="60", remind_minutes_before="15", escalate_minutes_before="5",
             escalate_to=str(security.pk), default_action="reject")
    assert f.is_valid(), f.errors
    rule = f.save(commit=False)
    rule.team = team
    rule.save()
    assert rule.paths == "src/**\ndocs/*.md"  # one glob a line, blank lines dropped
    assert describe(rule) == (
        "Plan, execute, review (git) runs' merge request gate in repositories matching acme/* "
        "when a changed path matches src/**, docs/*.md: 2 approvals, initiator excluded, "
        "2 rejections reject, assigned to bob; deadline 60 min: remind 15 min before, "
        "escalate to Security 5 min before, then reject")


def test_describe_the_simplest_rules(team, security):
    assert describe(GateRule(team=team, name="a")) == "Every gate of every pattern: 1 approval"
    rule = GateRule(team=team, name="b", gate="plan_approval", deadline_minutes=1440,
                    assign_team=security, use_codeowners=True)
    assert describe(rule) == ("Every pattern's plan approval gate: 1 approval, assigned to "
                              "team Security and the code owners; deadline 1,440 min: then "
                              "keep waiting")


def test_gates_come_from_the_patterns_and_the_statuses():
    names = gate_names()
    for pattern in PATTERNS.values():
        assert set(pattern.gates) <= set(names)
    assert {"plan_approval", "merge_request", "triage", "tool_approval", "vote_pick"} <= \
        set(names)


@pytest.mark.parametrize("changes,field,message", [
    ({"name": ""}, "name", "Give the rule a name."),
    ({"name": HUGE}, "name", "at most 100 characters (it has 10000)"),
    ({"name": "Mer\x00ges"}, "name", "Null characters are not allowed."),
    ({"name": "Mer\u202eges"}, "name", "invisible control characters (U+202E"),
    ({"pattern": "nope"}, "pattern", "nope is not a pattern Quorum knows"),
    ({"pattern": HUGE}, "pattern", "is not a pattern Quorum knows"),
    ({"pattern": "debate"}, "pattern", "Debate runs never stop at a gate"),
    ({"gate": "lunch"}, "gate", "lunch is not a gate Quorum knows"),
    ({"pattern": "react", "gate": "merge_request"}, "gate",
     "runs have no merge request gate; theirs: tool approval, ask person."),
    ({"repository": "acme/\\"}, "repository", "The repository glob is not a valid glob"),
    ({"repository": HUGE}, "repository", "10,000 characters long: a glob may have at most 300"),
    ({"repository": "acme/\x00"}, "repository", "Null characters are not allowed."),
    ({"repository": "acme/\u202e*"}, "repository", "invisible control characters"),
    ({"paths": "\n".join(f"d{i}/**" for i in range(51))}, "paths",
     "Give at most 50 path globs (one per line); there are 51."),
    ({"paths": "src/**\n" + "y" * 301}, "paths", "Line 2 of the path globs is 301 characters"),
    ({"paths": HUGE}, "paths", "Line 1 of the path globs is 10,000 characters long"),
    ({"paths": "src/**\nbad\\"}, "paths", "Line 2 of the path globs is not a valid glob"),
    ({"paths": "src/\u202e**"}, "paths", "The path globs contains invisible control"),
    ({"required_approvals": "0"}, "required_approvals", "greater than or equal to 1"),
    ({"required_approvals": "21"}, "required_approvals", "less than or equal to 20"),
    ({"required_approvals": ""}, "required_approvals", "required"),
    ({"required_approvals": "two"}, "required_approvals", "Enter a whole number."),
    ({"required_approvals": "3"}, "required_approvals",
     "Platform has 2 approvers (members with the approver or admin role): a gate needing 3 "
     "approvals could never pass."),
    ({"rejections_to_reject": "0"}, "rejections_to_reject", "greater than or equal to 1"),
    ({"rejections_to_reject": "21"}, "rejections_to_reject", "less than or equal to 20"),
    ({"deadline_minutes": "0"}, "deadline_minutes", "greater than or equal to 1"),
    ({"deadline_minutes": "525601"}, "deadline_minutes", "less than or equal to 525600"),
    ({"deadline_minutes": "9" * 40}, "deadline_minutes", "less than or equal to 525600"),
    ({"remind_minutes_before": "5"}, "remind_minutes_before", "set the deadline too"),
    ({"deadline_minutes": "60", "remind_minutes_before": "60"}, "remind_minutes_before",
     "A reminder must come before the deadline: less than 60 minutes before it."),
    ({"deadline_minutes": "60", "escalate_minutes_before": "90", "escalate_to": "{security}"},
     "escalate_minutes_before", "An escalation must come before the deadline"),
    ({"deadline_minutes": "60", "escalate_minutes_before": "5"}, "escalate_to",
     "Choose the team to escalate to."),
    ({"deadline_minutes": "60", "escalate_to": "{security}"}, "escalate_minutes_before",
     "Say how many minutes before the deadline to escalate."),
    ({"deadline_minutes": "60", "escalate_minutes_before": "5", "escalate_to": "{team}"},
     "escalate_to", "Escalate to another existing team (not Platform itself)."),
    ({"escalate_to": "999999"}, "escalate_to", "Escalate to another existing team"),
    ({"default_action": "reject"}, "default_action", "needs a deadline"),
    ({"default_action": "explode", "deadline_minutes": "5"}, "default_action",
     "Select a valid choice"),
    ({"assign_user": "{dave}"}, "assign_user", "Assign the gate to a member of Platform"),
    ({"assign_user": "abc"}, "assign_user", "Assign the gate to a member of Platform"),
    ({"assign_team": "999999"}, "assign_team", "No such team."),
])
def test_bad_input(team, security, changes, field, message):
    ids = {"{security}": str(security.pk), "{team}": str(team.pk),
           "{dave}": str(Membership.objects.get(team=security).user_id)}
    found = errors(team, **{k: ids.get(v, v) for k, v in changes.items()})
    assert field in found, found
    assert message in found[field], found[field]


def test_approvals_up_to_the_number_of_approvers(team, carol):
    assert form(team, required_approvals="2").is_valid()
    Membership.objects.filter(team=team, user=carol).update(role=Role.APPROVER)
    assert form(team, required_approvals="3").is_valid()


def test_assign_to_any_team_and_escalate_to_another(team, security):
    f = form(team, assign_team=str(team.pk), deadline_minutes="30",
             escalate_minutes_before="10", escalate_to=str(security.pk))
    assert f.is_valid(), f.errors


def test_a_duplicate_name_is_refused_whatever_its_case_but_not_the_rule_itself(team):
    rule = GateRule.objects.create(team=team, name="Merges")
    assert "has a rule named" in errors(team, name="MERGES")["name"]
    assert GateRuleForm({**VALID, "name": "merges"}, instance=rule, team=team).is_valid()


# --- the pages --------------------------------------------------------------------------
def test_create_a_rule_from_the_page(team, alice, alice_client):
    url = reverse("team_rule_new", args=[team.pk])
    page = alice_client.get(url)
    assert page.status_code == 200 and 'name="required_approvals"' in page.content.decode()
    response = alice_client.post(url, {**VALID, "gate": "plan_approval"})
    assert response.status_code == 302 and response.url.endswith("#rules")
    rule = GateRule.objects.get()
    assert (rule.team, rule.created_by, rule.position, rule.gate) == \
        (team, alice, 0, "plan_approval")
    again = alice_client.post(url, {**VALID, "gate": "plan_approval"})  # resubmitted
    assert again.status_code == 400 and "has a rule named" in again.content.decode()
    alice_client.post(url, {**VALID, "name": "Second"})
    assert list(GateRule.objects.values_list("name", "position")) == \
        [("Merges", 0), ("Second", 1)]


def test_bad_input_on_the_page_is_400_and_saves_nothing(team, alice_client):
    url = reverse("team_rule_new", args=[team.pk])
    response = alice_client.post(url, {**VALID, "required_approvals": "5",
                                       "paths": HUGE})
    html = response.content.decode()
    assert response.status_code == 400
    assert "The rule was not saved" in html and "Platform has 2 approvers" in html
    assert "10,000 characters long" in html
    assert not GateRule.objects.exists()
    assert alice_client.post(url, {}).status_code == 400  # empty
    assert not GateRule.objects.exists()


def test_edit_a_rule_and_bad_edits_change_nothing(team, alice_client):
    rule = GateRule.objects.create(team=team, name="Merges", gate="merge_request")
    url = reverse("team_rule_edit", args=[team.pk, rule.pk])
    bad = alice_client.post(url, {**VALID, "name": "Renamed", "deadline_minutes": "10",
                                  "remind_minutes_before": "20"})
    assert bad.status_code == 400
    rule.refresh_from_db()
    assert (rule.name, rule.deadline_minutes) == ("Merges", None)  # nothing half-saved
    good = alice_client.post(url, {**VALID, "name": "Renamed", "gate": "merge_request",
                                   "deadline_minutes": "10", "default_action": "approve"})
    assert good.status_code == 302
    rule.refresh_from_db()
    assert (rule.name, rule.deadline_minutes, rule.default_action) == \
        ("Renamed", 10, "approve")


def test_another_teams_rule_is_404_here(team, security, alice_client):
    theirs = GateRule.objects.create(team=security, name="Theirs")
    for name in ("team_rule_edit", "team_rule_delete", "team_rule_move"):
        url = reverse(name, args=[team.pk, theirs.pk])
        assert alice_client.post(url, {**VALID, "direction": "up"}).status_code == 404, name
    assert GateRule.objects.get(pk=theirs.pk).name == "Theirs"


def test_move_up_and_down_and_delete(team, alice_client):
    a, b, c = (GateRule.objects.create(team=team, name=n, position=p)
               for p, n in ((0, "A"), (5, "B"), (9, "C")))

    def order():
        return list(GateRule.objects.filter(team=team).order_by("position", "pk")
                    .values_list("name", flat=True))

    move = lambda rule, d: alice_client.post(  # noqa: E731
        reverse("team_rule_move", args=[team.pk, rule.pk]), {"direction": d})
    assert move(c, "up").status_code == 302 and order() == ["A", "C", "B"]
    assert move(a, "down").status_code == 302 and order() == ["C", "A", "B"]
    assert move(c, "up").status_code == 302 and order() == ["C", "A", "B"]  # first already
    html = alice_client.get(reverse("team", args=[team.pk])).content.decode()
    assert "The rule C is first already." in html
    assert html.index("rule-" + str(c.pk)) < html.index("rule-" + str(a.pk))
    bad = move(a, "sideways")
    assert bad.status_code == 400 and "Move a rule up or down" in bad.content.decode()
    assert order() == ["C", "A", "B"]
    delete = reverse("team_rule_delete", args=[team.pk, a.pk])
    assert alice_client.post(delete).status_code == 302 and order() == ["C", "B"]
    assert alice_client.post(delete).status_code == 404  # resubmitted
