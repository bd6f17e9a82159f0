"""What the benchmark scripts share: Django on a temporary SQLite database, the real processes
(embedded Redis, a thread-pool Celery worker, Daphne), the fake provider, a signed-in HTTP
client, and percentiles."""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TERMINAL = ("completed", "failed", "cancelled", "budget_exceeded")
PASSWORD = "bench-password-123"  # noqa: S105 - a throwaway user on a temporary database


# Every benchmark runs with DEBUG=false (issue 17): DEBUG=true logs every SQL statement and
# serves static files from the finders, which is not what a deployment measures. Plain HTTP on
# loopback, so the session and CSRF cookies are not marked Secure (a client would not send them).
BENCH_ENV = {"DEBUG": "false", "SESSION_COOKIE_SECURE": "false", "CSRF_COOKIE_SECURE": "false"}


def setup_django(var_dir: Path, redis_port: int, **env) -> None:
    """Django on a temporary SQLite database under ``var_dir``, DEBUG=false unless ``env`` says
    otherwise (and prints which, so every benchmark's output says so). Child processes
    (tests/stack.py's start_web/start_worker) set DEBUG=true themselves: pass them
    ``**child_env()``."""
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "config.settings", **BENCH_ENV,
        "SECRET_KEY": "bench", "QUORUM_VAR_DIR": str(var_dir),
        "DATABASE_URL": f"sqlite:///{var_dir / 'bench.sqlite3'}",
        "QUORUM_TEST_REDIS_PORT": str(redis_port),
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "QUORUM_ALLOW_MODEL_REQUESTS": "false", "QUORUM_LOG_LEVEL": "WARNING",
        **{k: str(v) for k, v in env.items()},
    })
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if not settings.DEBUG:  # the manifest the pages' {% static %} needs without DEBUG
        call_command("collectstatic", interactive=False, verbosity=0)
    print(f"# {settings_note()}", flush=True)


def settings_note(conn_max_age: int | None = None) -> str:
    """What a benchmark's figures were measured under, for its output (``conn_max_age``: the
    child processes' when it differs from this one's)."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    return (f"DEBUG={str(settings.DEBUG).lower()}, {db['ENGINE'].rsplit('.', 1)[-1]}, "
            f"CONN_MAX_AGE={conn_max_age if conn_max_age is not None else db.get('CONN_MAX_AGE') or 0}")


def child_env(**extra) -> dict:
    """The environment for a Daphne or Celery process started by tests/stack.py (which sets
    DEBUG=true and its own SECRET_KEY otherwise): this process's DEBUG, cookies and key."""
    keys = (*BENCH_ENV, "SECRET_KEY")
    return {**{k: os.environ[k] for k in keys if k in os.environ}, **extra}


def positive(kind, low, high):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (low <= value <= high) or (isinstance(value, float) and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text} is not between {low} and {high}")
        return value
    return parse


def machine() -> str:
    return (f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}")


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (0–100), by the inclusive method; the single value for one, NaN for
    none."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


def cpu_seconds(pid: int) -> float:
    """User and system CPU a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pss_mb(pid: int) -> float:
    """Proportional set size: pages shared with other processes counted by their share, so
    the sum over processes is the memory they take together (RSS counts shared pages in
    each)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_user(username: str = "bench"):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username, password=PASSWORD)


def wait_for(predicate, timeout: float = 120.0, interval: float = 0.005, what: str = "it"):
    """tests/stack.py's wait, polling faster by default (imported late: it needs settings)."""
    from tests.stack import wait_until

    return wait_until(predicate, timeout, interval, what)


def signed_in_client(base_url: str, username: str = "bench"):
    """An httpx client with a session from the real sign-in form, and the CSRF token."""
    import httpx

    client = httpx.Client(base_url=base_url, timeout=30, follow_redirects=False)
    page = client.get("/accounts/login/").text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = client.post("/accounts/login/", data={
        "username": username, "password": PASSWORD, "csrfmiddlewaretoken": token})
    if response.status_code != 302:
        raise RuntimeError(f"sign-in failed: HTTP {response.status_code}")
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
    client.headers["Referer"] = base_url + "/"
    return client
