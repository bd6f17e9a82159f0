"""Two people of one team decide shared gates in two Chromium browsers, offline (issue 35's
"done when"): Alice (admin) sets the team up at /teams/ with Bob as approver and two gate
rules; a change run's plan and its merge each need both approvals; Bob's edit of the plan
after Alice approved resets her approval (her open page is refused with a 409); a third
run's plan gate reminds, escalates to another team and takes its default at its deadline.
Every step arrives by email (the stack's file backend) and by a Standard Webhooks delivery
to a receiver on 127.0.0.1; Charlie, of another team, sees none of it: an empty inbox, 404
pages and exports, and not one message on his inbox's WebSocket. Alice works at 1280 px,
Bob on a 390 px phone. Everything real: Daphne, the Celery worker, Redis, git, the offline
model through LiteLLM."""

from __future__ import annotations

import email
import json
import re
import threading
from datetime import timedelta
from email import policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from agents_app.gates.models import GateAudit, GateOpening
from agents_app.models import MergeRequest, Run
from config import send_task
from tests.conftest import CHROMIUM_ARGS, PASSWORD, sign_in
from tests.test_change_browser import git, make_repo
from tests.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

TASK = 'replace "Helo world" with "Hello world" in README.md'
DEADLINE_TASK = "Collect the logs, then find the error."
APPROVE_PLAN = "#gate-panel button[value=approve] >> text=Approve and execute"
MERGE = "#gate-panel button[value=approve] >> text=Merge into main"
# The raw messages of a page's own WebSocket to /ws/inbox/ (besides htmx's), counted.
LISTEN = """() => { window.__inbox = []; const ws = new WebSocket(
  (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws/inbox/');
  ws.onmessage = (e) => window.__inbox.push(e.data);
  return new Promise((ok) => { ws.onopen = () => ok(true); }); }"""


class Receiver:
    """A webhook receiver on 127.0.0.1 that verifies each delivery with the endpoint's
    secret, as the Standard Webhooks specification says: 204 when it verifies, 401 if not."""

    def __init__(self):
        self.secret = ""
        self.verified: list[dict] = []
        self.refused: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    receiver.verified.append(Webhook(receiver.secret).verify(body, headers))
                    status = 204
                except (WebhookVerificationError, ValueError) as exc:
                    receiver.refused.append(f"{exc}: {body[:200]!r}")
                    status = 401
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kinds(self, run_id: int) -> list[str]:
        return [p["type"] for p in self.verified if p["data"].get("run") == run_id]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture
def people(browser_alice, django_user_model):
    """Alice and Bob (one team), Charlie (another), with addresses and passwords Daphne's
    hasher list verifies."""
    from django.contrib.auth.hashers import make_password

    browser_alice.email = "alice@example.org"
    browser_alice.save(update_fields=["email"])
    made = {"alice": browser_alice}
    for name in ("bob", "charlie"):
        made[name] = django_user_model.objects.create(
            username=name, email=f"{name}@example.org",
            password=make_password(PASSWORD, hasher="pbkdf2_sha256"))
    return made


@pytest.fixture
def browsers(monkeypatch):
    """One Chromium, a context (a person) per name: Alice at 1280 px, Bob on a phone."""
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # see conftest's ``page``
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        sizes = {"alice": (1280, 900), "bob": (390, 844), "charlie": (1280, 900)}
        pages, errors = {}, []
        for name, (w, h) in sizes.items():
            context = browser.new_context(viewport={"width": w, "height": h})
            page = context.new_page()
            page.on("pageerror", lambda e, n=name: errors.append(f"{n}: {e}"))
            pages[name] = page
        pages["errors"] = errors
        yield pages
        browser.close()


def fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def approvals(page) -> tuple[int, int]:
    box = page.locator("#gate-box .approvals")
    return int(box.get_attribute("data-approvals")), int(box.get_attribute("data-required"))


def wait_approvals(page, approved: int, required: int = 2) -> None:
    page.wait_for_function(
        "([a, r]) => { const b = document.querySelector('#gate-box .approvals');"
        " return b && b.dataset.approvals == a && b.dataset.required == r; }",
        arg=[approved, required], timeout=10_000)


def create_team(page, base: str, name: str) -> int:
    page.goto(f"{base}/teams/")
    page.fill("#team-new input[name=name]", name)
    page.click("#team-new button.primary")
    page.wait_for_url(re.compile(r".*/teams/\d+/$"))
    return int(page.url.rstrip("/").rsplit("/", 1)[-1])


def add_rule(page, base: str, team: int, fields: dict[str, str]) -> None:
    page.goto(f"{base}/teams/{team}/")
    page.click("#rules >> text=New rule")
    page.wait_for_url(f"{base}/teams/{team}/rules/new/")
    for name, value in fields.items():
        if page.locator(f"#rule-form select[name={name}]").count():
            page.select_option(f"#rule-form select[name={name}]", label=value)
        else:
            page.fill(f"#rule-form [name={name}]", value)
    page.click("#rule-form button.primary")
    page.wait_for_url(re.compile(rf".*/teams/{team}/(#rules)?$"))


def mails(folder) -> list[email.message.EmailMessage]:
    """Every email the stack wrote (Django's file backend: messages one after another, each
    followed by a line of 79 dashes)."""
    out = []
    for path in sorted(folder.glob("*.log")) if folder.exists() else []:
        for chunk in path.read_bytes().split(b"\n" + b"-" * 79 + b"\n"):
            if chunk.strip():
                out.append(email.message_from_bytes(chunk.lstrip(), policy=policy.default))
    return out


def mail_log(folder, run_id: int) -> list[tuple[str, str, str]]:
    """(recipient, subject, text) of the emails about run ``run_id``."""
    out = []
    for m in mails(folder):
        if f"of run #{run_id} " in str(m["subject"]):
            text = m.get_body(preferencelist=("plain",)).get_content()
            out.append((str(m["to"]), str(m["subject"]), text))
    return out


def sweep(run_id: int, **due: bool) -> None:
    """Move the open stop's timers to the past and send the beat's task to the stack's
    worker (``agents_app.tasks.gate_timers`` on its broker, as celery beat does): the sweep
    runs in the worker, against the same database."""
    past = timezone.now() - timedelta(seconds=1)
    GateOpening.objects.filter(run_id=run_id, closed_at__isnull=True).update(
        **{f"{k}_at": past for k, v in due.items() if v})
    send_task("agents_app.tasks.gate_timers", ignore_result=True)


def test_two_people_decide_a_teams_gates_and_another_team_sees_nothing(
        live_stack, browsers, people, receiver, stack_repo_root, stack_mail):
    base = live_stack
    a, b, c = browsers["alice"], browsers["bob"], browsers["charlie"]
    repo = make_repo(stack_repo_root / "proj")
    for name, page in (("alice", a), ("bob", b), ("charlie", c)):
        sign_in(page, base, name)

    # --- Set-up, through the pages: two teams of Alice's, one of Charlie's. --------------
    c_team = create_team(c, base, "Elsewhere")
    oncall = create_team(a, base, "Oncall")
    team = create_team(a, base, "Platform")
    a.fill("#member-add input[name=username]", "bob")
    a.select_option("#member-add select[name=role]", "approver")
    a.click("#member-add button.primary")
    a.wait_for_url(re.compile(rf".*/teams/{team}/#members$"))
    assert "approver" in a.locator("#members tr", has_text="bob").inner_text()
    add_rule(a, base, team, {"name": "Two approvals", "pattern": "Plan, execute, review (git)",
                             "required_approvals": "2"})
    # The deadline's minimum is one minute; the test moves its times to the past (sweep()).
    add_rule(a, base, team, {"name": "Plans in time", "pattern": "Plan and execute",
                             "gate": "plan approval", "deadline_minutes": "3",
                             "remind_minutes_before": "2", "escalate_minutes_before": "1",
                             "escalate_to": "Oncall", "default_action": "Approve"})
    summaries = a.locator("#rules .rule-summary").all_inner_texts()
    assert "2 approvals" in summaries[0]
    assert "escalate to Oncall 1 min before, then approve" in summaries[1]

    # Alice's own signed endpoint: the receiver; its secret is shown once.
    a.goto(f"{base}/settings/notifications/")
    a.fill("#endpoint-form input[name=name]", "Receiver")
    a.fill("#endpoint-form input[name=url]", receiver.url)
    a.click("#endpoint-form button.primary")
    receiver.secret = a.locator("#new-secret").inner_text().strip()
    assert receiver.secret.startswith("whsec_")

    # Everyone's inbox is open, empty, and listening.
    a_inbox = a.context.new_page()
    for page in (a_inbox, b, c):
        page.goto(f"{base}/inbox/")
        page.wait_for_selector("#inbox-empty")
        page.evaluate("window.__noReload = true")
    a_inbox.evaluate(LISTEN)
    c.evaluate(LISTEN)

    # --- Run 1: a change for the team; both see it arrive in their inboxes. ---------------
    a.goto(f"{base}/changes/new/")
    a.fill("input[name=repo]", str(repo))
    a.fill("input[name=base]", "main")
    a.fill("textarea[name=task]", TASK)
    a.select_option("#change-form select[name=sharing]", label="Platform")
    a.click("#change-form button.primary")
    a.wait_for_url(re.compile(r".*/changes/\d+/$"))
    run = Run.objects.get(pattern="plan_execute_review")
    assert run.team_id == team
    for page in (a_inbox, b):
        card = page.locator(f"#gate-{run.pk}")
        card.wait_for(timeout=30_000)
        assert "Approvals 0 of 2" in card.inner_text() and "team Platform" in card.inner_text()
        assert page.evaluate("window.__noReload") is True
    assert fits(b)  # the card on a phone

    # Alice approves the plan: one of two.
    a.locator(APPROVE_PLAN).click()
    a.wait_for_selector("#gate-panel .vote-note")
    assert "1 of 2 approvals" in a.locator("#gate-panel .vote-note").inner_text()
    wait_approvals(a, 1)  # the header follows live
    assert "alice ✓" in a.locator("#gate-box").inner_text()
    assert "Not yet: bob" in a.locator("#gate-box").inner_text()

    # Bob follows the link in his email to the gate, edits a step and approves: Alice's
    # approval is void, the box says one of two, by Bob alone.
    wait_until(lambda: any(to == "bob@example.org" for to, _s, _t in mail_log(stack_mail, run.pk)),
               15, what="Bob's email of the opened plan gate")
    opened = next(t for to, _s, t in mail_log(stack_mail, run.pk) if to == "bob@example.org")
    link = re.search(r"Open the gate: \S+(/inbox/link/\S+/)", opened)[1]
    b.goto(base + link)
    b.wait_for_url(f"{base}/changes/{run.pk}/#gate")
    steps = b.locator("#gate-panel textarea[name=steps]")
    steps.wait_for()
    wait_approvals(b, 1)
    assert fits(b)  # the gate box on a phone
    old = steps.input_value()
    assert '"Hello world"' in old
    steps.fill(old.replace('"Hello world"', '"Hello, world"'))
    b.locator(APPROVE_PLAN).click()
    # Her note was there already (it is the run's last vote, said to every watcher): wait for his.
    b.locator("#gate-panel .vote-note", has_text="bob approved (1 of 2 approvals)").wait_for()
    b.wait_for_function("() => document.querySelector('#gate-box').innerText"
                        ".includes('bob ✓')", timeout=10_000)  # the header follows live
    assert approvals(b) == (1, 2)
    box = b.locator("#gate-box").inner_text()
    assert "bob ✓" in box and "alice ✓" not in box and "Not yet: alice" in box
    assert fits(b)

    # Alice's open page follows live: her approval is void …
    a.wait_for_function("() => !document.querySelector('#gate-box').innerText"
                        ".includes('alice ✓')", timeout=10_000)
    assert "bob ✓" in a.locator("#gate-box").inner_text()
    # … and its plan form follows too: it shows Bob's plan now (a page that kept the old one,
    # with something typed in it, is refused as out of date: tests/test_gates.py).
    a.wait_for_function("() => document.querySelector('#gate-panel textarea[name=steps]')"
                        ".value.includes('Hello, world')", timeout=10_000)
    # She approves Bob's plan: two of two, the run goes on to its merge gate.
    a.locator(APPROVE_PLAN).click()
    a.locator(MERGE).wait_for(timeout=40_000)
    wait_approvals(a, 0)

    # The merge needs both too.
    a.locator(MERGE).click()
    a.locator("#gate-panel .vote-note", has_text="alice approved (1 of 2 approvals)").wait_for()
    assert run_status(run) == "awaiting_merge_request"
    b.goto(f"{base}/changes/{run.pk}/")
    wait_approvals(b, 1)
    b.locator(MERGE).click()
    a.wait_for_function("() => document.querySelector('#run-header').innerText"
                        ".includes('MR: Merged')", timeout=20_000)
    assert "Hello, world" in git(repo, "show", "main:README.md")
    assert MergeRequest.objects.get(run=run).status == "merged"
    whats = list(GateAudit.objects.filter(run=run).values_list("what", "actor_name"))
    assert ("edited", "bob") in whats and whats.count(("approved", "alice")) == 3
    assert [w for w, _ in whats].count("decided") == 2

    # --- Run 3: a Plan-and-Execute run whose plan gate reaches its deadline. --------------
    a.goto(f"{base}/")
    a.select_option("#start-form select[name=pattern]", "plan_execute")
    a.fill("#start-form [name=task]", DEADLINE_TASK)
    a.select_option("#start-form select[name=sharing]", label="Platform")
    a.click("#start-form button.primary")
    a.wait_for_url(re.compile(r".*/runs/\d+/$"))
    late = Run.objects.get(pattern="plan_execute")
    wait_until(lambda: GateOpening.objects.filter(run=late, deadline_at__isnull=False).exists(),
               30, what="the deadline run's plan gate")
    b.goto(f"{base}/runs/{late.pk}/")
    deadline = b.locator("#gate-box .deadline")
    assert "escalates to team Oncall before it; then it is approved by the rule" in \
        deadline.inner_text()
    assert fits(b)
    sweep(late.pk, remind=True, escalate=True)
    wait_until(lambda: GateOpening.objects.filter(run=late, escalated_at__isnull=False,
                                                  reminded_at__isnull=False).exists(),
               15, what="the reminder and the escalation")
    b.reload()
    assert "escalated to team Oncall" in b.locator("#gate-box .deadline").inner_text()
    assert run_status(late) == "awaiting_plan_approval"
    sweep(late.pk, deadline=True)
    wait_until(lambda: run_status(late) != "awaiting_plan_approval", 15,
               what="the deadline's default")
    audit = list(GateAudit.objects.filter(run=late).values_list("what", flat=True))
    assert audit == ["opened", "reminded", "escalated", "defaulted"], audit

    # --- Every step by email and by a verified webhook. ------------------------------------
    expected = {run.pk: {"opened", "reset", "decided"},
                late.pk: {"opened", "reminder", "escalated", "decided"}}
    headlines = {"opened": "A gate waits for a decision", "reset": "Approvals were reset",
                 "reminder": "A gate's deadline is near",
                 "escalated": "A gate was escalated to your team",
                 "decided": "A gate was decided"}

    def arrived() -> bool:
        for run_id, kinds in expected.items():
            subjects = [s for to, s, _t in mail_log(stack_mail, run_id)
                        if to == "alice@example.org"]
            if not all(any(headlines[k] in s for s in subjects) for k in kinds):
                return False
            if not {f"gate.{k}" for k in kinds} <= set(receiver.kinds(run_id)):
                return False
        return True

    wait_until(arrived, 20, what="every email and webhook")
    assert receiver.refused == []
    sent_to = {to for rid in expected for to, _s, _t in mail_log(stack_mail, rid)}
    assert sent_to == {"alice@example.org", "bob@example.org"}
    # The merge gate opened for both; the reset went to Alice only (her approval was void).
    plan_resets = [to for to, s, _t in mail_log(stack_mail, run.pk) if headlines["reset"] in s]
    assert plan_resets == ["alice@example.org"]
    assert [p["data"]["required"] for p in receiver.verified
            if p["data"]["run"] == run.pk and p["type"] == "gate.opened"] == [2, 2]
    # Alice's approval decided the plan (Bob is told), Bob's the merge (Alice is told).
    decided = [to for to, s, _t in mail_log(stack_mail, run.pk) if headlines["decided"] in s]
    assert sorted(decided) == ["alice@example.org", "bob@example.org"]

    # --- Charlie, of another team, saw none of it. -----------------------------------------
    assert c.locator("#inbox-empty").is_visible() and c.locator(".inbox-card").count() == 0
    assert c.evaluate("window.__inbox.length") == 0
    assert a_inbox.evaluate("window.__inbox.length") > 0  # the same listener hears Alice's
    for path in (f"/changes/{run.pk}/", f"/runs/{late.pk}/", f"/runs/{run.pk}/gates/",
                 f"/runs/{run.pk}/gates/audit.csv", f"/runs/{run.pk}/gates/audit.json",
                 f"/runs/{late.pk}/gates/audit.json", f"/teams/{team}/"):
        assert c.request.get(base + path, max_redirects=0).status == 404, path
    assert c.request.get(f"{base}/teams/{c_team}/").status == 200
    exported = json.loads(a.request.get(f"{base}/runs/{run.pk}/gates/audit.json").text())
    assert {"edited", "approved", "decided"} <= {row["what"] for row in exported["audit"]}
    assert oncall and browsers["errors"] == []


def run_status(run: Run) -> str:
    return Run.objects.get(pk=run.pk).status
