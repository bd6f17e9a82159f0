"""The pull-request flow on GitLab and Forgejo/Gitea, through the shared stack (Daphne, the
Celery worker, Redis, the offline model with ruff and bandit) and the fake provider server
speaking each provider's API: a signed webhook starts a round, triage finalises it, the
accepted findings are published with the summary; a push is reviewed incrementally and its
publication adds only the new finding's comment and updates the summary in place. (GitHub's
run of the same flow, in Chromium: tests/test_pr_e2e_browser.py.)"""

from __future__ import annotations

import json

import httpx
import pytest

from agents_app.models import Run
from reviews_app.models import Connection, Publication, Review
from reviews_app.triage import service as triage
from tests.conftest import STACK_CONN_SECRET, STACK_CONN_TOKEN
from tests.fake_hosts import FakeHosts
from tests.stack import wait_until
from tests.webhook_helpers import forgejo_pr, gitlab_mr, headers_for

# Marked browser too: it uses the shared stack, which runs after every other integration test.
pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

REPO = "team/shop"
BASE = {"README.md": "Shop\n"}
ORDERS = ("import sqlite3\n\n\ndef order(db, oid):\n"
          '    return db.execute("select * from orders where id = %s" % oid)\n')
CALC = "def calc(expr):\n    return eval(expr)\n"


def hook(base_url: str, conn: Connection, action: str, pull, oldrev: str = "") -> None:
    if conn.provider == "gitlab":
        payload = gitlab_mr(action, iid=pull.number, sha=pull.head_sha, repo=REPO,
                            **({"oldrev": oldrev} if oldrev else {}))
        event = "Merge Request Hook"
    else:
        payload = forgejo_pr(action, number=pull.number, sha=pull.head_sha, repo=REPO)
        event = "pull_request"
    body = json.dumps(payload).encode()
    answer = httpx.post(f"{base_url}/webhooks/{conn.provider}/{conn.hook_id}/", content=body,
                        headers={**headers_for(conn.provider, body, event,
                                               secret=STACK_CONN_SECRET),
                                 "Content-Type": "application/json"}, timeout=10)
    assert answer.status_code == 202, answer.text


def at_triage(pr_round: int) -> Review:
    def ready():
        r = Review.objects.filter(pr_round=pr_round).select_related("run").first()
        return r if r and r.run.status == "awaiting_triage" else None
    wait_until(ready, timeout=120, what=f"round {pr_round} at its triage gate")
    return ready()


def accept_and_publish(review: Review, user) -> Publication:
    triage.settle_rest(review, "accepted", user)
    triage.finalise(review, user, action="accept", seq=Run.objects.get(pk=review.run_id).stage_seq)

    def done():
        p = Publication.objects.filter(review=review).first()
        return p if p and p.status in ("published", "failed") else None
    wait_until(done, timeout=60, what="the publication")
    pub = done()
    assert pub.status == "published", pub.last_error
    return pub


@pytest.mark.parametrize("provider", ["gitlab", "forgejo"])
def test_webhook_to_publication_and_an_incremental_round(live_stack, alice, provider):
    with FakeHosts(token=STACK_CONN_TOKEN) as hosts:
        hosts.add_repo(REPO)
        pull = hosts.open_pull(1, base=BASE, head={"shop/orders.py": ORDERS})
        conn = Connection.objects.create(
            owner=alice, provider=provider, repository=REPO, api_url=hosts.api_url(provider),
            token_env="QUORUM_CONN_E2E_TOKEN", secret_env="QUORUM_CONN_E2E_SECRET")

        hook(live_stack, conn, "open" if provider == "gitlab" else "opened", pull)
        first = at_triage(1)
        assert first.pull_request.number == 1 and first.head_sha == pull.head_sha
        [sql] = [f for f in first.findings.filter(kept=True) if "B608" in f.rules]
        accept_and_publish(first, alice)
        [summary] = [c for c in pull.comments if "quorum:summary" in c["body"]]
        inline = list(pull.review_comments)
        prints = {f.fingerprint for f in first.findings.filter(kept=True)}
        assert any(sql.fingerprint in c["body"] for c in inline)
        assert all(any(fp in c["body"] for fp in prints) for c in inline) and len(inline) <= len(prints)
        paths = {c["position"]["new_path"] if provider == "gitlab" else c["path"] for c in inline}
        assert paths == {"shop/orders.py"}

        first_head = pull.head_sha
        hosts.push(1, {"shop/calc.py": CALC})
        hook(live_stack, conn, "update" if provider == "gitlab" else "synchronized",
             hosts.pull(1), oldrev=first_head)
        second = at_triage(2)
        assert second.from_sha == first_head and second.previous == first
        new = second.findings.filter(kept=True, carried_from="")
        assert {f.file for f in new} == {"shop/calc.py"}  # only the new commit's code
        accept_and_publish(second, alice)
        # Only the new findings got comments: the carried ones were on the pull request already.
        bodies = [c["body"] for c in pull.review_comments]
        assert len(bodies) == len(inline) + len(new)
        assert all(sum(f.fingerprint in b for b in bodies) == 1 for f in new)
        assert sum(sql.fingerprint in b for b in bodies) == 1
        assert {c["id"] for c in pull.comments if "quorum:summary" in c["body"]} == \
            {summary["id"]}
        assert "round 2" in next(c["body"] for c in pull.comments
                                 if c["id"] == summary["id"]).lower()
