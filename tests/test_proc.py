"""The one way Quorum starts a child process (common/proc.py)."""

import os
import sys
import time

import pytest

from common import proc


def test_child_sees_none_of_our_secrets_and_no_git_redirection(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-children")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@db/quorum")
    monkeypatch.setenv("GIT_DIR", "/elsewhere/.git")
    result = proc.run([sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"],
                      cwd=tmp_path, timeout=30)
    import json

    env = json.loads(result.stdout)
    assert result.returncode == 0
    assert "OPENAI_API_KEY" not in env and "DATABASE_URL" not in env and "GIT_DIR" not in env
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert env["PATH"] == os.environ["PATH"]


def test_extra_variables_and_a_throwaway_home(tmp_path):
    result = proc.run(["sh", "-c", 'printf "%s|%s|%s" "$HOME" "$TMPDIR" "$GIT_AUTHOR_NAME"'],
                      cwd=tmp_path, timeout=30, home=str(tmp_path),
                      env={"GIT_AUTHOR_NAME": "Quorum"})
    assert result.stdout.decode() == f"{tmp_path}|{tmp_path}|Quorum"


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"  # a zombie is dead, not yet reaped
    except FileNotFoundError:
        return True


def test_time_limit_kills_the_whole_group(tmp_path):
    pidfile = tmp_path / "grandchild"
    result = proc.run(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], cwd=tmp_path,
                      timeout=0.5)
    assert result.timed_out and result.returncode is None
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _gone(grandchild)


def test_output_capped_head_and_tail(tmp_path):
    result = proc.run(["seq", "100000"], cwd=tmp_path, timeout=30, limit=10, tail=12)
    assert result.truncated
    assert result.stdout == b"1\n2\n3\n4\n5\n" and result.stdout_tail.endswith(b"100000\n")


def test_stop_when_full_stops_an_endless_writer(tmp_path):
    result = proc.run(["yes"], cwd=tmp_path, timeout=30, limit=4096, stop_when_full=True)
    assert result.truncated and len(result.stdout) == 4096 and not result.timed_out


def test_stdin_is_fed_and_stderr_kept_apart(tmp_path):
    result = proc.run(["sh", "-c", "cat; echo oops >&2; exit 3"], cwd=tmp_path, timeout=30,
                      stdin=b"abc")
    assert (result.returncode, result.stdout, result.stderr) == (3, b"abc", b"oops\n")


def test_a_child_that_never_reads_stdin_cannot_block_us(tmp_path):
    result = proc.run(["sleep", "0.1"], cwd=tmp_path, timeout=30, stdin=b"x" * 5_000_000)
    assert result.returncode == 0


def test_missing_program_is_an_oserror_for_the_caller_to_word(tmp_path):
    with pytest.raises(FileNotFoundError):
        proc.run(["no-such-program-quorum"], cwd=tmp_path, timeout=5)


class Stop(Exception):
    pass


def test_a_watch_that_raises_kills_the_group_and_ends_the_wait(tmp_path):
    pidfile = tmp_path / "grandchild"
    calls = []

    def check():
        calls.append(time.monotonic())
        if len(calls) == 3:
            raise Stop("cancelled")

    started = time.monotonic()
    child = proc.start(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], cwd=tmp_path)
    with proc.watched(check, every=0.05), pytest.raises(Stop):
        child.wait(30)
    assert time.monotonic() - started < 5 and len(calls) == 3
    deadline = time.monotonic() + 10
    while not _gone(int(pidfile.read_text())) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _gone(int(pidfile.read_text())) and _gone(child.proc.pid)
    assert child.proc.stdout.closed


def test_a_quiet_watch_changes_nothing_and_the_time_limit_still_holds(tmp_path):
    calls = []
    with proc.watched(lambda: calls.append(1), every=0.05):
        done = proc.run([sys.executable, "-c", "import time; time.sleep(0.4); print('ok')"],
                        cwd=tmp_path, timeout=30)
        late = proc.run(["sleep", "60"], cwd=tmp_path, timeout=0.3)
    assert done.returncode == 0 and done.stdout == b"ok\n" and not done.timed_out
    assert late.timed_out and late.returncode is None and late.seconds < 5
    assert len(calls) >= 4  # checked while each waited
    calls.clear()
    proc.run(["sleep", "0.2"], cwd=tmp_path, timeout=30)  # outside the block: not watched
    assert calls == []
