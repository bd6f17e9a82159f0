"""A team's pull-request review whose rule asks for two approvals of the verdict (issue 35):
the required "Quorum" status turns green only when the second approver approves, and a
finalised verdict of such a review cannot be reopened (one person would decide it again)."""

from __future__ import annotations

import pytest

from agents_app.gates.models import GateRule
from agents_app.models import Run
from agents_app.teams.models import Membership, Team
from reviews_app.models import Review
from reviews_app.triage import service as triage
from tests.pr_hosts_support import BASE, ORDERS_FIXED, hosts, make_flow

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["hosts", "make_flow"]  # the fixtures


def test_the_status_is_green_only_after_two_approvals_of_the_verdict(make_flow, alice, bob):
    team = Team.objects.create(name="Shop")
    for user in (alice, bob):
        Membership.objects.create(team=team, user=user, role="approver")
    GateRule.objects.create(team=team, name="Two on verdicts", pattern="code_review",
                            gate="triage", required_approvals=2)
    flow = make_flow("github", team=team)
    flow.hosts.open_pull(1, repo=flow.repo, base=BASE, head={"shop/orders.py": ORDERS_FIXED},
                         title="Orders")
    _, out = flow.deliver("opened")
    review = flow.round(out)
    assert review.run.team == team and review.proposed_verdict == "approve", review.notes
    flow.finalise(review, alice)  # one approval of two
    assert Review.objects.get(pk=review.pk).final_verdict == ""
    assert Run.objects.get(pk=review.run_id).status == "awaiting_triage"
    assert not flow.hosts.required_green(1, repo=flow.repo)
    triage.finalise(review, bob, action="accept", seq=Run.objects.get(pk=review.run_id).stage_seq)
    from agents_app import engine

    engine.run_inline(review.run_id)
    flow.drain()
    assert Review.objects.get(pk=review.pk).final_verdict == "approve"
    assert flow.hosts.required_green(1, repo=flow.repo)
    with pytest.raises(triage.Refused, match="2 approvals of the verdict"):
        triage.reopen(Review.objects.get(pk=review.pk), alice)
