"""devstack's worker processes: ``manage.py worker`` (one thread-pool Celery process per core,
forked from one parent), beat in a process of its own, and bad settings refused in one line."""

import shlex
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents_app.management.commands import devstack


def test_the_workers_are_one_kept_alive_parent_forking_one_per_process(settings):
    """``manage.py worker`` forks the workers (worker1@…, worker2@…) from one warm parent,
    which restarts a child that dies; the parent itself is kept alive (its children die with
    it), and no worker runs beat."""
    wrapped = shlex.split(devstack.workers_command(Path("/venv/bin"), processes=3,
                                                   concurrency=70))
    assert wrapped[:wrapped.index("--") + 1] == ["/venv/bin/python", "-m", "common.keepalive",
                                                 "--name", "workers", "--"]
    command = wrapped[wrapped.index("--") + 1:]
    assert command[:3] == ["/venv/bin/python", str(Path(settings.BASE_DIR) / "manage.py"),
                           "worker"]
    assert command[command.index("--processes") + 1] == "3"
    assert command[command.index("--concurrency") + 1] == "70"
    assert "--beat" not in command and "-B" not in command


def test_beat_is_a_process_of_its_own_kept_alive():
    """An embedded beat (``worker --beat``) is a child process: a worker killed with SIGKILL
    left it running and the worker started again added a second beat (QA, 2026-11-26)."""
    beat = shlex.split(devstack.beat_command(Path("/b"), Path("/v")))
    assert beat[:beat.index("--") + 1] == ["/b/python", "-m", "common.keepalive", "--name",
                                           "beat", "--"]
    command = beat[beat.index("--") + 1:]
    assert command[:4] == ["/b/celery", "-A", "config", "beat"]
    assert command[command.index("--schedule") + 1] == "/v/celerybeat-schedule"


@pytest.mark.parametrize("value", ["0", "65", "two", "1.5", "-1"])
def test_bad_process_counts_are_refused(monkeypatch, value):
    monkeypatch.setenv("QUORUM_WORKER_PROCESSES", value)
    with pytest.raises(CommandError) as err:
        call_command("devstack")
    assert str(err.value).startswith("QUORUM_WORKER_PROCESSES: ")  # the variable, not a flag
    monkeypatch.delenv("QUORUM_WORKER_PROCESSES")
    with pytest.raises(CommandError) as err:
        call_command("devstack", "--processes", value)
    assert "--processes" in str(err.value)


def test_processes_concurrency_and_port_come_from_the_environment(monkeypatch):
    started = {}
    monkeypatch.setattr(devstack, "Manager", lambda: pytest.fail("the stack started"))

    def workers_command(bin_dir, processes, concurrency):
        started.update(processes=processes, concurrency=concurrency)
        raise SystemExit(0)

    monkeypatch.setattr(devstack, "workers_command", workers_command)
    monkeypatch.setattr(devstack, "Manager", type("M", (), {"add_process": lambda *a, **k: None}))
    monkeypatch.setenv("QUORUM_WORKER_PROCESSES", "3")
    monkeypatch.setenv("QUORUM_WORKER_CONCURRENCY", "40")
    monkeypatch.setenv("QUORUM_PORT", "8123")
    with pytest.raises(SystemExit):
        call_command("devstack")
    assert started == {"processes": 3, "concurrency": 40}
    with pytest.raises(SystemExit):
        call_command("devstack", "--processes", "2")  # the option wins over the variable
    assert started["processes"] == 2


@pytest.mark.parametrize(("value", "said"), [
    ("abc", "QUORUM_PORT: Enter a whole number."), ("70000", "QUORUM_PORT: takes 1 to 65535."),
    ("0", "QUORUM_PORT: takes 1 to 65535."), ("-1", "QUORUM_PORT: takes 1 to 65535."),
    ("80.5", "QUORUM_PORT: Enter a whole number."),
])
def test_a_bad_port_from_the_environment_is_refused_naming_the_variable(monkeypatch, value,
                                                                       said):
    monkeypatch.setenv("QUORUM_PORT", value)
    with pytest.raises(CommandError) as err:
        call_command("devstack")
    assert str(err.value) == said
    assert err.value.returncode == 2


def test_make_dev_checks_its_settings_before_it_migrates(monkeypatch):
    """``make dev`` is ``devstack --prepare``: a bad setting is its first line (exit 2) and
    nothing is migrated; good settings migrate, make the first user, then start the stack."""
    done = []
    monkeypatch.setattr(devstack, "call_command", lambda name, **kw: done.append(name))
    monkeypatch.setattr(devstack, "Manager", lambda: done.append("stack") or pytest.fail("ok"))
    monkeypatch.setenv("QUORUM_PORT", "abc")
    with pytest.raises(CommandError) as err:
        call_command("devstack", "--prepare")
    assert err.value.returncode == 2 and done == []
    monkeypatch.setenv("QUORUM_PORT", "8123")
    monkeypatch.setenv("QUORUM_WORKER_CONCURRENCY", "nan")
    with pytest.raises(CommandError):
        call_command("devstack", "--prepare")
    assert done == []
    monkeypatch.delenv("QUORUM_WORKER_CONCURRENCY")
    with pytest.raises(pytest.fail.Exception):
        call_command("devstack", "--prepare")
    assert done == ["migrate", "ensure_first_user", "stack"]


def test_make_dev_runs_devstack_prepare():
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    dev = makefile.split("\ndev:", 1)[1].split("\n\n", 1)[0]
    assert "manage.py devstack --prepare" in dev and "migrate" not in dev


class FakeManager:
    """honcho's Manager, recording what would start (and starting nothing)."""

    started: dict = {}

    def __init__(self):
        FakeManager.started = {}
        self.returncode = 0

    def add_process(self, name, cmd, env=None):
        FakeManager.started[name] = env

    def loop(self):
        pass


def run_devstack(monkeypatch, *args) -> str:
    out = StringIO()
    monkeypatch.setattr(devstack, "Manager", FakeManager)
    with pytest.raises(SystemExit):
        call_command("devstack", *args, stdout=out)
    return out.getvalue()


def test_make_dev_gives_the_offline_model_a_visible_pace_and_says_so(monkeypatch, settings):
    """Issue 32: offline runs finished before their page had loaded, so a new user never saw
    the live view. make dev (and only it) slows each offline call to 0.4 s, and says so."""
    monkeypatch.delenv("QUORUM_OFFLINE_LATENCY", raising=False)
    assert settings.QUORUM_OFFLINE_LATENCY == 0  # the setting's own default: no pace
    said = run_devstack(monkeypatch, "--port", "8123")
    for name in ("web", "workers", "beat"):
        assert FakeManager.started[name]["QUORUM_OFFLINE_LATENCY"] == "0.4"
    line = said.strip().splitlines()[-1]
    assert line.startswith("Quorum on http://127.0.0.1:8123 — ")
    assert "offline model: 0.4 s a call (make dev's pace; QUORUM_OFFLINE_LATENCY=0 for none)" \
        in line


@pytest.mark.parametrize(("value", "said"), [("0", "offline model: no pace"),
                                             ("1.5", "offline model: 1.5 s a call")])
def test_quorum_offline_latency_still_sets_the_pace(monkeypatch, value, said):
    monkeypatch.setenv("QUORUM_OFFLINE_LATENCY", value)
    out = run_devstack(monkeypatch)
    assert FakeManager.started["workers"]["QUORUM_OFFLINE_LATENCY"] == value
    assert said in out and "(QUORUM_OFFLINE_LATENCY)" in out and "make dev's pace" not in out


def test_the_first_account_message_names_the_address_served(monkeypatch):
    """It said http://127.0.0.1:8000 with --port 8123."""
    monkeypatch.delenv("QUORUM_PORT", raising=False)
    monkeypatch.delenv("QUORUM_ADMIN_PASSWORD", raising=False)
    done = {}
    monkeypatch.setattr(devstack, "call_command",
                        lambda name, *args, **kw: done.setdefault(name, kw))
    run_devstack(monkeypatch, "--prepare", "--port", "8123", "--host", "127.0.0.2")
    assert done["ensure_first_user"]["url"] == "http://127.0.0.2:8123"


@pytest.mark.django_db
def test_ensure_first_user_prints_the_address_it_is_given(monkeypatch):
    monkeypatch.delenv("QUORUM_ADMIN_PASSWORD", raising=False)
    out = StringIO()
    call_command("ensure_first_user", url="http://127.0.0.1:8123", stdout=out)
    assert "sign in at http://127.0.0.1:8123\n" in out.getvalue()
