"""devstack's worker processes: one thread-pool Celery process per core, distinct node names,
beat in a process of its own, and bad settings refused in one line."""

import shlex
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents_app.management.commands import devstack


def test_one_process_per_core_at_most_four(monkeypatch):
    for cores, expected in ((1, 1), (2, 2), (4, 4), (16, 4), (None, 1)):
        monkeypatch.setattr(devstack.os, "cpu_count", lambda c=cores: c)
        assert devstack.default_worker_processes() == expected


def test_worker_commands_have_distinct_nodes_and_none_runs_beat():
    wrapped = [shlex.split(c) for c in devstack.worker_commands(
        Path("/venv/bin"), Path("/var/q"), processes=3, concurrency=70)]
    assert len(wrapped) == 3
    for i, w in enumerate(wrapped, 1):  # each kept alive (started again if it dies)
        assert w[:w.index("--") + 1] == ["/venv/bin/python", "-m", "common.keepalive",
                                         "--name", f"worker{i}", "--"]
    commands = [w[w.index("--") + 1:] for w in wrapped]
    nodes = [c[c.index("-n") + 1] for c in commands]
    assert nodes == ["worker1@%h", "worker2@%h", "worker3@%h"]
    assert [c.count("--beat") + c.count("-B") for c in commands] == [0, 0, 0]
    for c in commands:
        assert c[:4] == ["/venv/bin/celery", "-A", "config", "worker"]
        assert c[c.index("--pool") + 1] == "threads"
        assert c[c.index("--concurrency") + 1] == "70"


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
    assert "--processes" in str(err.value)
    monkeypatch.delenv("QUORUM_WORKER_PROCESSES")
    with pytest.raises(CommandError):
        call_command("devstack", "--processes", value)


def test_processes_and_concurrency_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("QUORUM_WORKER_PROCESSES", "3")
    monkeypatch.setenv("QUORUM_WORKER_CONCURRENCY", "40")
    opts = devstack.Command().create_parser("manage.py", "devstack").parse_args([])
    assert (opts.processes, opts.concurrency) == (3, 40)
