"""Cancelling a run while its stage waits on a command (a change run's test command): the
command is killed within about a second and the run ends cancelled, instead of the cancel
waiting for the command to finish or time out. The stage runs in a thread of its own against
the real database, as in a worker; the cancel comes from the test's thread, as from a page."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from agents_app import engine
from agents_app.models import Event, Run
from agents_app.patterns.plan_execute_review.service import start_change
from tests.test_change_views import OFFLINE, TASK, repo  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def running_tests(alice, repo_path, settings, marker):
    """A change run whose test command writes its pid to ``marker`` and sleeps, run in a
    thread of its own (a worker's stage thread) until the command has started. Returns the
    run, the thread, and what the thread ended with (``run``, or ``error``)."""
    command = (f"{sys.executable} -c \"import os, pathlib, time; "
               f"pathlib.Path(r'{marker}').write_text(str(os.getpid())); time.sleep(120)\"")
    settings.QUORUM_TEST_COMMANDS = [command]
    run = start_change(alice, repo=str(repo_path), base="main", task=TASK, models=OFFLINE,
                       test_command=command, auto_approve_plan=True, enqueue=False)
    outcome: dict[str, object] = {}

    def worker():
        try:
            outcome["run"] = engine.run_inline(run.pk)
        except BaseException as exc:  # reported by the test, not lost in the thread
            outcome["error"] = exc
        finally:
            from django.db import connection

            connection.close()

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline \
            and thread.is_alive():
        time.sleep(0.02)
    assert marker.exists() and not outcome, outcome
    return run, thread, outcome


def test_cancel_kills_the_running_test_command_and_ends_the_run(alice, repo, settings,  # noqa: F811
                                                                tmp_path):
    marker = tmp_path / "test-command-pid"
    run, thread, outcome = running_tests(alice, repo, settings, marker)
    pid = int(marker.read_text())
    assert _alive(pid)

    asked = time.monotonic()
    message = engine.cancel(Run.objects.get(pk=run.pk), alice)
    assert message.startswith("Cancelling") and "running a command" in message
    thread.join(timeout=30)
    took = time.monotonic() - asked
    assert not thread.is_alive() and "error" not in outcome, outcome
    assert took < 10, f"the cancel took {took:.1f} s"
    assert not _alive(pid)
    run.refresh_from_db()
    assert run.status == "cancelled", (run.status, run.error)
    assert Event.objects.filter(run=run, kind="cancel_requested").exists()
    last = Event.objects.filter(run=run).order_by("seq").last()
    assert last.message == "Cancelled on request, while a command was running.", last.message
    assert os.path.exists(marker)  # the command really ran until it was killed


def test_a_command_longer_than_the_lease_keeps_it(alice, repo, settings, tmp_path):  # noqa: F811
    """The watch also extends the stage's lease while the command runs: a test command that
    outlasts the lease no longer leaves the run looking abandoned to the sweeper."""
    settings.QUORUM_STAGE_LEASE_SECONDS = 2.0
    run, thread, _ = running_tests(alice, repo, settings, tmp_path / "started")
    time.sleep(3.0)  # past the 2 s lease the claim gave
    from django.utils import timezone

    held = Run.objects.get(pk=run.pk)
    assert held.lease_owner and held.lease_expires_at > timezone.now()
    engine.cancel(held, alice)
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert Run.objects.get(pk=run.pk).status == "cancelled"
