"""Test settings and fixtures. Users follow one convention: Alice owns the runs, Bob is
another signed-in user, and anonymous visitors have no session at all."""

import sys

import pytest

from tests.scripted import ScriptedProvider

PASSWORD = "correct-horse-battery"  # noqa: S105 - test fixture


def pytest_collection_modifyitems(config, items):
    """Browser tests last, in their collected order: their shared Daphne and Celery worker
    (``_session_stack``) live until the session ends and take any task from the test Redis,
    so no integration test that starts a worker of its own may run after them."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


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


# What the browser tests' Daphne and worker read from their environment, fixed for the whole
# run: change runs may read repositories under stack_dir/repos (a test makes its own there,
# see ``stack_repo_root``) and run this one test command.
STACK_TEST_COMMAND = f"{sys.executable} -c \"print('tests ok')\""
# A connected repository's token, read by the stack from QUORUM_CONN_E2E_TOKEN (the fake
# provider server of the pull-request tests accepts it).
STACK_CONN_TOKEN = "e2e-host-token"  # noqa: S105 - test fixture
STACK_CONN_SECRET = "e2e-webhook-secret-0123456789"  # noqa: S105 - test fixture


@pytest.fixture(scope="session")
def _session_stack(django_db_setup, redis_server, stack_dir):
    """Daphne and a Celery worker on the test database, started once for the whole run; the
    offline model slowed to 0.4 s a call so that a page can watch stages arrive. Each test's
    data is its own: browser tests are transactional, so the database is emptied after each
    one (ids are not reused, and the consumer's render cache keys on a run's creation time)."""
    from tests.stack import free_port, start_web, start_worker

    env = {"QUORUM_OFFLINE_LATENCY": "0.4",
           "QUORUM_REPO_ROOTS": str(stack_dir / "repos"),
           "QUORUM_WORKTREE_ROOT": str(stack_dir / "worktrees"),
           "QUORUM_TEST_COMMANDS": STACK_TEST_COMMAND,
           "QUORUM_CONN_E2E_TOKEN": STACK_CONN_TOKEN,
           "QUORUM_CONN_E2E_SECRET": STACK_CONN_SECRET,
           # Notification emails as files (``stack_mail``); four slashes: django-environ
           # drops the first one of the path.
           "EMAIL_URL": f"filemail:///{stack_dir / 'mail'}"}
    (stack_dir / "repos").mkdir(exist_ok=True)
    port = free_port()
    worker = start_worker(stack_dir, node="browser", **env)
    web = start_web(stack_dir, port, **env)
    yield f"http://127.0.0.1:{port}", worker, web
    web.stop()
    worker.stop()


@pytest.fixture
def live_stack(_session_stack):
    """The shared stack's address, for one test. After the test, the worker's tasks are
    given a moment to finish, so that it does not write while the database is emptied."""
    from tests.stack import unfinished_tasks
    from tests.waiting import wait_until

    url, worker, web = _session_stack
    for proc in (worker, web):
        if proc.popen.poll() is not None:
            pytest.fail(f"the shared {proc.name} process has exited:\n{proc.log()[-3000:]}")
    yield url
    try:
        wait_until(lambda: not unfinished_tasks(worker), 10, interval=0.1,
                   what="the worker to finish the test's tasks")
    except TimeoutError:
        pass  # a task still running is harmless: its run's rows are gone, it ends quietly


@pytest.fixture(scope="session")
def stack_mail(stack_dir):
    """The folder the shared stack writes its emails to (Django's file backend)."""
    return stack_dir / "mail"


@pytest.fixture
def stack_repo_root(_session_stack, stack_dir, tmp_path):
    """A fresh folder of this test under the shared stack's repository root."""
    path = stack_dir / "repos" / tmp_path.name
    path.mkdir()
    return path


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
