"""The required "Quorum" status on each provider, end to end in Chromium (issue 31): a signed
webhook starts a round in the real worker (Daphne, Celery, Redis, the offline model with
ruff and bandit), the status the worker posts on the head commit stays pending while the
findings wait, and turns green only when a person finalises an approving verdict on the
review page. The code host is the fake provider server; branch protection is its
``required_green`` (the latest "Quorum" status, or check run, on the head is a success)."""

from __future__ import annotations

import json

import httpx
import pytest

from reviews_app.models import CommitStatus, Connection, Review
from tests.conftest import STACK_CONN_SECRET, STACK_CONN_TOKEN, sign_in
from tests.fake_hosts import FakeHosts
from tests.stack import wait_until
from tests.webhook_helpers import forgejo_pr, github_pr, gitlab_mr, headers_for

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

REPO = "team/shop"
BASE = {"README.md": "Shop\n", "shop/__init__.py": ""}
SIZES = "def size(body):\n    return len(body)\n"
OPENED = {"github": ("pull_request", "opened"), "gitlab": ("Merge Request Hook", "open"),
          "forgejo": ("pull_request", "opened")}


def hook(base_url: str, conn: Connection, pull) -> float:
    """Send the signed "opened" webhook; returns the seconds the answer took."""
    event, action = OPENED[conn.provider]
    if conn.provider == "gitlab":
        payload = gitlab_mr(action, iid=pull.number, sha=pull.head_sha, repo=REPO)
    elif conn.provider == "forgejo":
        payload = forgejo_pr(action, number=pull.number, sha=pull.head_sha, repo=REPO)
    else:
        payload = github_pr(action, number=pull.number, sha=pull.head_sha, repo=REPO)
    body = json.dumps(payload).encode()
    answer = httpx.post(f"{base_url}/webhooks/{conn.provider}/{conn.hook_id}/", content=body,
                        headers={**headers_for(conn.provider, body, event,
                                               secret=STACK_CONN_SECRET),
                                 "Content-Type": "application/json"}, timeout=10)
    assert answer.status_code == 202, answer.text
    return answer.elapsed.total_seconds()


@pytest.mark.parametrize("provider", ["github", "gitlab", "forgejo"])
def test_the_required_status_turns_green_only_after_a_person_approves(
        live_stack, page, browser_alice, provider):
    with FakeHosts(token=STACK_CONN_TOKEN) as hosts:
        hosts.add_repo(REPO)
        pull = hosts.open_pull(1, base=BASE, head={"shop/sizes.py": SIZES}, title="Sizes")
        conn = Connection.objects.create(
            owner=browser_alice, provider=provider, repository=REPO,
            api_url=hosts.api_url(provider), token_env="QUORUM_CONN_E2E_TOKEN",
            secret_env="QUORUM_CONN_E2E_SECRET")
        assert hook(live_stack, conn, pull) < 1.0

        def at_triage():
            r = Review.objects.filter(pull_request__connection=conn).select_related(
                "run").first()
            return r if r and r.run.status == "awaiting_triage" else None
        wait_until(at_triage, timeout=120, what="the round at its triage gate")
        review = at_triage()
        assert review.proposed_verdict == "approve", review.notes
        wait_until(lambda: CommitStatus.objects.filter(review=review, state="triage")
                   .exclude(synced_state="").exists(), timeout=60,
                   what="the waiting-for-triage status posted")
        states = hosts.status_states(pull.head_sha)
        assert states and not hosts.required_green(1), states

        sign_in(page, live_stack)
        page.goto(f"{live_stack}{review.get_absolute_url()}")
        status = page.locator("#commit-status")
        assert "Waiting for triage" in status.inner_text()
        panel = page.locator("#verdict-panel")
        if panel.locator("button", has_text="Accept all remaining").count():
            panel.locator("button", has_text="Accept all remaining").click()
            page.wait_for_selector("#verdict-panel p.notice")
        panel.locator("button[value=accept]").click()
        page.wait_for_selector("#verdict-panel .decided")
        wait_until(lambda: hosts.required_green(1), timeout=60,
                   what="the required status turning green")
        page.reload()
        assert "Approved" in page.locator("#commit-status").inner_text()
        final = hosts.status_states(pull.head_sha)
        assert final[-1] in ("success", "completed:success")
        assert "success" not in final[:-1] and "completed:success" not in final[:-1], final
        assert page.errors == []
