"""Security in a real Chromium against Daphne, the Celery worker and Redis:

- the Content-Security-Policy (nonces, no inline script or style) leaves every page working:
  sign in, start a run from the dashboard, approve its plan and watch it finish live over the
  WebSocket (connect-src 'self' covers ws: in Chromium), with no CSP violation at all;
- a script smuggled into an htmx swap does not run (htmx gets no nonce, and drops scripts);
- pages full of untrusted markup (test_security_untrusted's runs, review and change) open no
  dialog, run nothing, violate no policy, and show the markup as text;
- a page served from another port of the same host (so the browser sends the session
  cookie) cannot open a signed-in person's run over the WebSocket."""

from __future__ import annotations

import http.server
import json
import re
import threading

import pytest

from agents_app import engine
from agents_app.events import append_events
from agents_app.models import Run
from agents_app.patterns.base import Event as EventSpec
from tests.conftest import sign_in
from tests.stack import free_port
from tests.test_change_views import repo  # noqa: F401 - fixture of the untrusted runs
from tests.test_security_untrusted import SHORT, page_urls, untrusted  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.django_db(transaction=True)]

WATCH = """
document.addEventListener('securitypolicyviolation', (e) => {
  window.reportViolation(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} `
                         + `at ${e.sourceFile}:${e.lineNumber}`);
});
"""


@pytest.fixture
def alice(browser_alice):
    return browser_alice


@pytest.fixture
def watched(page):
    """The page, recording CSP violations (events and console messages), dialogs, and the
    frames its WebSockets receive."""
    page.violations, page.dialogs, page.frames_in, page.sockets = [], [], [], []
    page.expose_function("reportViolation", lambda text: page.violations.append(text))
    page.add_init_script(WATCH)
    page.on("console", lambda m: page.violations.append(m.text)
            if "Content Security Policy" in m.text else None)

    def dialog(d):
        page.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)

    def socket(ws):
        page.sockets.append(ws.url)
        ws.on("framereceived", lambda payload: page.frames_in.append(ws.url))

    page.on("websocket", socket)
    return page


def csp_of(response) -> dict[str, str]:
    header = response.header_value("content-security-policy")
    assert header, "no Content-Security-Policy header"
    return {d.split()[0]: " ".join(d.split()[1:]) for d in header.split(";") if d.strip()}


def test_pages_work_under_the_policy_and_the_run_streams_live(live_stack, watched, alice):
    page = watched
    response = page.goto(live_stack + "/accounts/login/")
    policy = csp_of(response)
    assert policy["default-src"] == "'self'"
    assert policy["connect-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"
    assert policy["base-uri"] == "'none'" and policy["form-action"] == "'self'"
    assert policy["img-src"] == "'self' data:"
    nonce = re.search(r"'nonce-([^']+)'", policy["script-src"]).group(1)
    # Every script carries the request's nonce (the property: the attribute is hidden).
    assert page.evaluate("[...document.scripts].map(s => s.nonce)") == [nonce] * 3
    assert "unsafe-inline" not in policy["script-src"] + policy["style-src"]

    sign_in(page, live_stack)
    page.fill("textarea[name=task]", "Collect the logs, then find the error, and finally "
                                     "write a report.")
    page.click("text=Start run")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    run = Run.objects.get()
    page.evaluate("window.__noReload = true")
    # The plan gate arrives over the WebSocket, then the approval and the live steps.
    page.wait_for_selector("#plan-form", timeout=30_000)
    page.click("button[value=approve]")
    page.wait_for_function(
        "() => document.querySelector('#run-header').innerText.includes('Completed')",
        timeout=60_000)
    page.wait_for_selector("#answer-panel .md")
    assert page.evaluate("window.__noReload") is True, "the page reloaded instead of streaming"
    assert page.sockets == [f"{live_stack.replace('http', 'ws')}/ws/runs/{run.pk}/"]
    assert len(page.frames_in) >= 2  # the gate and the steps came as WebSocket messages
    assert page.locator(".progress span").inner_text() == "3 of 3 steps"
    assert page.evaluate("document.querySelector('.progress rect.bar').getAttribute('width')") \
        == "100"

    # The other pages, and the admin, under the same policy.
    alice.is_staff = alice.is_superuser = True
    alice.save(update_fields=["is_staff", "is_superuser"])
    for path in ("/reviews/", "/changes/new/", "/?q=logs", "/admin/", "/admin/agents_app/run/",
                 f"/admin/agents_app/run/{run.pk}/change/"):
        response = page.goto(live_stack + path)
        assert response.status == 200, path
        assert "content-security-policy" in response.headers, path
        page.wait_for_load_state("networkidle")
    page.goto(live_stack + "/reviews/")
    page.check("input[name=source][value=upload]")  # app.js still shows the chosen source
    assert page.locator(".source-panel.active").get_attribute("data-source") == "upload"
    assert page.violations == [], page.violations
    assert page.errors == [] and page.dialogs == []


def test_a_script_in_an_htmx_swap_does_not_run(live_stack, watched, alice):
    page = watched
    sign_in(page, live_stack)
    page.evaluate("""() => htmx.swap('main', '<p id="swapped">swapped</p>' +
        '<script>window.__pwned = 1</script>', {swapStyle: 'beforeend'})""")
    page.wait_for_selector("#swapped")
    page.wait_for_timeout(200)
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('main script').length") == 0
    assert page.violations == [] and page.errors == []


OWN_SCRIPTS = 3
# Event kinds that refresh every panel of the run, review and change pages.
LIVE_KINDS = ("model_call", "plan_proposed", "execution_reported", "review_synthesized",
              "gate_opened", "run_finished")


def test_untrusted_content_runs_nothing_and_reads_as_text(live_stack, watched, alice,
                                                          untrusted):  # noqa: F811
    page = watched
    sign_in(page, live_stack)
    run_pages = {r.get_absolute_url(): r.pk for r in untrusted.values()}
    for url in page_urls(untrusted):
        page.goto(live_stack + url)
        page.wait_for_load_state("networkidle")
        if url in run_pages:
            # New events arrive: the consumer sends them with every panel they touch, rendered
            # from the same untrusted records, and htmx swaps them in.
            page.wait_for_function("() => !document.body.classList.contains('ws-down')")
            page.wait_for_timeout(300)
            before = len(page.frames_in)
            append_events(run_pages[url], [EventSpec(kind, f"live {SHORT}") for kind in LIVE_KINDS])
            for _ in range(100):
                if len(page.frames_in) > before:
                    break
                page.wait_for_timeout(100)
            assert len(page.frames_in) > before, f"{url}: no live message"
            page.wait_for_function("() => document.querySelector('#timeline').innerText"
                                   ".includes('live <script>')")
        # Open every <details> (lazy files load on toggle) and let htmx finish.
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(150)
        found = page.evaluate("""() => ({
            js_links: [...document.querySelectorAll('a[href], area[href], form[action], '
                + 'iframe, embed, object')].filter(e => /^\\s*javascript:/i.test(
                e.getAttribute('href') || e.getAttribute('action') || e.getAttribute('src')
                || 'javascript:')).length,
            handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(
                a => a.name.startsWith('on'))).map(e => e.outerHTML.slice(0, 80)),
            scripts: document.scripts.length,
            foreign: document.querySelectorAll('main img, main iframe, main svg:not(.bar-track),'
                + ' main style, main object, main embed').length,
            text: document.body.innerText,
        })""")
        assert found["js_links"] == 0, url
        assert found["handlers"] == [], url
        # Our three scripts on a page; none in a file fragment opened on its own.
        assert found["scripts"] == (0 if "/files/" in url else OWN_SCRIPTS), url
        assert found["foreign"] == 0, url
        if url in run_pages:
            assert "<script>alert(1)</script>" in found["text"], url
            assert "<img src=x onerror=alert(1)>" in found["text"], url
    assert page.dialogs == [], page.dialogs
    assert page.violations == [], page.violations
    assert page.errors == []


PROBE = """
window.probe = {opened: false, received: [], closed: null};
const ws = new WebSocket(%s);
ws.onopen = () => { window.probe.opened = true; ws.send(JSON.stringify({after: 0})); };
ws.onmessage = (e) => window.probe.received.push(e.data);
ws.onclose = (e) => { window.probe.closed = e.code; };
true;  // page.evaluate would call a function left as the script's value
"""


@pytest.fixture
def other_origin():
    """A page on another port of the same host: the browser sends the site's cookies with its
    WebSocket (cookies do not care about ports), so only the origin check stands between it and
    a signed-in person's run."""
    pages = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server API
            body = pages.get(self.path, "").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", pages
    server.shutdown()
    server.server_close()


def test_a_page_of_another_origin_cannot_watch_a_run(live_stack, watched, alice, other_origin):
    page = watched
    run = engine.run_inline(engine.create_run(
        alice, "plan_execute", "Collect the logs, then find the error.", options={},
        enqueue=False, models={"planner": "offline/default", "executor": "offline/default",
                               "synthesizer": "offline/default"}).pk)
    assert run.is_waiting
    socket_url = f"{live_stack.replace('http', 'ws')}/ws/runs/{run.pk}/"
    sign_in(page, live_stack)
    # The same script from the site's own origin is served the run: the probe works.
    page.evaluate(PROBE % json.dumps(socket_url))
    page.wait_for_function("() => window.probe.received.length > 0", timeout=15_000)
    assert 'data-seq="1"' in page.evaluate("window.probe.received[0]")

    base, pages = other_origin
    pages["/probe.html"] = f"<!doctype html><script>{PROBE % json.dumps(socket_url)}</script>"
    page.goto(base + "/probe.html")
    page.wait_for_function("() => window.probe.closed !== null "
                           "|| window.probe.received.length > 0", timeout=15_000)
    page.wait_for_timeout(500)  # anything it was going to receive
    probe = page.evaluate("window.probe")
    assert probe["opened"] is False and probe["received"] == []
    assert probe["closed"] == 1006  # the handshake was refused (HTTP 403)
    # The session cookie did go with it (same host): the origin check alone refused it.
    assert any(c["name"] == "sessionid" and c["domain"] == "127.0.0.1"
               for c in page.context.cookies())
