"""common/forks.py, the parent of ``manage.py worker``'s children: each slot forked once, a
child that ends unasked forked again, one that keeps ending stops them all, signals passed on
(SIGHUP as SIGTERM), and no child outliving its parent. Each case runs in a Python process of its own (forking the test
runner, with its threads, is not what the worker does)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.keepalive import exit_status
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]

# The entry each child runs, by mode: it appends "slot pid" to the file named in argv[2].
DRIVER = """
import os, signal, sys, time
from common import forks, keepalive
mode, path = sys.argv[1], sys.argv[2]
keepalive.MAX_RESTARTS = 2

def entry(slot):
    with open(path, "a") as f:
        f.write(f"{slot} {os.getpid()} {time.time()}\\n")
    starts = sum(1 for line in open(path) if line.split()[0] == str(slot))
    if mode == "crash-twice":  # slot 2 is killed by a signal twice, then stays
        if slot == 2 and starts <= 2:
            os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "keeps-failing":  # slot 1 always fails; slot 2 stays
        if slot == 1:
            return 3
    elif mode == "keeps-ending-cleanly":  # slot 1 always ends with 0, unasked
        if slot == 1:
            return 0
    elif mode == "both-crash-once":  # every slot is killed at its first start
        if starts == 1:
            os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "raises":
        raise RuntimeError("boom in the child")
    time.sleep(60)  # until a signal
    return 0

sys.exit(forks.Forks(entry, int(sys.argv[3]), name="w", pause=float(sys.argv[4])).run())
"""


def drive(mode: str, path: Path, count: int = 2, pause: float = 0.01) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", DRIVER, mode, str(path), str(count),
                             str(pause)], cwd=ROOT, stderr=subprocess.PIPE, text=True)


def starts(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [(int(a), int(b)) for a, b, _ in (line.split() for line in path.read_text().splitlines())]


def times(path: Path, slot: int) -> list[float]:
    return [float(t) for a, _, t in (line.split() for line in path.read_text().splitlines())
            if int(a) == slot]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_each_slot_is_forked_once_under_a_name_of_its_own(tmp_path):
    log = tmp_path / "starts"
    proc = drive("wait", log, count=3)
    wait_until(lambda: len(starts(log)) == 3, 30, what="three children")
    names = {slot: Path(f"/proc/{pid}/comm").read_text().strip() for slot, pid in starts(log)}
    assert names == {1: "w1", 2: "w2", 3: "w3"}
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    got = starts(log)
    assert sorted(slot for slot, _ in got) == [1, 2, 3]
    assert len({pid for _, pid in got}) == 3
    assert proc.pid not in {pid for _, pid in got}


def test_a_child_killed_by_a_signal_is_forked_again(tmp_path):
    log = tmp_path / "starts"
    proc = drive("crash-twice", log)
    wait_until(lambda: [slot for slot, _ in starts(log)].count(2) == 3, 30,
               what="slot 2 forked a third time")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert [slot for slot, _ in starts(log)].count(1) == 1
    assert [slot for slot, _ in starts(log)].count(2) == 3
    assert "w2 ended (signal 9); starting it again in 0.01 s" in err
    assert "w2 ended (signal 9); starting it again in 0.02 s" in err  # doubling


def test_each_slot_waits_its_own_pause_not_the_others(tmp_path):
    """Both children killed at once come back together, one pause later: the parent does not
    sleep through one slot's pause before it reaps the next (QA, 2026-11-26)."""
    log = tmp_path / "starts"
    proc = drive("both-crash-once", log, pause=1.0)
    wait_until(lambda: len(starts(log)) == 4, 30, what="both slots forked again")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    first = [times(log, slot)[0] for slot in (1, 2)]
    again = [times(log, slot)[1] for slot in (1, 2)]
    assert all(0.9 < b - a < 1.9 for a, b in zip(first, again, strict=True)), (first, again)
    assert abs(again[0] - again[1]) < 0.5, again


def test_a_child_ending_cleanly_unasked_is_forked_again_and_one_that_keeps_ending_stops_all(
        tmp_path):
    """Only the parent's signal stops the set: a worker told to shut down on its own (Celery's
    remote shutdown, a SIGHUP sent to it) ends with 0, and its slot must not stay empty."""
    log = tmp_path / "starts"
    proc = drive("keeps-ending-cleanly", log)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "w1 ended (status 0); starting it again" in err
    assert "w1 ended (status 0) 3 times within 60 s; leaving it down" in err
    assert not any(alive(pid) for _, pid in starts(log))


def test_a_child_that_keeps_failing_stops_the_others_and_its_status_is_returned(tmp_path):
    log = tmp_path / "starts"
    proc = drive("keeps-failing", log)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert [slot for slot, _ in starts(log)].count(1) == 3  # the first start and two more
    assert "w1 ended (status 3) 3 times within 60 s; leaving it down" in err
    assert not any(alive(pid) for _, pid in starts(log))


def test_an_exception_in_the_child_is_reported_and_is_a_failure(tmp_path):
    proc = drive("raises", tmp_path / "starts", count=1)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "RuntimeError: boom in the child" in err
    assert "w1 ended (status 1) 3 times within 60 s; leaving it down" in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_is_passed_on_and_no_child_is_forked_again(tmp_path, signum):
    log = tmp_path / "starts"
    proc = drive("wait", log)
    wait_until(lambda: len(starts(log)) == 2, 30, what="two children")
    proc.send_signal(signum)
    proc.communicate(timeout=30)
    assert proc.returncode == 0  # the children ended by the signal it passed on
    time.sleep(0.2)
    assert len(starts(log)) == 2
    assert not any(alive(pid) for _, pid in starts(log))


def test_no_child_outlives_a_parent_killed_outright(tmp_path):
    log = tmp_path / "starts"
    proc = drive("wait", log)
    wait_until(lambda: len(starts(log)) == 2, 30, what="two children")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    wait_until(lambda: not any(alive(pid) for _, pid in starts(log)), 10,
               what="the children to die with their parent")


def test_exit_status_is_a_shells():
    assert (exit_status(0), exit_status(3), exit_status(-9), exit_status(-15)) == (0, 3, 137, 143)
