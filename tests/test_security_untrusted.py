"""Untrusted content is shown as text. Runs of every pattern, a code review and a change to a
repository are made with model output, answers, plan steps, findings, diffs, file names, tool
output and errors full of markup (script tags, event handlers, ``javascript:`` links, raw HTML
in Markdown, SVG); every page, every on-demand file and every live WebSocket message is then
parsed as HTML and must hold no script but our own, no event-handler attribute, no
``javascript:`` URL and no injected element; the plain-text fields show the markup literally.
The Chromium side (no dialog, no CSP violation) is in test_security_browser.py."""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from agents_app import engine, live
from agents_app.models import AgentReport, Event, ModelCall, PlanVersion, Run, RunItem, StepResult
from agents_app.patterns.plan_execute_review.service import start_change
from reviews_app import services
from reviews_app.models import Finding, Review
from tests.test_change_views import repo  # noqa: F401 - the repository fixture

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOADS = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[link](javascript:alert(1))",
    '<a href="javascript:alert(1)">click</a>',
    "<svg onload=alert(1)>",
    '"><svg/onload=alert(1)>',
    "'><img src=x onerror=alert(1)>",
    "<div>raw <b>html</b> in markdown</div>",
    "![pic](javascript:alert(1))",
    "[ref][r]\n\n[r]: javascript:alert(1)",
    '<iframe src="javascript:alert(1)"></iframe>',
    "<style>body{display:none}</style>",
    "<details open ontoggle=alert(1)>",
    "<<script>script>alert(1)<</script>/script>",
)
PAYLOAD = "\n\n".join(PAYLOADS)
SHORT = "<script>alert(1)</script><img src=x onerror=alert(1)>"
# A file name can carry markup too (no spaces: it has to survive a diff header).
EVIL_FILE = "app/<svg/onload=alert(1)>.py"
EVIL_DIFF = f"""diff --git a/{EVIL_FILE} b/{EVIL_FILE}
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/{EVIL_FILE}
@@ -0,0 +1,5 @@
+import subprocess
+# <script>alert(1)</script> <img src=x onerror=alert(1)>
+LINK = "javascript:alert(1)"  # <a href="javascript:alert(1)">x</a>
+def run(cmd):
+    return subprocess.call("echo %s <svg onload=alert(1)>" % cmd, shell=True)
diff --git a/web/<img src=x onerror=alert(1)>.js b/web/<img src=x onerror=alert(1)>.js
index 1111111..2222222 100644
--- a/web/<img src=x onerror=alert(1)>.js
+++ b/web/<img src=x onerror=alert(1)>.js
@@ -1,2 +1,2 @@
 const a = 1;
-const b = "<script>alert(1)</script>";
+const b = "<iframe src=javascript:alert(1)>";
"""


def inject(value, extra: str = PAYLOAD):
    """Markup appended to every free-text string (identifiers, numbers, enums untouched);
    titles, which have a length limit, get the short sample."""
    if isinstance(value, str):
        return f"{value} {extra}" if " " in value.strip() else value
    if isinstance(value, list):
        return [inject(v, extra) for v in value]
    if isinstance(value, dict):
        return {k: inject(v, SHORT if k == "title" else extra) for k, v in value.items()}
    return value


def evil_model(scripted):
    """The offline model's replies, with markup in every free-text field."""
    def reply(messages, info):
        text = scripted.offline_like(messages, info)
        try:
            return inject(json.loads(text))
        except (TypeError, ValueError):
            return f"{text}\n\n{PAYLOAD}"
    return reply


ROLES = ("planner", "executor", "synthesizer", "actor", "critic", "debater", "judge", "lead",
         "member", "agent", "organizer", "security", "architecture", "style", "reviewer")
EVIL = {role: "scripted/evil" for role in ROLES}


def _run(alice, pattern, task, **options):
    run = engine.create_run(alice, pattern, task, options=options, models=EVIL, enqueue=False)
    return engine.run_inline(run.pk)


def _taint_records(run: Run) -> None:
    """What a model could also have written, straight through the ORM."""
    Run.objects.filter(pk=run.pk).update(error=f"failed: {PAYLOAD}")
    for e in Event.objects.filter(run=run):
        e.message = f"{e.message} {SHORT}"
        e.save(update_fields=["message"])
    call = ModelCall.objects.filter(run=run).order_by("pk").first()
    if call:
        call.error = f"Provider said: {SHORT}"
        call.save(update_fields=["error"])
    for item in RunItem.objects.filter(run=run):
        item.data = inject(item.data)
        item.save(update_fields=["data"])


@pytest.fixture
def untrusted(alice, scripted, repo, settings, monkeypatch):  # noqa: F811
    """One run of each pattern, a review and a change, all owned by Alice and full of markup."""
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)
    scripted.fn = evil_model(scripted)
    task = f"Collect logs, then find the error {SHORT}"
    runs = {
        "plan_execute": _run(alice, "plan_execute", task, auto_approve=True),
        "plan_gate": _run(alice, "plan_execute", task),
        "reflective": _run(alice, "reflective", task, max_reflections=2),
        "debate": _run(alice, "debate", task, max_rounds=1, positions=[
            {"name": f"Optimist {SHORT}", "stance": f"for {SHORT}"},
            {"name": "Skeptic", "stance": f"against {PAYLOAD}"}]),
        "team_lead": _run(alice, "team_lead", task, strategy="sequential", team=[
            {"name": f"Researcher {SHORT}", "description": f"finds things {PAYLOAD}"}]),
        "react": _run(alice, "react", f"What is 6*7? {SHORT}", tools=["calculator"],
                      approval=["calculator"]),
        "react_done": _run(alice, "react", f"What is 6*7? {SHORT}", tools=["calculator"]),
        "rewoo": _run(alice, "rewoo", f"What is (3 + 4) * 6? {SHORT}"),
    }
    # A code review of a diff whose file names and lines carry markup.
    inp = services.from_text(EVIL_DIFF, label=f"evil {SHORT}")
    runs["review"] = engine.run_inline(services.start_review(
        alice, inp, services.prepare(inp), enqueue=False,
        models={r: "scripted/evil" for r in ("security", "architecture", "style",
                                              "synthesizer")}).pk)
    review = Review.objects.get(run=runs["review"])
    Review.objects.filter(pk=review.pk).update(summary=f"Summary {PAYLOAD}",
                                               verdict_reason=f"because {SHORT}")
    for f in Finding.objects.filter(review=review):
        f.title, f.description = f"{f.title} {SHORT}", f"{f.description} {PAYLOAD}"
        f.suggestion, f.comment = f"Fix: {PAYLOAD}", f"comment {SHORT}"
        f.save()
    # A change whose test output, plan, agents' answers and diff carry markup.
    settings.QUORUM_TEST_COMMANDS = [f"{sys.executable} -c \"print('{SHORT}')\""]
    change = engine.run_inline(start_change(
        alice, repo=str(repo), base="main", models={r: "offline/default" for r in
                                                    ("planner", "executor", "reviewer")},
        auto_approve_plan=True, test_command=settings.QUORUM_TEST_COMMANDS[0],
        task=f'replace "Helo world" with "Hello world" in README.md {SHORT}',
        enqueue=False).pk)
    assert change.status == "awaiting_merge_request", change.error
    for report in AgentReport.objects.filter(run=change):
        report.answer, report.trace = inject(report.answer), inject(report.trace)
        if report.kind == "execute":
            report.diff = EVIL_DIFF
            report.files = [EVIL_FILE, "web/<img src=x onerror=alert(1)>.js"]
        report.save()
    for plan in PlanVersion.objects.filter(run=change):
        plan.details, plan.goal = inject(plan.details), f"Goal {PAYLOAD}"
        plan.save()
    runs["change"] = change
    for run in runs.values():
        _taint_records(run)
    for step in StepResult.objects.all():
        step.problem = f"problem {SHORT}"
        step.save(update_fields=["problem"])
    return {k: Run.objects.get(pk=r.pk) for k, r in runs.items()}


def page_urls(runs: dict[str, Run]) -> list[str]:
    urls = ["/", "/?q=alert", reverse("review_list"), reverse("change_new")]
    for run in runs.values():
        urls.append(run.get_absolute_url())
    review = Review.objects.get(run=runs["review"])
    urls += [reverse("review_file", args=[review.run_id, i]) for i in range(len(review.files))]
    urls += [reverse("change_file", args=[runs["change"].pk, i]) for i in range(2)]
    return urls


# --- the HTML check ----------------------------------------------------------------------------
OUR_SCRIPTS = ("htmx-2.min.js", "hx-ws-2.min.js", "quorum/app.js")
URL_ATTRS = {"href", "src", "action", "formaction", "xlink:href", "data", "poster", "srcdoc"}
FOREIGN_TAGS = {"script", "img", "iframe", "svg", "object", "embed", "style", "math", "base",
                "frame", "frameset", "video", "audio", "source", "meta", "link"}
OUR_HEAD_TAGS = {"meta", "link"}  # charset, viewport, htmx-config; icon and stylesheet


class Audit(HTMLParser):
    """Every element of a page: anything a browser could run, or markup nobody wrote."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.in_head = False
        self.in_svg_progress = False
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        names = dict(attrs)
        if tag == "head":
            self.in_head = True
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append(f"<{tag} {name}=...>")
            if name in URL_ATTRS and value and \
                    "".join(value.split()).lower().startswith(("javascript:", "vbscript:",
                                                               "data:text")):
                self.problems.append(f"<{tag} {name}={value!r}>")
        if tag == "script":
            if not (names.get("src") or "").endswith(OUR_SCRIPTS) or not self.in_head:
                self.problems.append(f"<script {names}>")
        elif tag in OUR_HEAD_TAGS and self.in_head:
            pass
        elif tag == "svg" and names.get("class") == "bar-track":
            self.in_svg_progress = True  # our progress bar (an attribute width, not style=)
        elif tag in FOREIGN_TAGS:
            self.problems.append(f"<{tag} {names}>")
        if "style" in names:
            self.problems.append(f"<{tag} style=...>")

    def handle_endtag(self, tag):
        if tag == "head":
            self.in_head = False
        if tag == "svg":
            self.in_svg_progress = False

    def handle_data(self, data):
        self.text.append(data)


def audit(html: str) -> tuple[list[str], str]:
    parser = Audit()
    parser.feed(html)
    parser.close()
    return parser.problems, "".join(parser.text)


def test_every_page_shows_the_markup_as_text(alice_client, untrusted):
    for url in page_urls(untrusted):
        response = alice_client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        problems, text = audit(html)
        assert problems == [], url
        assert "<script>alert" not in html and "onerror=alert(1)>" not in html, url
    # The plain-text fields show the markup literally (the parsed text has the tag as text).
    for name, run in untrusted.items():
        _, text = audit(alice_client.get(run.get_absolute_url()).content.decode())
        assert "<script>alert(1)</script>" in text, name
        assert "<img src=x onerror=alert(1)>" in text, name
    # The file names too.
    _, text = audit(alice_client.get(untrusted["review"].get_absolute_url()).content.decode())
    assert EVIL_FILE in text


def test_markdown_fields_drop_raw_html_and_javascript_links(alice_client, untrusted):
    """Answers, step outputs, drafts, arguments are Markdown: raw HTML is not rendered and a
    ``javascript:`` link is not a link."""
    html = alice_client.get(untrusted["plan_execute"].get_absolute_url()).content.decode()
    answer = html[html.index('id="answer-panel"'):]
    answer = answer[:answer.index("</section>")]
    problems, text = audit(answer)
    assert problems == []
    assert "<b>" not in answer and "&lt;div&gt;raw &lt;b&gt;html&lt;/b&gt;" in answer
    assert "<div>raw <b>html</b> in markdown</div>" in text  # shown as the text it is
    assert "[link](javascript:alert(1))" in text and "![pic](javascript:alert(1))" in text
    assert re.search(r"<a\s", answer) is None  # no link made of any of it


def test_live_messages_are_escaped_too(untrusted):
    """What the WebSocket sends (every panel of every page, with every event) passes the same
    check as the pages."""
    for name, run in untrusted.items():
        events = list(run.events.all())
        panels = {"header", "plan-panel", "steps-panel", "items-panel", "answer-panel",
                  "calls-panel", "gate-panel", "live-panel", "mr-panel", "rounds-panel",
                  "costs-panel", "reviewers-panel", "verdict-panel", "findings-panel",
                  "diff-panel", "triage-bar", "diff-threads"}
        html = live.render_live(run, events, panels)
        problems, text = audit(html)
        assert problems == [], name
        assert "<script>alert(1)</script>" in text, name


def test_the_fixture_did_fill_every_kind_of_field(untrusted):
    """Guard against a vacuous pass: the markup really is in the records the pages show."""
    assert PAYLOADS[0] in untrusted["plan_execute"].answer
    assert StepResult.objects.filter(run=untrusted["plan_execute"],
                                     output__contains="onerror").exists()
    assert PlanVersion.objects.filter(run=untrusted["plan_gate"],
                                      steps__icontains="script").exists()
    for kind in ("reflective", "debate", "react_done", "rewoo"):
        assert RunItem.objects.filter(run=untrusted[kind], data__icontains="onerror").exists(), kind
    assert "onerror" in json.dumps(untrusted["team_lead"].state.get("subtasks"))
    assert untrusted["react"].status == "awaiting_tool_approval"
    assert "script" in json.dumps(untrusted["react"].state.get("pending"))
    review = Review.objects.get(run=untrusted["review"])
    assert any(f["path"] == EVIL_FILE for f in review.files)
    assert Finding.objects.filter(review=review, title__contains="<script>").exists()
    change = AgentReport.objects.get(run=untrusted["change"], kind="execute")
    assert SHORT in change.test_output and "<svg" in change.diff
