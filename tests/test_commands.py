"""Management commands: run_pattern (headless runs through the engine), ensure_first_user,
and the embedded Redis command line of devstack."""

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from agents_app.management.commands.devstack import embedded_redis_command, redis_server_binary
from agents_app.models import Approval, Run

pytestmark = pytest.mark.django_db


def run_cmd(*args):
    out = StringIO()
    call_command("run_pattern", *args, stdout=out)
    return out.getvalue()


def test_run_pattern_json_completes_with_auto_approve(alice):
    out = run_cmd("plan_execute", "--task", "Collect logs, then find the error.",
                  "--auto-approve", "--json", "--user", "alice")
    data = json.loads(out)
    assert data["status"] == "completed" and data["offline"] is True
    assert data["plan"] == ["Collect logs", "Find the error"]
    assert [s["status"] for s in data["steps"]] == ["done", "done"]
    assert "Offline model" in data["answer"] and data["calls"] == 4
    run = Run.objects.get(pk=data["run"])
    assert run.owner == alice and Approval.objects.get(run=run).action == "auto_approve"


def test_run_pattern_without_auto_approve_stops_at_the_gate():
    out = run_cmd("plan_execute", "--task", "Plan a picnic, then pack.")
    assert "Awaiting plan approval" in out and "--auto-approve" in out
    assert Run.objects.get().owner.username == "cli"


def test_run_pattern_model_override(scripted):
    out = run_cmd("plan_execute", "--task", "a, then b", "--auto-approve", "--json",
                  "--model", "planner=offline/default")
    assert json.loads(out)["status"] == "completed"


@pytest.mark.parametrize("args, message", [
    (["--task", "  "], "empty"),
    (["--task", "x", "--model", "judge=gpt-4o"], "ROLE=NAME"),
    (["--task", "x", "--model", "planner=no-such-model-xyz"], "Unknown model"),
    (["--task", "x", "--user", "nobody"], "No user"),
])
def test_run_pattern_bad_input(args, message):
    with pytest.raises(CommandError, match=message):
        run_cmd("plan_execute", *args)
    assert not Run.objects.exists()


def test_ensure_first_user_creates_once(monkeypatch):
    monkeypatch.delenv("QUORUM_ADMIN_PASSWORD", raising=False)
    out = StringIO()
    call_command("ensure_first_user", stdout=out)
    user = get_user_model().objects.get()
    assert user.username == "admin" and user.is_superuser
    password = out.getvalue().split("password: ")[1].split()[0]
    assert user.check_password(password) and "shown only once" in out.getvalue()
    again = StringIO()
    call_command("ensure_first_user", stdout=again)
    assert again.getvalue() == "" and get_user_model().objects.count() == 1


def test_ensure_first_user_from_environment(monkeypatch):
    monkeypatch.setenv("QUORUM_ADMIN_USERNAME", "lead")
    monkeypatch.setenv("QUORUM_ADMIN_PASSWORD", "s3cret-pass-word")
    out = StringIO()
    call_command("ensure_first_user", stdout=out)
    assert get_user_model().objects.get(username="lead").check_password("s3cret-pass-word")
    assert "s3cret" not in out.getvalue()
    assert "shown only once" not in out.getvalue()  # it was never shown


def test_embedded_redis_is_loopback_only_and_keeps_data_under_var(tmp_path):
    cmd = embedded_redis_command(6399, tmp_path / "redis")
    assert redis_server_binary() in cmd
    assert "--bind 127.0.0.1" in cmd and "--port 6399" in cmd
    assert f"--dir {tmp_path / 'redis'}" in cmd and (tmp_path / "redis").is_dir()
