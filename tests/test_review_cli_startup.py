"""``manage.py review`` starts light (issue 17: a 10-line diff in about a second): the
analyzers start while the run is created and the analyze stage takes their report (the
same report, the tools run once), LiteLLM-free start-up pieces stay lazy, and the migration
check takes its shortcut only when every migration file is recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from agents_app import cli
from common.analyzers import AnalyzerInput, runner
from tests.review_corpus import GOOD

ROOT = Path(__file__).resolve().parents[1]
CODE = "import subprocess\n\n\ndef f(cmd):\n    subprocess.call(cmd, shell=True)\n"


def counted(monkeypatch) -> list[list[str]]:
    """Each real run of the tools (the paths it read), whichever thread made it."""
    calls: list[list[str]] = []
    real = runner._run

    def run(inputs, timeout, off):
        calls.append([i.path for i in inputs])
        return real(inputs, timeout, off)

    monkeypatch.setattr(runner, "_run", run)
    return calls


def test_a_report_started_ahead_is_taken_once_and_equals_a_fresh_one(monkeypatch):
    calls = counted(monkeypatch)
    inputs = [AnalyzerInput(path="app/a.py", text=CODE, changed_lines={5})]
    ahead = runner.start_ahead(inputs)
    assert ahead is not None and runner.start_ahead(list(inputs)) is ahead  # one run per key
    taken = runner.run_analyzers([AnalyzerInput(path="app/a.py", text=CODE,
                                                changed_lines={5})])
    assert calls == [["app/a.py"]]
    fresh = runner.run_analyzers(inputs)  # taken once: the next call runs the tools
    assert calls == [["app/a.py"], ["app/a.py"]]
    assert taken.evidence == fresh.evidence and taken.examined == fresh.examined
    assert {e["rule"] for e in taken.evidence} >= {"B602"}
    ahead.close()
    assert runner._ahead == {}


@pytest.mark.parametrize("other", [
    {"text": CODE + "x = 1\n"},
    {"changed_lines": {4, 5}},
    {"path": "app/b.py"},
    {"kind": "other"},
])
def test_other_inputs_never_take_a_report_started_ahead(monkeypatch, other):
    calls = counted(monkeypatch)
    base = {"path": "app/a.py", "text": CODE, "changed_lines": {5}, "kind": "python"}
    ahead = runner.start_ahead([AnalyzerInput(**base)])
    runner.run_analyzers([AnalyzerInput(**{**base, **other})])
    ahead.close()
    assert len(calls) == 2 and runner._ahead == {}


def test_tools_turned_off_in_between_are_honoured(monkeypatch):
    calls = counted(monkeypatch)
    inputs = [AnalyzerInput(path="app/a.py", text=CODE)]
    ahead = runner.start_ahead(inputs)
    monkeypatch.setenv(runner.DISABLE_ENV, "bandit")
    report = runner.run_analyzers(inputs)
    ahead.close()
    assert len(calls) == 2 and "bandit" not in report.tools
    assert any("bandit is turned off" in why for why in report.not_run["app/a.py"])


def test_close_waits_for_tools_nobody_asked_for(monkeypatch):
    calls = counted(monkeypatch)
    ahead = runner.start_ahead([AnalyzerInput(path="app/a.py", text=CODE)])
    ahead.close()
    assert calls == [["app/a.py"]] and runner._ahead == {}
    assert not any(t.name == "quorum-analyzers" for t in threading.enumerate())
    assert runner.start_ahead([]) is None


def test_an_error_in_the_thread_is_raised_where_the_report_is_taken(monkeypatch):
    def broken(inputs, timeout, off):
        raise RuntimeError("broken runner")

    monkeypatch.setattr(runner, "_run", broken)
    inputs = [AnalyzerInput(path="app/a.py", text=CODE)]
    ahead = runner.start_ahead(inputs)
    with pytest.raises(RuntimeError, match="broken runner"):
        runner.run_analyzers(inputs)
    ahead.close()


@pytest.mark.django_db(transaction=True)
def test_the_command_runs_the_analyzers_once_ahead_of_the_stage(monkeypatch, tmp_path):
    calls = counted(monkeypatch)
    threads: list[str] = []
    real_init = runner.Ahead.__init__

    def init(self, *args):
        real_init(self, *args)
        threads.append(self._thread.name)

    monkeypatch.setattr(runner.Ahead, "__init__", init)
    path = tmp_path / "change.diff"
    path.write_text(GOOD)
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("review", str(path), "--format", "json", stdout=out, stderr=err)
    assert exit_.value.code == 1, err.getvalue()
    assert threads == ["quorum-analyzers"] and calls == [["app/users.py"]]
    assert runner._ahead == {}
    data = json.loads(out.getvalue())
    assert {"B602", "B307"} <= {e["rule"] for f in data["findings"] for e in f["evidence"]}
    assert data["coverage"][0]["reviewed"] is True


@pytest.mark.django_db(transaction=True)
def test_bad_input_after_the_start_leaves_no_tools_running(monkeypatch, tmp_path):
    calls = counted(monkeypatch)
    path = tmp_path / "change.diff"
    path.write_text(GOOD)

    def refused(*args, **kwargs):
        from reviews_app import services

        raise services.InputError("Daily limit reached.")

    monkeypatch.setattr("reviews_app.services.start_review", refused)
    err = StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("review", str(path), stdout=StringIO(), stderr=err)
    assert exit_.value.code == 2 and "Daily limit reached." in err.getvalue()
    assert calls == [["app/users.py"]] and runner._ahead == {}
    assert not any(t.name == "quorum-analyzers" for t in threading.enumerate())


@pytest.mark.django_db
def test_the_migration_shortcut_only_when_every_file_is_recorded():
    assert cli._all_recorded(connection) is True
    cli.require_migrated()  # nothing pending: no error
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = 'reviews_app' AND name = "
                       "(SELECT MAX(name) FROM django_migrations WHERE app = 'reviews_app')")
    assert cli._all_recorded(connection) is False
    with pytest.raises(Exception, match=r"not set up \(1 migration\(s\) not applied\)"):
        cli.require_migrated()


def test_the_review_command_starts_without_daphne_httpx_litellm_or_celery(tmp_path):
    """Importing the command as ``manage.py review`` does (settings chosen by argv): Twisted
    (Daphne's app), httpx (the GitHub client) and Celery (the review runs in the command's
    process) stay out, and out of a Celery worker's settings too; runserver still gets
    Daphne's."""
    code = ("import sys, django; django.setup(); "
            "import reviews_app.management.commands.review; "
            "from django.conf import settings; "
            "print(sorted(m for m in ('twisted', 'httpx', 'litellm', 'daphne', 'celery', 'kombu') "
            "if m in sys.modules), settings.INSTALLED_APPS[0])")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "true",
           "QUORUM_VAR_DIR": str(tmp_path)}
    seen = {}
    for program, argv in (("manage.py", "review"), ("manage.py", "runserver"),
                          ("celery", "worker")):
        out = subprocess.run([sys.executable, "-c", f"import sys; sys.argv = ['{program}', "
                              f"'{argv}']; exec({code!r})"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120, check=True)
        seen[argv] = out.stdout.strip()
    assert seen["review"] == "[] django.contrib.admin", seen
    assert seen["worker"] == "[] django.contrib.admin", seen
    assert seen["runserver"].endswith("daphne"), seen


def test_a_process_that_sends_tasks_sends_them_with_quorums_app(tmp_path):
    """Celery is loaded on first use (config/__init__.py), so ``current_app`` alone would be
    Celery's default application (a broker on amqp://localhost): the engine and the task
    modules send with Quorum's configured one."""
    code = ("import sys, django; django.setup(); import config; from django.conf import settings; "
            "before = 'config.celery' in sys.modules; "
            "from agents_app.engine import scheduling; "
            "sent = []; config.celery_app.send_task = lambda *a, **k: sent.append(a); "
            "scheduling.send(5); "
            "from celery import current_app; import reviews_app.tasks; "
            "print(before, sent == [(scheduling.ADVANCE_RUN, (5,))], "
            "current_app._get_current_object() is config.celery_app, "
            "config.celery_app.conf.broker_url == settings.CELERY_BROKER_URL)")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "true",
           "QUORUM_VAR_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True", "True", "True"], out.stdout + out.stderr
