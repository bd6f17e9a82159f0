"""A pull request from webhook to published review and back, as a team would use Quorum:
everything of ours runs for real (Daphne, the Celery worker, Redis, the offline model with
ruff and bandit, Chromium), and the code host is the fake provider server over HTTP.

Alice connects a repository through the form (token from an environment variable, webhook
secret generated and shown once), the host sends a signed "opened" webhook, the review runs
in the worker with a status comment on the pull request, Alice triages in the browser
(accepts the SQL injection, rejects the weak hash as intended) and finalises; exactly the
accepted finding is published, with the summary. Then a push fixes the injection, keeps the
hash line and adds an ``eval``: the incremental round marks the injection resolved, does not
raise the rejected hash again, and finds the ``eval``; after triage the summary comment is
updated in place and only the new finding gets a comment."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid

import httpx
import pytest

from reviews_app.models import Connection, Finding, Publication, Review
from tests.conftest import STACK_CONN_TOKEN, sign_in
from tests.fake_hosts import FakeHosts
from tests.stack import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

REPO = "octo/shop"
BASE = {"README.md": "Shop\n", "shop/__init__.py": ""}
ORDERS = ("import sqlite3\n\n\ndef order(db, oid):\n"
          '    return db.execute("select * from orders where id = %s" % oid)\n')
ORDERS_FIXED = ("import sqlite3\n\n\ndef order(db, oid):\n"
                '    return db.execute("select * from orders where id = ?", (oid,))\n')
DIGEST = "import hashlib\n\n\ndef etag(body):\n    return hashlib.md5(body).hexdigest()\n"
DIGEST_2 = DIGEST + "\n\ndef size(body):\n    return len(body)\n"
CALC = "def calc(expr):\n    return eval(expr)\n"


@pytest.fixture
def alice(browser_alice):
    browser_alice.is_staff = True  # staff may connect a self-hosted API (the fake host)
    browser_alice.save(update_fields=["is_staff"])
    return browser_alice


@pytest.fixture
def hosts():
    with FakeHosts(token=STACK_CONN_TOKEN) as fake:
        fake.add_repo(REPO)
        yield fake


def send_hook(base_url: str, conn: Connection, secret: str, action: str, pull) -> httpx.Response:
    body = json.dumps({
        "action": action, "number": pull.number, "sender": {"login": "carol"},
        "repository": {"full_name": REPO},
        "pull_request": {"number": pull.number, "draft": False, "merged": False,
                         "head": {"sha": pull.head_sha}, "base": {"sha": pull.base_sha}},
    }).encode()
    sig = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return httpx.post(f"{base_url}/webhooks/github/{conn.hook_id}/", content=body, timeout=10,
                      headers={"X-GitHub-Event": "pull_request", "X-Hub-Signature-256": sig,
                               "X-GitHub-Delivery": str(uuid.uuid4()),
                               "Content-Type": "application/json"})


def wait_for_round(pr_round: int) -> Review:
    def ready():
        r = Review.objects.filter(pr_round=pr_round).select_related("run").first()
        return r if r and r.run.status == "awaiting_triage" else None
    wait_until(ready, timeout=120, what=f"round {pr_round} of the review at its triage gate")
    return ready()


def kept(review: Review, rule: str) -> Finding:
    [f] = [f for f in review.findings.filter(kept=True) if rule in f.rules]
    return f


def finalise(page, review: Review) -> None:
    panel = page.locator("#verdict-panel")
    panel.locator("button", has_text="Accept all remaining").click()
    page.wait_for_selector("#verdict-panel p.notice")
    panel.locator("button[value=accept]").click()
    page.wait_for_selector("#verdict-panel .decided")


def published(review: Review) -> Publication:
    def done():
        p = Publication.objects.filter(review=review).first()
        return p if p and p.status == "published" else None
    wait_until(done, timeout=60, what="the publication of the review")
    return done()


def test_webhook_review_triage_publish_push_incremental(live_stack, page, alice, hosts):
    pull = hosts.open_pull(1, base=BASE, title="Orders and etags",
                           head={"shop/orders.py": ORDERS, "shop/digest.py": DIGEST})
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, live_stack)

    # 1. Connect the repository through the form: token from the environment, secret generated.
    page.goto(f"{live_stack}/connections/new/")
    page.select_option("select[name=provider]", "github")
    page.fill("input[name=repository]", REPO)
    page.fill("input[name=api_url]", hosts.api_url("github"))
    page.fill("input[name=token_env]", "QUORUM_CONN_E2E_TOKEN")
    page.locator("#connection-form button.primary").click()
    secret = page.locator("#new-secret").inner_text().strip()
    conn = Connection.objects.get(repository=REPO)
    assert len(secret) >= 20 and conn.secret_sealed and secret not in conn.secret_sealed
    page.reload()
    assert page.locator("#new-secret").count() == 0 and secret not in page.content()

    # 2. The pull request is opened: a signed webhook, answered at once, reviewed in the worker.
    assert send_hook(live_stack, conn, "not-the-secret", "opened", pull).status_code == 401
    answer = send_hook(live_stack, conn, secret, "opened", pull)
    assert answer.status_code == 202, answer.text
    first = wait_for_round(1)
    assert first.pull_request.number == 1 and first.head_sha == pull.head_sha
    [status] = pull.comments
    assert "<!-- quorum:summary -->" in status["body"]
    sql, md5 = kept(first, "B608"), kept(first, "B324")

    # 3. Triage in the browser: accept the injection, reject the hash as intended, finalise.
    page.goto(f"{live_stack}/reviews/{first.run_id}/")
    page.locator(f"#finding-{sql.key} button[value=accepted]").click()
    page.wait_for_selector(f"#finding-{sql.key} .badge.ok")
    page.locator(f"#finding-{md5.key} button.reason[value=intended]").click()
    page.wait_for_selector(f"#finding-{md5.key} .badge.bad")
    page.locator("#verdict-panel button", has_text="Reject all remaining").click()
    page.wait_for_selector("#verdict-panel p.notice")
    page.locator("#verdict-panel button[value=accept]").click()
    page.wait_for_selector("#verdict-panel .decided")
    pub = published(first)
    assert pub.result.get("comments") == 1, pub.result

    # Exactly the accepted finding is on the pull request, with the summary in the one comment.
    [review_post] = pull.reviews
    assert [c["path"] for c in review_post["comments"]] == ["shop/orders.py"]
    assert sql.fingerprint in review_post["comments"][0]["body"]
    [summary] = pull.comments
    assert summary["id"] == status["id"] and "round 1" in summary["body"].lower()
    page.reload()
    assert "Published" in page.locator("#publication-panel").inner_text()

    # 4. A push: the injection fixed, the hash line kept (its file touched), an eval added.
    pushed = hosts.push(1, {"shop/orders.py": ORDERS_FIXED, "shop/digest.py": DIGEST_2,
                            "shop/calc.py": CALC})
    assert send_hook(live_stack, conn, secret, "synchronize", hosts.pull(1)).status_code == 202
    second = wait_for_round(2)
    assert second.from_sha == first.head_sha and second.head_sha == pushed
    resolved = second.findings.get(carried_from=f"{first.run_id}:{sql.key}")
    assert not resolved.kept and resolved.resolution == "implemented"
    again = [f for f in second.findings.all() if "B324" in f.rules]
    assert all(not f.kept and "rejected by a person" in f.drop_reason for f in again), again
    assert kept(second, "B307")  # eval

    # 5. Triage round 2, finalise: the summary is updated in place, only the eval is new.
    page.goto(f"{live_stack}/reviews/{second.run_id}/")
    finalise(page, second)
    published(second)
    assert len(pull.comments) == 1 and pull.comments[0]["id"] == status["id"]
    assert "round 2" in pull.comments[0]["body"].lower()
    paths = [c["path"] for r in pull.reviews for c in r["comments"]]
    assert sorted(paths) == ["shop/calc.py", "shop/orders.py"], paths
    assert page.errors == []
