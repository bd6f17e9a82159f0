"""``manage.py worker``: its options refused in one line like every command's, and the parent
left ready to fork (everything shared imported, no thread, no database connection)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents_app.management.commands import worker

ROOT = Path(__file__).resolve().parents[1]


def test_one_process_per_core_at_most_four(monkeypatch):
    for cores, expected in ((1, 1), (2, 2), (4, 4), (16, 4), (None, 1)):
        monkeypatch.setattr(worker.os, "cpu_count", lambda c=cores: c)
        assert worker.default_processes() == expected


@pytest.mark.parametrize(("option", "value"), [
    ("--processes", "0"), ("--processes", "65"), ("--processes", "two"),
    ("--processes", "1.5"), ("--processes", "-1"), ("--processes", "nan"),
    ("--concurrency", "0"), ("--concurrency", "1001"), ("--concurrency", "1e3"),
    ("--concurrency", ""), ("--loglevel", "LOUD"),
])
def test_bad_options_are_refused_before_anything_starts(option, value):
    with pytest.raises(CommandError) as err:
        call_command("worker", option, value)
    assert option in str(err.value)


@pytest.mark.parametrize("name", ["a b", "w@host", "", "w\x00", "../w", "wörker", "w" * 65])
def test_a_node_name_that_is_not_a_word_is_refused(name, monkeypatch):
    monkeypatch.setattr(worker, "warm_up", lambda: pytest.fail("warmed up for a bad name"))
    with pytest.raises(CommandError) as err:
        call_command("worker", "--name", name)
    assert "--name: it takes 1 to 64 letters (a-z, A-Z), digits and underscores" in str(err.value)


@pytest.mark.parametrize("name", ["1w", "worker", "W_2", "w" * 64])
def test_a_node_name_of_letters_digits_and_underscores_is_taken(name):
    parser = worker.Command().create_parser("manage.py", "worker")
    assert parser.parse_args(["--name", name]).name == name


@pytest.mark.parametrize("host", ["a b", "w@host", "", "-host", ".host", "hôte", "h" * 65,
                                  "h/1", "%h"])
def test_a_hostname_that_is_not_a_host_name_is_refused(host, monkeypatch):
    monkeypatch.setattr(worker, "warm_up", lambda: pytest.fail("warmed up for a bad hostname"))
    with pytest.raises(CommandError) as err:
        call_command("worker", f"--hostname={host}")
    assert f"--hostname: {worker.HOSTNAME_MESSAGE}" in str(err.value)


def test_the_hostname_names_every_node_and_comes_from_its_option_its_variable_or_the_machine(
        monkeypatch):
    parser = worker.Command().create_parser("manage.py", "worker")
    monkeypatch.delenv("QUORUM_WORKER_HOSTNAME", raising=False)
    assert worker.node_host(vars(parser.parse_args([]))) == "%h"
    monkeypatch.setenv("QUORUM_WORKER_HOSTNAME", "host-b.example")
    assert worker.node_host(vars(parser.parse_args([]))) == "host-b.example"
    opts = vars(parser.parse_args(["--hostname", "host_a"]))
    assert worker.node_host(opts) == "host_a"  # the option wins over the variable
    argv = worker.celery_argv("worker", 2, 70, "INFO", [], worker.node_host(opts))
    assert argv[argv.index("-n") + 1] == "worker2@host_a"


@pytest.mark.parametrize(("var", "value", "said"), [
    ("QUORUM_WORKER_PROCESSES", "0", "QUORUM_WORKER_PROCESSES: takes 1 to 64."),
    ("QUORUM_WORKER_PROCESSES", "65", "QUORUM_WORKER_PROCESSES: takes 1 to 64."),
    ("QUORUM_WORKER_PROCESSES", "1.5", "QUORUM_WORKER_PROCESSES: Enter a whole number."),
    ("QUORUM_WORKER_PROCESSES", "abc", "QUORUM_WORKER_PROCESSES: Enter a whole number."),
    ("QUORUM_WORKER_CONCURRENCY", "0", "QUORUM_WORKER_CONCURRENCY: takes 1 to 1000."),
    ("QUORUM_WORKER_CONCURRENCY", "nan", "QUORUM_WORKER_CONCURRENCY: Enter a whole number."),
    ("QUORUM_WORKER_HOSTNAME", "w@host", "QUORUM_WORKER_HOSTNAME: "
     + worker.HOSTNAME_MESSAGE[0].upper() + worker.HOSTNAME_MESSAGE[1:] + "."),
])
def test_values_from_the_environment_are_checked_naming_the_variable(monkeypatch, var, value,
                                                                     said):
    monkeypatch.setattr(worker, "warm_up", lambda: pytest.fail("warmed up for a bad value"))
    monkeypatch.setenv(var, value)
    with pytest.raises(CommandError) as err:
        call_command("worker")
    assert str(err.value) == said


def test_the_child_argv_is_a_thread_pool_worker_with_its_own_node_name():
    argv = worker.celery_argv("worker", 2, 70, "INFO", ["--without-mingle"])
    assert argv[0] == "worker"
    assert argv[argv.index("--pool") + 1] == "threads"
    assert argv[argv.index("--concurrency") + 1] == "70"
    assert argv[argv.index("-n") + 1] == "worker2@%h"
    assert argv[-1] == "--without-mingle"
    assert "--beat" not in argv and "-B" not in argv


def test_a_bad_option_from_a_terminal_is_one_line_and_status_2():
    done = subprocess.run([sys.executable, "manage.py", "worker", "--processes", "nan"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SECRET_KEY": "t", "DEBUG": "false"})
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "--processes" in done.stderr


WARM = """
import gc, json, os, sys, threading
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.db import connections
from agents_app.management.commands.worker import warm_up
from agents_app.engine import leases
warm_up()
boot = leases._identity["boot"]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, leases._identity["boot"].encode())
    os._exit(0)
os.waitpid(pid, 0)
print(json.dumps({
    "threads": [t.name for t in threading.enumerate()],
    "open": [c.alias for c in connections.all() if c.connection is not None],
    "frozen": gc.get_freeze_count(),
    "modules": [m for m in ("celery.apps.worker", "celery.concurrency.thread", "litellm",
                            "openai.resources", "reviews_app.pipeline.pattern")
                if m in sys.modules],
    "boots": [boot, os.read(r, 64).decode()],
}))
"""


@pytest.mark.slow
def test_the_parent_is_warm_and_holds_nothing_a_fork_could_share_half_used(tmp_path):
    env = {**os.environ, "SECRET_KEY": "t", "DEBUG": "false",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           "QUORUM_DEFAULT_MODEL": "openai/gpt-4o-mini", "OPENAI_API_KEY": "sk-test-not-real"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run([sys.executable, "-c", WARM], cwd=ROOT, capture_output=True,
                          text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["threads"] == ["MainThread"]
    assert got["open"] == []
    assert got["frozen"] > 100_000
    assert got["modules"] == ["celery.apps.worker", "celery.concurrency.thread", "litellm",
                              "openai.resources", "reviews_app.pipeline.pattern"]
    assert got["boots"][0] != got["boots"][1]
