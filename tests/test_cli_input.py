"""The command line takes what the web forms take: a bad option value (NaN, infinity, a
negative budget, zero tokens, numbers past the form's limits) exits 2 with one line on
stderr and no traceback, as from a terminal; a command run on a database that was
never migrated says what to run, and creates nothing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command, execute_from_command_line

from agents_app.models import Run
from tests.test_deploy_settings import ROOT

RUN = ["run_pattern", "plan_execute", "--task", "Plan a picnic"]
BAD_OPTIONS = [
    (RUN + ["--max-cost", "nan"], "--max-cost: Enter a number"),
    (RUN + ["--max-cost", "inf"], "--max-cost: Enter a number"),
    (RUN + ["--max-cost", "-1"], "--max-cost: takes 0.0001 to 1000"),
    (RUN + ["--max-cost", "1e30"], "--max-cost: takes 0.0001 to 1000"),
    (RUN + ["--max-cost", ""], "--max-cost: give an amount in USD"),
    (RUN + ["--max-tokens", "0"], "--max-tokens: takes 100 to 50000000"),
    (RUN + ["--max-tokens", "9" * 25], "--max-tokens: takes 100 to 50000000"),
    (RUN + ["--max-tokens", "ten"], "--max-tokens: Enter a whole number"),
    (["run_pattern", "reflective", "--task", "x", "--max-reflections", "-3"],
     "--max-reflections: takes 1 to 10"),
    (["run_pattern", "react", "--task", "x", "--max-tool-calls", "nan"],
     "--max-tool-calls: Enter a whole number"),
    (["review", "x.diff", "--min-confidence", "nan"], "--min-confidence: Enter a number"),
    (["review", "x.diff", "--min-confidence", "2"], "--min-confidence: takes 0"),
    (["devstack", "--port", "70000"], "--port: takes 1 to 65535"),
    (["run_pattern", "plan_execute"], "the following arguments are required: --task"),
]


def cli_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "DJANGO_")) and k != "DATABASE_URL"}
    env.update({"DEBUG": "true", "SECRET_KEY": "test-secret-key", "QUORUM_VAR_DIR": str(tmp_path),
                "DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.sqlite3'}",
                "QUORUM_ALLOW_MODEL_REQUESTS": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    return env


def run_all(commands: list[list[str]], env: dict) -> list[subprocess.CompletedProcess]:
    """The commands side by side (each starts Django: seconds on a busy machine)."""
    procs = [subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args in commands]
    results = []
    for args, proc in zip(commands, procs, strict=True):
        out, err = proc.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return results


@pytest.mark.parametrize("args, message", BAD_OPTIONS)
def test_bad_option_values_exit_2_with_one_line(args, message, capsys):
    # The terminal's path (manage.py's argv through run_from_argv), in this process.
    with pytest.raises(SystemExit) as exited:
        execute_from_command_line(["manage.py", *args])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert exited.value.code == 2, (args, err)
    assert len(lines) == 1 and "Traceback" not in err, (args, err)
    assert message in lines[0] and "(see --help)" in lines[0], (args, lines[0])
    assert out == "", args


@pytest.mark.slow  # three fresh Django processes
def test_a_database_never_migrated_says_what_to_run(tmp_path):
    diff = tmp_path / "change.diff"
    diff.write_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    env = cli_env(tmp_path)
    procs = run_all([RUN, ["review", str(diff)], RUN + ["--max-cost", "nan"]], env)
    # A bad option is refused before the database is looked at, in a real process too.
    assert procs[2].returncode == 2 and "Traceback" not in procs[2].stderr, procs[2].stderr
    assert procs[2].stderr.strip().splitlines() == [
        "manage.py run_pattern: error: argument --max-cost: Enter a number. (see --help)"]
    for proc in procs[:2]:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2, (proc.args, proc.stderr)
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "not set up" in lines[0] and "make dev" in lines[0], lines[0]
        assert "python manage.py migrate" in lines[0], lines[0]
    # Nothing was half-made: no table exists in the fresh file.
    with sqlite3.connect(tmp_path / "fresh.sqlite3") as db:
        tables = db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                            "AND name NOT LIKE 'sqlite_%'").fetchall()
    assert tables in ([], [("django_migrations",)])


@pytest.mark.slow  # fresh processes
def test_a_missing_or_bad_setting_is_one_line_not_a_traceback(tmp_path):
    diff = tmp_path / "change.diff"
    diff.write_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    no_key = {k: v for k, v in cli_env(tmp_path).items() if k not in ("SECRET_KEY", "DEBUG")}
    bad_url = {**cli_env(tmp_path), "DATABASE_URL": "nosuchdb://x"}
    procs = [run_all([["review", str(diff)], RUN], no_key), run_all([RUN], bad_url)]
    for proc in [*procs[0], *procs[1]]:
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert procs[0][0].stderr.strip() == ("manage.py: Set SECRET_KEY (or DEBUG=true for local "
                                          "development).")
    assert procs[1][0].stderr.strip() == (
        "manage.py: DATABASE_URL names no database Quorum can use: give postgres://user:"
        "password@host/name or sqlite:///path/to/file.sqlite3.")


BAD_SETTINGS = [
    ("CONN_MAX_AGE", "abc", "CONN_MAX_AGE takes a whole number; it is set to something else."),
    ("QUORUM_MAX_TOKENS", "1.5", "QUORUM_MAX_TOKENS takes a whole number"),
    ("QUORUM_MAX_COST_USD", "12abc", "QUORUM_MAX_COST_USD takes a number;"),
    ("QUORUM_LLM_TIMEOUT", "nan", "QUORUM_LLM_TIMEOUT takes a finite number, not NaN"),
    ("QUORUM_LLM_TIMEOUT", "-inf", "QUORUM_LLM_TIMEOUT takes a finite number, not NaN"),
    ("QUORUM_LLM_TIMEOUT", "-5", "QUORUM_LLM_TIMEOUT takes a number of 0 or more"),
    ("QUORUM_MAX_TOKENS", "-1", "QUORUM_MAX_TOKENS takes a whole number of 0 or more"),
    ("TIME_ZONE", "Mars/Base", "TIME_ZONE is not a time zone name"),
    ("QUORUM_LOG_LEVEL", "LOUD", "QUORUM_LOG_LEVEL takes DEBUG, INFO, WARNING"),
    ("DATABASE_URL", "mysqlx://quorum:hunter2-secret@db/x", "DATABASE_URL names no database"),
    ("QUORUM_EMBEDDED_REDIS_PORT", "70000",
     "QUORUM_EMBEDDED_REDIS_PORT takes a port number from 1 to 65535."),
    ("QUORUM_EMBEDDED_REDIS_PORT", "0",
     "QUORUM_EMBEDDED_REDIS_PORT takes a port number from 1 to 65535."),
    # Huge numbers stop start-up: each once failed the first run that stored or slept on it
    # (a 500, a run stuck with decimal.InvalidOperation or OverflowError, a run asleep).
    ("QUORUM_MAX_COST_USD", "10000000",
     "QUORUM_MAX_COST_USD takes a number up to 1,000; it is set above that."),
    ("QUORUM_MAX_TOKENS", "100000000000000000000",
     "QUORUM_MAX_TOKENS takes a whole number up to 50,000,000; it is set above that."),
    ("QUORUM_STAGE_LEASE_SECONDS", "1e300",
     "QUORUM_STAGE_LEASE_SECONDS takes a number up to 1,000,000,000; it is set above that."),
    ("QUORUM_OFFLINE_LATENCY", "601", "QUORUM_OFFLINE_LATENCY takes a number up to 600;"),
    ("QUORUM_REVIEW_MIN_CONFIDENCE", "5",
     "QUORUM_REVIEW_MIN_CONFIDENCE takes a number up to 1; it is set above that."),
    ("CONN_MAX_AGE", "2147483648",
     "CONN_MAX_AGE takes a whole number up to 2,147,483,647; it is set above that."),
]


@pytest.mark.slow  # fresh processes
def test_each_bad_setting_is_named_on_one_line_without_its_value(tmp_path):
    procs = [subprocess.Popen([sys.executable, "manage.py", "check"], cwd=ROOT,
                              env={**cli_env(tmp_path), var: value}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for var, value, _ in BAD_SETTINGS]
    for (var, value, message), proc in zip(BAD_SETTINGS, procs, strict=True):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 2 and "Traceback" not in err, (var, err)
        assert err.count("\n") == 1 and message in err, (var, err)
        assert value not in err and "hunter2" not in err, err  # never the value
    # An empty value is unset (the default); Python's number forms are numbers.
    fine = run_all([["check"]], {**cli_env(tmp_path), "DATABASE_URL": "",
                                 "QUORUM_MAX_TOKENS": "200_000", "CONN_MAX_AGE": "",
                                 # each upper bound itself is allowed
                                 "QUORUM_MAX_COST_USD": "1000", "QUORUM_OFFLINE_LATENCY": "600",
                                 "QUORUM_STAGE_LEASE_SECONDS": "1e9",
                                 "QUORUM_REVIEW_MIN_CONFIDENCE": "1",
                                 "QUORUM_MAX_STEPS": "2147483647"})[0]
    assert fine.returncode == 0, fine.stderr


@pytest.mark.django_db
@pytest.mark.parametrize("args, message", [
    (["debate", "--task", "x", "--max-rounds", "6"],
     "--max-rounds: takes 1 to 5"),
    (["plan_execute", "--task", "x", "--user", "nobody"], "No user"),
    (["plan_execute", "--task", "  "], "--task is empty"),
    (["plan_execute", "--task", "x", "--model", "judge=gpt-4o"], "ROLE=NAME"),
])
def test_input_checked_after_parsing_is_bad_input_too(args, message):
    with pytest.raises(CommandError, match=message) as caught:
        call_command("run_pattern", *args, stdout=StringIO())
    assert caught.value.returncode == 2
    assert not Run.objects.exists()


@pytest.mark.slow  # fresh processes
def test_a_worker_and_make_dev_refuse_a_pattern_setting_out_of_range(tmp_path):
    """Checked at start, before the database: one line naming the setting, exit 2, and
    nothing migrated or started."""
    env = {**cli_env(tmp_path), "QUORUM_MAX_STEPS": "100", "QUORUM_CHANGE_MAX_ROUNDS": "0"}
    for done in run_all([["worker"], ["devstack", "--prepare"]], env):
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("manage.py: QUORUM_MAX_STEPS is out of range for Plan "
                                      "and execute: Input should be less than or equal to 30. "
                                      "QUORUM_CHANGE_MAX_ROUNDS is out of range"), done.stderr
    assert not (tmp_path / "fresh.sqlite3").exists()


@pytest.mark.slow  # fresh processes
def test_the_web_server_refuses_a_bad_setting_on_one_line(tmp_path):
    """Daphne imports config.asgi before it listens (the Dockerfile starts it alone): a bad
    setting and a pattern setting out of range stop it as they stop manage.py."""
    cases = [({"QUORUM_MAX_COST_USD": "10000000"},
              "quorum: QUORUM_MAX_COST_USD takes a number up to 1,000; it is set above that.\n"),
             ({"QUORUM_MAX_STEPS": "100"},
              "quorum: QUORUM_MAX_STEPS is out of range for Plan and execute: Input should be "
              "less than or equal to 30.\n"),
             ({}, "")]
    procs = [subprocess.Popen([sys.executable, "-c", "import config.asgi"], cwd=ROOT,
                              env={**cli_env(tmp_path), **extra}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for extra, _ in cases]
    for (extra, message), proc in zip(cases, procs, strict=True):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == (2 if message else 0), (extra, err)
        assert "Traceback" not in err and "10000000" not in err, err  # nor the value
        assert err.count("quorum:") == (1 if message else 0) and err.endswith(message), err


def test_pattern_settings_in_range_are_not_reported(settings):
    from agents_app.option_fields import setting_errors
    from agents_app.patterns.registry import load_all

    settings.QUORUM_MAX_STEPS, settings.QUORUM_MAX_REPLANS = 30, 0
    settings.QUORUM_CHANGE_MAX_ROUNDS = 1
    assert setting_errors(load_all()) == []
    settings.QUORUM_MAX_REPLANS = 11
    assert setting_errors(load_all()) == [
        "QUORUM_MAX_REPLANS is out of range for Plan and execute: Input should be less than or "
        "equal to 10."]


@pytest.mark.django_db
def test_a_pattern_setting_out_of_range_is_named_on_the_command_line_too(settings):
    settings.QUORUM_MAX_STEPS = 100
    with pytest.raises(CommandError, match="the site's setting QUORUM_MAX_STEPS is out of "
                                           "range; give this option a value instead") as caught:
        call_command("run_pattern", "plan_execute", "--task", "x", stdout=StringIO())
    assert caught.value.returncode == 2
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_good_budgets_reach_the_run():
    call_command("run_pattern", "plan_execute", "--task", "Plan a picnic, then pack.",
                 "--max-cost", "0.5", "--max-tokens", "1000", stdout=StringIO())
    run = Run.objects.get()
    assert str(run.max_cost_usd) == "0.5000" and run.max_tokens == 1000


@pytest.mark.django_db
@pytest.mark.parametrize("args, flag", [
    (["vote", "--task", "x", "--max-steps", "5"], "--max-steps"),
    (["reflective", "--task", "x", "--positions", "A: yes\nB: no"], "--positions"),
    (["debate", "--task", "x", "--auto-approve"], "--auto-approve"),
])
def test_a_flag_of_another_pattern_is_refused_not_ignored(args, flag):
    with pytest.raises(CommandError, match=f"{flag} does not apply to {args[0]}") as caught:
        call_command("run_pattern", *args, stdout=StringIO())
    assert caught.value.returncode == 2
