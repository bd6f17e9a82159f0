"""common/keepalive.py: make dev's workers are started again when they die, not when they
are told to stop, and a command that keeps dying is left down (its status returned)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common import keepalive

ROOT = Path(__file__).resolve().parents[1]


def child(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


def test_a_command_killed_by_a_signal_is_started_again(tmp_path):
    marker = tmp_path / "starts"
    # Each start appends a line; the first two kill themselves with SIGKILL, the third ends.
    script = ("import os, signal, sys; p = sys.argv[1]; open(p, 'a').write('x\\n');"
              "n = len(open(p).read().split());"
              "n < 3 and os.kill(os.getpid(), signal.SIGKILL)")
    code = keepalive.Keeper(child(script, str(marker)), "w", pause=0.01).run()
    assert code == 0
    assert marker.read_text().split() == ["x", "x", "x"]


def test_a_command_that_keeps_failing_is_left_down_with_its_status(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.setattr(keepalive, "MAX_RESTARTS", 2)
    marker = tmp_path / "starts"
    script = "import sys; open(sys.argv[1], 'a').write('x\\n'); sys.exit(3)"
    code = keepalive.Keeper(child(script, str(marker)), "worker9", pause=0.01).run()
    assert code == 3
    assert len(marker.read_text().split()) == 3  # the first start and two more
    assert "worker9 ended (status 3) 3 times" in capsys.readouterr().err


def test_sigterm_is_passed_on_and_the_command_is_not_started_again(tmp_path):
    marker = tmp_path / "starts"
    script = ("import sys, time; open(sys.argv[1], 'a').write('x\\n'); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-m", "common.keepalive", "--name", "w", "--",
                             *child(script, str(marker))], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # as a shell reports it
    time.sleep(0.3)
    assert marker.read_text().split() == ["x"]


@pytest.mark.parametrize(("argv", "said"), [
    ([], "no command"), (["--"], "no command"), (["--name", "w"], "no command"),
    (["--pause", "nan", "--", "true"], "not between"), (["--pause", "0", "--", "true"],
                                                         "not between"),
    (["--pause", "-1", "--", "true"], "not between"), (["--pause", "x", "--", "true"],
                                                       "not a number"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, said):
    out = subprocess.run([sys.executable, "-m", "common.keepalive", *argv], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and said in out.stderr, out.stderr


def test_no_leftover_child_after_sigterm(tmp_path):
    pidfile = tmp_path / "pid"
    script = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-m", "common.keepalive", "--",
                             *child(script, str(pidfile))], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_the_pause_doubles_only_while_the_command_keeps_ending(tmp_path, monkeypatch, capsys):
    """A command that ran longer than the window is started again after the first pause, not
    after a pause doubled by ends long past (QA, 2026-11-26)."""
    marker = tmp_path / "starts"
    script = ("import sys, time; p = sys.argv[1]; open(p, 'a').write('x\\n');"
              "n = len(open(p).read().split()); time.sleep(0.3); sys.exit(1 if n < 4 else 0)")
    monkeypatch.setattr(keepalive, "WINDOW", 0.2)
    assert keepalive.Keeper(child(script, str(marker)), "w", pause=0.01).run() == 0
    said = capsys.readouterr().err
    assert said.count("w ended (status 1); starting it again in 0.01 s") == 3, said


def test_the_pause_doubles_while_the_command_keeps_ending(tmp_path, capsys):
    marker = tmp_path / "starts"
    script = ("import sys; p = sys.argv[1]; open(p, 'a').write('x\\n');"
              "sys.exit(1 if len(open(p).read().split()) < 4 else 0)")
    assert keepalive.Keeper(child(script, str(marker)), "w", pause=0.01).run() == 0
    said = capsys.readouterr().err
    assert [line.rsplit(" ", 2)[-2] for line in said.splitlines()] == ["0.01", "0.02", "0.04"]
