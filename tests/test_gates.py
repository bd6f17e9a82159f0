"""Shared gates (issue 35): a team's run is decided by its approvers; a rule may ask for k of
n approvals bound to the hash of what the gate shows (an edit resets them), exclude the
initiator, need several rejections; deadlines remind, escalate and then decide by policy;
every step is in the gate's audit, on the page and in its exports."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from agents_app import engine
from agents_app.gates import core, matching
from agents_app.gates.models import GateAudit, GateOpening, GateRule, GateVote
from agents_app.models import PlanVersion, Run, Status
from agents_app.notify import deliver
from agents_app.notify.models import Notification
from agents_app.patterns.base import Decision, InvalidDecision
from agents_app.teams.models import Membership, Team
from tests.conftest import OFFLINE, PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_delivery(monkeypatch):
    """Deliveries are queued after commit; these tests read the outbox rows instead."""
    monkeypatch.setattr(deliver, "send", lambda ids: None)


@pytest.fixture
def people(django_user_model):
    make = django_user_model.objects.create_user
    users = {name: make(name, password=PASSWORD, email=f"{name}@example.org")
             for name in ("alice", "bob", "carol", "dave", "erin")}
    platform = Team.objects.create(name="Platform")
    security = Team.objects.create(name="Security")
    for name, team, role in (("alice", platform, "approver"), ("bob", platform, "approver"),
                             ("carol", platform, "approver"), ("dave", platform, "member"),
                             ("erin", security, "approver")):
        Membership.objects.create(team=team, user=users[name], role=role)
    users["platform"], users["security"] = platform, security
    return users


def gated(owner, team=None, task="Collect logs, then find the error.") -> Run:
    run = engine.create_run(owner, "plan_execute", task, options={}, models=OFFLINE,
                            max_cost_usd=Decimal("1"), max_tokens=10_000, enqueue=False,
                            team=team)
    return engine.run_inline(run.pk)


def rule(team, **fields) -> GateRule:
    return GateRule.objects.create(team=team, name=fields.pop("name", "Plans"), **fields)


def approve(run, user, *, steps=None, seq=None, channel="page"):
    run.refresh_from_db()
    return engine.decide(run, user, run.stage_seq if seq is None else seq,
                         Decision(action="approve", edits=steps, author=user.username),
                         enqueue=False, channel=channel)


def reject(run, user, feedback="Not like this."):
    run.refresh_from_db()
    return engine.decide(run, user, run.stage_seq, Decision(
        action="reject", feedback=feedback, author=user.username), enqueue=False)


def audit_of(run) -> list[tuple[str, str, int]]:
    return list(GateAudit.objects.filter(run=run).values_list("what", "actor_name", "approvals"))


# --- a personal run and a team's run without a rule ----------------------------------------
def test_a_personal_gate_is_recorded_and_decided_by_its_owner_as_before(people):
    run = gated(people["alice"])
    stop = GateOpening.objects.get(run=run)
    assert stop.required == 1 and stop.team is None and stop.closed_at is None
    assert stop.content_hash == core.content_hash(run)
    approve(run, people["alice"])
    run.refresh_from_db()
    assert not run.is_waiting
    stop.refresh_from_db()
    assert stop.closed_at is not None and stop.outcome == "approve"
    rows = list(GateAudit.objects.filter(run=run).values_list("what", "actor_name", "channel",
                                                               "content_hash"))
    assert rows[0][0] == "opened" and rows[-1][:3] == ("decided", "alice", "page")
    assert rows[-1][3] == stop.content_hash


def test_a_team_gate_is_decided_by_any_approver_not_by_a_plain_member(people):
    run = gated(people["alice"], people["platform"])
    with pytest.raises(core.NotAllowed):
        approve(run, people["dave"])  # a member sees it, does not decide it
    with pytest.raises(core.NotAllowed):
        approve(run, people["erin"])  # another team's approver
    run.refresh_from_db()
    assert run.is_waiting
    approve(run, people["bob"])
    run.refresh_from_db()
    assert not run.is_waiting and run.approvals.get().user == people["bob"]


# --- k of n --------------------------------------------------------------------------------
def test_two_approvals_from_two_people_are_needed_and_a_second_click_counts_once(people):
    rule(people["platform"], required_approvals=2)
    run = gated(people["alice"], people["platform"])
    after = approve(run, people["alice"])
    assert after.vote_note.startswith("alice approved (1 of 2 approvals)")
    again = approve(run, people["alice"], channel="inbox")  # her second click replaces the first
    assert "1 of 2" in again.vote_note
    run.refresh_from_db()
    assert run.is_waiting
    stop = GateOpening.objects.get(run=run)
    assert core.tally(stop).approvals == ["alice"]
    assert set(core.tally(stop).left) == {"bob", "carol"}
    approve(run, people["bob"])
    run.refresh_from_db()
    assert not run.is_waiting and run.status != Status.FAILED
    stop.refresh_from_db()
    assert stop.closed_at is not None
    whats = [w for w, _, _ in audit_of(run)]
    assert whats == ["opened", "approved", "approved", "approved", "decided"]
    assert audit_of(run)[-2] == ("approved", "bob", 2)



def test_a_person_deciding_a_team_gate_tells_the_other_deciders(people):
    """QA (issue 35, the team browser test): "A gate I was asked about is decided" was sent
    only when a deadline decided; the people asked are told when a person decides it too (the
    one who decided is not)."""
    rule(people["platform"], required_approvals=2)
    run = gated(people["alice"], people["platform"])
    approve(run, people["alice"])
    assert not Notification.objects.filter(kind="decided").exists()
    approve(run, people["bob"])
    told = Notification.objects.filter(kind="decided", opening__run=run)
    assert {n.recipient.username for n in told} == {"alice", "carol"}
    assert all("bob decided it: approve." in n.body for n in told)


def test_the_initiator_is_excluded_when_the_rule_says_so(people):
    rule(people["platform"], required_approvals=2, exclude_initiator=True)
    run = gated(people["alice"], people["platform"])
    with pytest.raises(core.NotAllowed, match="asks for the approval of others"):
        approve(run, people["alice"])
    stop = GateOpening.objects.get(run=run)
    assert "alice" not in core.tally(stop).left
    approve(run, people["bob"])
    approve(run, people["carol"])
    run.refresh_from_db()
    assert not run.is_waiting


def test_the_inbox_s_tallies_in_one_go_are_each_stop_s_tally(people):
    rule(people["platform"], required_approvals=2, exclude_initiator=True,
         assign_user=people["dave"], assign_team=people["security"])
    shared = gated(people["alice"], people["platform"])
    approve(shared, people["bob"])
    rule(people["security"], rejections_to_reject=2)
    reject(gated(people["erin"], people["security"]), people["erin"])
    gated(people["carol"], people["platform"])
    gated(people["dave"])
    stops = list(GateOpening.objects.filter(closed_at__isnull=True).select_related("run"))
    assert len(stops) == 4 and any(core.tally(op).rejections for op in stops)
    assert core.tallies(stops) == {op.pk: core.tally(op) for op in stops}
    assert core.tallies(stops)[GateOpening.objects.get(run=shared).pk].left == [
        "carol", "dave", "erin"]


def test_an_edit_after_the_first_approval_resets_it_and_tells_the_approver(people):
    rule(people["platform"], required_approvals=2)
    run = gated(people["alice"], people["platform"])
    seq_seen = run.stage_seq
    approve(run, people["bob"])
    steps = list(run.state["plan"]["steps"]) + ["Write down what was found."]
    after = approve(run, people["carol"], steps=steps)
    assert "1 of 2" in after.vote_note
    run.refresh_from_db()
    assert run.is_waiting and run.stage_seq == seq_seen + 1
    assert run.state["plan"]["steps"] == steps
    assert PlanVersion.objects.filter(run=run).latest("version").author == "carol"
    stop = GateOpening.objects.get(run=run)
    assert stop.seq == run.stage_seq and stop.content_hash == core.content_hash(run)
    bob_vote = GateVote.objects.get(opening=stop, user=people["bob"])
    assert bob_vote.voided_at is not None and "edited by carol" in bob_vote.void_reason
    assert core.tally(stop).approvals == ["carol"]
    reset = Notification.objects.filter(kind="reset", recipient=people["bob"])
    assert reset.exists() and "carol" in reset.first().body
    # Bob's page still shows the old plan: his approval from it is refused as out of date.
    with pytest.raises(engine.StaleDecision):
        approve(run, people["bob"], seq=seq_seen)
    approve(run, people["bob"])
    run.refresh_from_db()
    assert not run.is_waiting
    assert run.approvals.filter(action="approve").get().plan_version == \
        PlanVersion.objects.filter(run=run).latest("version").version
    assert "edited" in [w for w, _, _ in audit_of(run)]


def test_one_rejection_rejects_unless_the_rule_asks_for_more(people):
    rule(people["platform"], required_approvals=2, rejections_to_reject=2)
    run = gated(people["alice"], people["platform"])
    version = run.state["plan"]["version"]
    after = reject(run, people["bob"])
    assert "1 of 2 rejections" in after.vote_note
    run.refresh_from_db()
    assert run.is_waiting
    reject(run, people["carol"], "Too vague.")
    run.refresh_from_db()
    assert not run.is_waiting or run.state["plan"]["version"] > version  # back to the planner
    assert run.approvals.filter(action="reject").count() == 1


def test_an_empty_edit_at_a_two_approval_gate_is_refused_and_changes_nothing(people):
    rule(people["platform"], required_approvals=2)
    run = gated(people["alice"], people["platform"])
    seq = run.stage_seq
    with pytest.raises(InvalidDecision):
        approve(run, people["bob"], steps=[])
    run.refresh_from_db()
    assert run.stage_seq == seq and not GateVote.objects.exists()


# --- deadlines -----------------------------------------------------------------------------
def test_a_deadline_reminds_escalates_then_takes_its_default_once(people):
    rule(people["platform"], deadline_minutes=60, remind_minutes_before=30,
         escalate_minutes_before=10, escalate_to=people["security"], default_action="reject")
    run = gated(people["alice"], people["platform"])
    stop = GateOpening.objects.get(run=run)
    assert stop.deadline_at - stop.opened_at == pytest.approx(timedelta(minutes=60),
                                                              abs=timedelta(seconds=5))
    now = timezone.now()
    assert core.sweep_timers(now)["reminded"] == 0
    assert core.sweep_timers(now + timedelta(minutes=31))["reminded"] == 1
    assert core.sweep_timers(now + timedelta(minutes=31))["reminded"] == 0  # fires once
    assert Notification.objects.filter(kind="reminder", recipient=people["bob"]).exists()
    with pytest.raises(core.NotAllowed):
        approve(run, people["erin"])  # not yet escalated to her team
    assert core.sweep_timers(now + timedelta(minutes=51))["escalated"] == 1
    assert Notification.objects.filter(kind="escalated", recipient=people["erin"]).exists()
    version = run.state["plan"]["version"]
    fired = core.sweep_timers(now + timedelta(minutes=61))
    assert fired["defaulted"] == 1
    run.refresh_from_db()
    assert run.state.get("feedback", "").startswith("Nobody decided by the deadline")
    assert run.state["plan"]["version"] == version and not run.is_waiting
    stop.refresh_from_db()
    assert stop.closed_at is not None and stop.outcome == "reject"
    last = GateAudit.objects.filter(run=run).last()
    assert (last.what, last.channel, last.actor_name) == ("defaulted", "timer", "")
    assert core.sweep_timers(now + timedelta(minutes=90))["defaulted"] == 0


def test_an_escalated_gate_may_be_decided_by_the_other_teams_approver(people):
    rule(people["platform"], deadline_minutes=60, escalate_minutes_before=30,
         escalate_to=people["security"])
    run = gated(people["alice"], people["platform"])
    core.sweep_timers(timezone.now() + timedelta(minutes=31))
    approve(run, people["erin"])
    run.refresh_from_db()
    assert not run.is_waiting


def test_a_cancel_default_cancels_and_a_decided_gate_never_fires(people):
    rule(people["platform"], deadline_minutes=5, default_action="cancel")
    run = gated(people["alice"], people["platform"])
    core.sweep_timers(timezone.now() + timedelta(minutes=6))
    run.refresh_from_db()
    assert run.status == Status.CANCELLED and "deadline" in run.events.last().message
    other = gated(people["alice"], people["platform"], task="Another task.")
    approve(other, people["bob"])
    assert core.sweep_timers(timezone.now() + timedelta(minutes=6))["defaulted"] == 0


def test_a_stop_the_engine_did_not_record_is_recorded_by_the_sweep(people):
    run = gated(people["alice"], people["platform"])
    GateOpening.objects.filter(run=run).delete()
    assert core.sweep_timers()["opened"] == 1
    assert GateOpening.objects.filter(run=run, closed_at__isnull=True).count() == 1


# --- rules and CODEOWNERS ------------------------------------------------------------------
def test_the_first_matching_rule_applies(people):
    team = people["platform"]
    GateRule.objects.create(team=team, name="Other pattern", position=0, pattern="debate")
    GateRule.objects.create(team=team, name="Python only", position=1, paths="*.py\n")
    GateRule.objects.create(team=team, name="Acme repos", position=2, repository="acme/*")
    GateRule.objects.create(team=team, name="Fallback", position=3)
    facts = matching.Facts("plan_execute_review", "merge_request", "acme/widgets",
                           paths=["docs/readme.md"])
    assert matching.rule_for(team.pk, facts).name == "Acme repos"
    facts.paths.append("src/app.py")
    assert matching.rule_for(team.pk, facts).name == "Python only"
    facts.repository, facts.paths = "other/thing", ["a.md"]
    assert matching.rule_for(team.pk, facts).name == "Fallback"
    assert matching.rule_for(None, facts) is None


def test_codeowners_is_read_from_the_base_branch_not_the_agents_branch(people, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (repo / ".github").mkdir()
    (repo / ".github" / "CODEOWNERS").write_text("*.py @bob\n/docs/ @Security\n"
                                                "*.sh nobody@example.org\n")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "owners")
    git("checkout", "-qb", "agent")
    (repo / ".github" / "CODEOWNERS").write_text("* @dave\n")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "take over")
    text = matching.read_codeowners(str(repo), "main")
    owners = matching.owners_of(text, ["src/app.py", "docs/a.md", "run.sh"])
    assert [u.username for u in owners.users] == ["bob"]
    assert [t.name for t in owners.teams] == ["Security"]
    assert owners.unknown == ["nobody@example.org"]
    assert matching.read_codeowners(str(repo), "--output=x") == ""  # never an option
    assert matching.read_codeowners(str(tmp_path / "none"), "main") == ""


# --- the audit on the page and in its exports ----------------------------------------------
def test_the_audit_is_on_the_page_and_exported_for_members_only(client, people):
    rule(people["platform"], required_approvals=2)
    run = gated(people["alice"], people["platform"], task="=HYPERLINK(\"x\")")
    approve(run, people["bob"])
    for name in ("alice", "bob", "dave"):  # owner, approver, member
        client.force_login(people[name])
        page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
        assert "Approvals: <strong>1 of 2</strong>" in page and "bob ✓" in page
        panel = client.get(reverse("gate_panel", args=[run.pk]))
        assert panel.status_code == 200 and "approved" in panel.content.decode()
        data = json.loads(client.get(reverse("gate_audit_json", args=[run.pk])).content)
        assert [r["what"] for r in data["audit"]] == ["opened", "approved"]
        assert data["audit"][1]["who"] == "bob" and data["audit"][1]["approvals"] == 1
        rows = list(csv.reader(io.StringIO(client.get(
            reverse("gate_audit_csv", args=[run.pk])).content.decode())))
        assert rows[0][:5] == ["run", "gate", "stop", "at", "what"] and len(rows) == 3
    client.force_login(people["erin"])  # another team
    for name in ("run_detail", "gate_panel", "gate_audit_json", "gate_audit_csv"):
        assert client.get(reverse(name, args=[run.pk])).status_code == 404, name
    client.logout()
    assert client.get(reverse("gate_audit_csv", args=[run.pk])).status_code == 302


def test_a_plain_member_posting_a_decision_is_refused_with_403(client, people):
    run = gated(people["alice"], people["platform"])
    client.force_login(people["dave"])
    response = client.post(reverse("plan_decision", args=[run.pk]), {
        "action": "approve", "seq": run.stage_seq, "steps": run.state["plan"]["steps"]})
    assert response.status_code == 403
    run.refresh_from_db()
    assert run.is_waiting and not GateVote.objects.exists()


def test_a_gate_is_handed_on_by_an_approver_recorded_and_told(client, people):
    run = gated(people["alice"], people["platform"])
    stop = GateOpening.objects.get(run=run)
    client.force_login(people["bob"])
    response = client.post(reverse("gate_assign", args=[run.pk]),
                           {"stop": stop.pk, "to": f"u:{people['carol'].pk}"})
    assert response.status_code == 200 and "carol" in response.content.decode()
    stop.refresh_from_db()
    assert stop.assignee_user == people["carol"]
    assert GateAudit.objects.filter(opening=stop, what="reassigned", actor_name="bob").exists()
    assert Notification.objects.filter(kind="assigned", recipient=people["carol"]).exists()
    # Bad input: someone outside the team, a stale stop, a member who may not decide.
    bad = client.post(reverse("gate_assign", args=[run.pk]),
                      {"stop": stop.pk, "to": f"u:{people['erin'].pk}"})
    assert bad.status_code == 400 and "Choose a member" in bad.content.decode()
    stale = client.post(reverse("gate_assign", args=[run.pk]), {"stop": "0", "to": "x"})
    assert stale.status_code == 409
    unread = client.post(reverse("gate_assign", args=[run.pk]), {"stop": "abc", "to": "x"})
    assert unread.status_code == 400 and "could not be read" in unread.content.decode()
    client.force_login(people["dave"])
    assert client.post(reverse("gate_assign", args=[run.pk]),
                       {"stop": stop.pk, "to": f"u:{people['bob'].pk}"}).status_code == 403
    stop.refresh_from_db()
    assert stop.assignee_user == people["carol"]


def test_the_gate_opening_tells_the_teams_approvers_by_the_outbox(people):
    run = gated(people["alice"], people["platform"])
    told = set(Notification.objects.filter(kind="opened", opening__run=run)
               .values_list("recipient__username", flat=True))
    assert told == {"alice", "bob", "carol"}  # the approvers; not Dave (member), not Erin


def test_an_escalated_teams_approver_sees_and_decides_the_run_from_its_page(client, people):
    rule(people["platform"], deadline_minutes=60, escalate_minutes_before=30,
         escalate_to=people["security"])
    run = gated(people["alice"], people["platform"])
    client.force_login(people["erin"])
    assert client.get(reverse("run_detail", args=[run.pk])).status_code == 404
    core.sweep_timers(timezone.now() + timedelta(minutes=31))
    assert client.get(reverse("run_detail", args=[run.pk])).status_code == 200
    inbox = client.get(reverse("inbox")).content.decode()
    assert f'id="gate-{run.pk}"' in inbox
    response = client.post(reverse("plan_decision", args=[run.pk]), {
        "action": "approve", "seq": run.stage_seq, "steps": run.state["plan"]["steps"]})
    assert response.status_code == 200
    run.refresh_from_db()
    assert not run.is_waiting
    # Once decided, the run is Platform's again: Erin no longer sees it.
    assert client.get(reverse("run_detail", args=[run.pk])).status_code == 404


def test_a_decision_after_following_a_notifications_link_is_audited_as_through_it(
        client, people):
    from agents_app.notify import links

    run = gated(people["alice"], people["platform"])
    stop = GateOpening.objects.get(run=run)
    url = links.link_for(people["bob"], stop)
    client.force_login(people["bob"])
    followed = client.get(url.removeprefix("http://127.0.0.1:8000"))
    assert followed.status_code == 302 and followed["Location"].endswith(f"/runs/{run.pk}/#gate")
    client.post(reverse("plan_decision", args=[run.pk]), {
        "action": "approve", "seq": run.stage_seq, "steps": run.state["plan"]["steps"]})
    last = GateAudit.objects.filter(run=run).last()
    assert (last.what, last.actor_name, last.channel) == ("decided", "bob", "link")


def test_a_page_from_before_an_edit_is_told_the_gate_was_edited(client, people):
    rule(people["platform"], required_approvals=2)
    run = gated(people["alice"], people["platform"])
    old_seq, old_steps = run.stage_seq, list(run.state["plan"]["steps"])
    approve(run, people["carol"], steps=old_steps + ["Say what was found."])
    client.force_login(people["bob"])
    response = client.post(reverse("plan_decision", args=[run.pk]), {
        "action": "approve", "seq": old_seq, "steps": old_steps})
    assert response.status_code == 409
    assert "was edited since it was loaded" in response.content.decode()
    assert PlanVersion.objects.filter(run=run).latest("version").reason.startswith(
        "Edited at the gate")
