"""Test settings and fixtures. Users follow one convention: Alice owns the runs, Bob is
another signed-in user, and anonymous visitors have no session at all."""

import pytest

from tests.scripted import ScriptedProvider

PASSWORD = "correct-horse-battery"  # noqa: S105 - test fixture


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password=PASSWORD)


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password=PASSWORD)


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


@pytest.fixture
def scripted():
    """A scripted model behind LiteLLM's real call path: ``scripted/<name>`` models."""
    provider = ScriptedProvider.install()
    yield provider
    provider.uninstall()


OFFLINE = {"planner": "offline/default", "executor": "offline/default",
           "synthesizer": "offline/default"}


def scripted_models(name: str = "main") -> dict[str, str]:
    return {role: f"scripted/{name}" for role in OFFLINE}


@pytest.fixture
def gated_run(alice):
    """Alice's Plan-and-Execute run on the offline model, waiting at its plan gate."""
    from decimal import Decimal

    from agents_app import engine

    run = engine.create_run(alice, "plan_execute", "Collect logs, then find the error.",
                            options={}, models=OFFLINE, max_cost_usd=Decimal("1"),
                            max_tokens=10_000, enqueue=False)
    return engine.run_inline(run.pk)


@pytest.fixture(scope="session")
def stack_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("stack")


@pytest.fixture(scope="session")
def redis_server(stack_dir):
    from tests.stack import start_redis

    proc = start_redis(stack_dir)
    yield proc
    proc.stop()


# --- browser tests ----------------------------------------------------------------------
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture
def live_stack(django_db_setup, redis_server, stack_dir):
    """Daphne and a Celery worker on the test database, the offline model slowed to 0.4 s
    a call so that a page can watch stages arrive."""
    from tests.stack import free_port, start_web, start_worker

    port = free_port()
    worker = start_worker(stack_dir, node="browser", QUORUM_OFFLINE_LATENCY="0.4")
    web = start_web(stack_dir, port)
    yield f"http://127.0.0.1:{port}"
    web.stop()
    worker.stop()


@pytest.fixture
def browser_alice(alice):
    """Alice with a password hash Daphne's (production) hasher list can verify."""
    from django.contrib.auth.hashers import make_password

    alice.password = make_password(PASSWORD, hasher="pbkdf2_sha256")
    alice.save(update_fields=["password"])
    return alice


@pytest.fixture
def page(monkeypatch):
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls
    # are still synchronous, so Django's async guard is lifted for this test only.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.errors = errors
        yield page
        browser.close()


def sign_in(page, base_url: str, username: str = "alice") -> None:
    page.goto(base_url + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button.primary")
    page.wait_for_url(base_url + "/")
