"""Sign-in throttling against password guessing (django-axes, counted in the database):
after QUORUM_LOGIN_ATTEMPTS failed sign-ins for a username, or from one address, sign-in is
refused with HTTP 429 for QUORUM_LOGIN_LOCKOUT_MINUTES, the right password included, with the
same page whether or not the account exists; then the lock expires. The counter is shared by
every process: failures against a real Daphne lock the username for this process too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta

import httpx
import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client

from tests.conftest import PASSWORD
from tests.stack import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

LOCKED = "Too many failed sign-ins"


def sign_in(client: Client, username: str, password: str, ip: str = "127.0.0.1"):
    return client.post("/accounts/login/", {"username": username, "password": password},
                       REMOTE_ADDR=ip)


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def fail(client: Client, username: str, times: int, ip: str = "127.0.0.1") -> list[int]:
    return [sign_in(client, username, f"wrong-{i}", ip).status_code for i in range(times)]


def normalized(html: str) -> str:
    """A page without what differs per request: the CSRF token and the nonce."""
    html = re.sub(r'value="[A-Za-z0-9]{64}"', 'value="TOKEN"', html)
    html = re.sub(r'"X-CSRFToken": "[A-Za-z0-9]{64}"', '"X-CSRFToken": "TOKEN"', html)
    return re.sub(r'nonce="[^"]*"', 'nonce="N"', html)


def test_defaults_and_shared_store():
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME == timedelta(minutes=15)
    assert set(settings.AXES_LOCKOUT_PARAMETERS) == {"username", "ip_address"}
    # The database handler: Daphne processes share the count (the cache is per process).
    assert settings.AXES_HANDLER == "axes.handlers.database.AxesDatabaseHandler"
    assert settings.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"


def test_the_limits_come_from_the_environment():
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(DEBUG="true", QUORUM_LOGIN_ATTEMPTS="3", QUORUM_LOGIN_LOCKOUT_MINUTES="2",
               QUORUM_VAR_DIR=os.environ.get("QUORUM_VAR_DIR", str(ROOT / "var")),
               DJANGO_SETTINGS_MODULE="config.settings")
    out = subprocess.run([sys.executable, "-c", (
        "import json; import config.settings as s; "
        "print(json.dumps([s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME.total_seconds()]))")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [3, 120.0]


def test_wrong_passwords_lock_the_username_even_for_the_right_password(alice):
    client = Client()
    statuses = fail(client, "alice", 5)
    assert statuses[:4] == [200] * 4  # the form again, "Wrong username or password"
    assert statuses[4] == 429  # the fifth failure locks
    response = sign_in(client, "alice", PASSWORD)
    assert response.status_code == 429
    assert LOCKED in response.content.decode()
    assert "15 minutes" in response.content.decode()
    assert not signed_in(client)
    # From another address too: the username is locked, not only the pair.
    other = Client()
    assert sign_in(other, "alice", PASSWORD, ip="10.1.2.3").status_code == 429
    assert not signed_in(other)
    # Counted in the database.
    assert AccessAttempt.objects.filter(username="alice").exists()


def test_the_lock_looks_the_same_for_an_unknown_username(alice):
    known, unknown = Client(), Client()
    # Before the lock: the same failure page.
    a = sign_in(known, "alice", "nope", ip="10.0.0.1")
    b = sign_in(unknown, "mallory", "nope", ip="10.0.0.2")
    assert a.status_code == b.status_code == 200
    assert normalized(a.content.decode()).replace("alice", "USER") == \
        normalized(b.content.decode()).replace("mallory", "USER")
    # The lock: the same status and the same page.
    fail(known, "alice", 4, ip="10.0.0.1")
    fail(unknown, "mallory", 4, ip="10.0.0.2")
    a = sign_in(known, "alice", PASSWORD, ip="10.0.0.1")
    b = sign_in(unknown, "mallory", PASSWORD, ip="10.0.0.2")
    assert a.status_code == b.status_code == 429
    assert normalized(a.content.decode()) == normalized(b.content.decode())
    assert "alice" not in a.content.decode() and "mallory" not in b.content.decode()


def test_one_address_guessing_many_usernames_is_locked(alice):
    guesser = Client()
    for i in range(5):
        sign_in(guesser, f"user{i}", "guess", ip="203.0.113.9")
    response = sign_in(guesser, "alice", PASSWORD, ip="203.0.113.9")
    assert response.status_code == 429 and not signed_in(guesser)
    # Alice from her own address is not affected.
    mine = Client()
    assert sign_in(mine, "alice", PASSWORD, ip="198.51.100.7").status_code == 302
    assert signed_in(mine)


def test_the_lock_expires(alice):
    client = Client()
    fail(client, "alice", 5)
    assert sign_in(client, "alice", PASSWORD).status_code == 429
    # The cool-off passes (the attempts' clock moves back past it).
    past = settings.AXES_COOLOFF_TIME + timedelta(seconds=5)
    for attempt in AccessAttempt.objects.all():
        attempt.attempt_time -= past
        attempt.save(update_fields=["attempt_time"])
    response = sign_in(client, "alice", PASSWORD)
    assert response.status_code == 302 and response.url == "/"
    assert signed_in(client)


def test_a_successful_sign_in_resets_the_count(alice):
    client = Client()
    assert fail(client, "alice", 4) == [200] * 4
    assert sign_in(client, "alice", PASSWORD).status_code == 302
    client.logout()
    assert fail(client, "alice", 4) == [200] * 4  # counting starts again
    assert sign_in(client, "alice", PASSWORD).status_code == 302


@pytest.mark.integration
def test_failures_against_daphne_lock_the_username_everywhere(browser_alice, stack_dir):
    """Guesses sent to a real Daphne process are counted where this process sees them."""
    from tests.stack import free_port, start_web

    port = free_port()
    web = start_web(stack_dir, port)
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=30) as http:
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"',
                              http.get("/accounts/login/").text).group(1)
            statuses = [http.post("/accounts/login/", data={
                "username": "alice", "password": f"guess-{i}", "csrfmiddlewaretoken": token,
            }).status_code for i in range(5)]
            assert statuses == [200, 200, 200, 200, 429]
            right = http.post("/accounts/login/", data={
                "username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token})
            assert right.status_code == 429 and LOCKED in right.text
            assert "sessionid" not in http.cookies
    finally:
        web.stop()
    # This process (another "web server") refuses Alice too, from another address.
    client = Client()
    assert sign_in(client, "alice", PASSWORD, ip="192.0.2.44").status_code == 429
