"""The announcer: a command-line run's live announcements start only after a grace period
(events.announcements_deferred, around the commands that start runs): a run over sooner never
loads the channel layer and Redis, and what it would have announced is dropped; a longer run
is announced once the period ends; after the command, announcements go out at once again."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from agents_app import events

ROOT = Path(__file__).resolve().parents[1]


class Recording(events._Announcer):
    """An announcer whose serving thread records what it was asked to send."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[dict[int, int]] = []
        self.started = threading.Event()

    def _serve(self) -> None:
        self.started.set()
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                batch, self._pending = self._pending, {}
            if batch:
                self.sent.append(batch)
            with self._lock:
                if not self._pending:
                    self._idle.set()


def test_nothing_starts_before_the_grace_period_and_a_flush_then_drops_it():
    a = Recording()
    a.defer(30.0)
    a.announce(7, 3)
    a.announce(7, 5)
    assert a.deferring()
    assert a._thread is None and not a.started.is_set()
    started = time.monotonic()
    a.flush()  # at exit: nothing waits for a deferred announcement
    assert time.monotonic() - started < 0.5
    assert a.sent == []


def test_a_run_still_going_after_the_grace_period_is_announced_its_newest_event():
    a = Recording()
    a.defer(0.2)
    a.announce(7, 3)
    a.announce(8, 1)
    a.announce(7, 5)
    assert a._thread is None
    assert a.started.wait(5)
    a.flush()
    assert a.sent and a.sent[0] == {7: 5, 8: 1}
    a.announce(7, 6)  # from then on, at once
    a.flush()
    assert a.sent[-1] == {7: 6}


def test_no_grace_period_announces_at_once():
    a = Recording()
    a.announce(3, 1)
    assert a.started.wait(5)
    a.flush()
    assert a.sent == [{3: 1}]


def test_broadcast_does_not_touch_the_channel_layer_while_deferring(monkeypatch):
    a = Recording()
    a.defer(30.0)
    monkeypatch.setattr(events, "_announcer", a)
    monkeypatch.setattr(events, "get_channel_layer", lambda *x: (_ for _ in ()).throw(
        AssertionError("the channel layer was loaded")))
    events.broadcast(4, 2)
    assert a._pending == {4: 2}


def test_an_offline_cli_review_loads_neither_litellm_nor_redis(tmp_path):
    diff = tmp_path / "change.diff"
    diff.write_text("diff --git a/a.py b/a.py\nnew file mode 100644\n--- /dev/null\n+++ b/a.py\n"
                    "@@ -0,0 +1,2 @@\n+import subprocess\n+subprocess.call(input(), shell=True)\n")
    # The deferral outlasts the command however busy the machine (a loaded CI runner can take
    # longer than the 2 s a command waits before announcing).
    code = ("import sys, runpy; sys.argv = ['manage.py', 'review', sys.argv[1]]\n"
            "import agents_app.cli; agents_app.cli.CLI_ANNOUNCE_AFTER = 600.0\n"
            "try:\n    runpy.run_path('manage.py', run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    print('exit', e.code, sorted(m for m in ('litellm', 'redis', 'channels_redis')"
            " if m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", DEBUG="true",
               QUORUM_VAR_DIR=str(tmp_path), QUORUM_ALLOW_MODEL_REQUESTS="false")
    for name in ("QUORUM_DEFAULT_MODEL", "DATABASE_URL"):
        env.pop(name, None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                   check=True, timeout=300)
    out = subprocess.run([sys.executable, "-c", code, str(diff)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "exit 1 []", out.stderr[-2000:]


def test_a_batch_is_sent_in_one_turn_and_only_the_failed_sends_are_kept():
    import asyncio

    sent = []

    class Layer:
        async def group_send(self, group, message):
            if group == "run-2":
                raise ConnectionError("redis away")
            sent.append((group, message["seq"]))

    loop = asyncio.new_event_loop()
    try:
        failed = events._Announcer._send_all(loop, Layer(), {1: 3, 2: 4, 5: 1})
    finally:
        loop.close()
    assert failed == {2: 4}
    assert sorted(sent) == [("run-1", 3), ("run-5", 1)]


def test_after_the_deferring_command_announcements_go_out_at_once_again():
    a = Recording()
    a.defer(30.0)
    a.announce(9, 2)
    a.end_deferral()
    assert not a.deferring() and a._pending == {} and a._timer is None
    a.announce(9, 3)
    assert a.started.wait(5)
    a.flush()
    assert a.sent == [{9: 3}]


def test_a_command_line_run_leaves_the_process_announcing_at_once(db, django_user_model):
    """In a process that goes on after the command (tests, a shell), the deferral ends with
    the command: a later announcement is not held back or lost."""
    from django.core.management import call_command

    django_user_model.objects.create_superuser("root", password="root-pass-12345")
    call_command("run_pattern", "plan_execute", "--task", "Collect the logs, then write a "
                 "report.", "--auto-approve", stdout=io.StringIO())
    assert not events._announcer.deferring()
    assert events._announcer._timer is None
