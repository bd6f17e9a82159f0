"""Child processes forked from one warm parent, each started again when it dies.

``manage.py worker`` imports everything a worker needs once (Django, Celery, LiteLLM, every
pattern), freezes that heap and forks one worker per core from it. The children share those
pages copy-on-write instead of each importing its own copy (LiteLLM alone is ~160 MB per
interpreter), and a child that dies is forked again from the warm parent in milliseconds
instead of importing for seconds.

The parent only waits: it holds no connection and runs no thread, so a fork copies nothing
that could be half-used. Each child's entry is called with its slot number (1, 2, …) and its
return value is the child's exit status; the child dies with the parent (``PR_SET_PDEATHSIG``
on Linux), so a parent killed outright never leaves workers behind under names its successor
will use. SIGTERM and SIGINT are passed on to every child, SIGHUP as SIGTERM (a Celery worker
takes SIGHUP as "restart yourself"); then no child is started again and the parent exits once
they have. A child that ends unasked, whatever its status, is forked again after a pause, as
``common.keepalive`` restarts a command (``Restarts``: 1 s, doubling with each end within a
minute, at most 30 s): only the parent's signal stops the set, so a worker told to shut down
on its own does not leave its slot empty. A slot whose child ends more than five times within
a minute is left down, the others are stopped, and the parent exits with that child's status (1 for a child
that kept ending with 0): a worker that cannot start stops ``make dev``'s stack, as a single
worker process did. No Django here."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable

from common.keepalive import Restarts, exit_status

PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` ends (Linux; elsewhere nothing)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the call above took effect
        os._exit(1)


def name_process(name: str) -> None:
    """The name ``top``, ``ps -o comm`` and the OOM killer's log show (Linux, 15 bytes): the
    children otherwise all read as their parent's command line."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


class Forks:
    def __init__(self, entry: Callable[[int], int], count: int, name: str = "worker",
                 pause: float = 1.0, say: Callable[[str], None] | None = None) -> None:
        self.entry, self.count, self.name, self.first_pause = entry, count, name, pause
        self.say = say or (lambda text: print(f"{name}s: {text}", file=sys.stderr, flush=True))
        self.children: dict[int, int] = {}  # pid → slot
        self.stopping = False
        self.signal: int = signal.SIGTERM
        self.status = 0

    def stop(self, signum: int, frame: object = None) -> None:
        self.stopping = True
        self.signal = signal.SIGTERM if signum == signal.SIGHUP else signum
        for pid in list(self.children):
            self._send(pid)

    def _send(self, pid: int) -> None:
        try:
            os.kill(pid, self.signal)
        except ProcessLookupError:
            pass

    def fork(self, slot: int) -> int:
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            self.children[pid] = slot
            if self.stopping:  # the signal came between the fork and the line above
                self._send(pid)
            return pid
        code = 1  # the child from here on: it never returns into the parent's code
        try:
            for signum in FORWARDED:
                signal.signal(signum, signal.SIG_DFL)
            die_with_parent(parent)
            name_process(f"{self.name}{slot}")
            code = self.entry(slot)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - whatever it was, the child reports and ends
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def run(self) -> int:
        for signum in FORWARDED:
            signal.signal(signum, self.stop)
        restarts = {slot: Restarts(self.first_pause) for slot in range(1, self.count + 1)}
        due: dict[int, float] = {}  # slot → when its child is forked again
        for slot in restarts:
            restarts[slot].started()
            self.fork(slot)
        while self.children or (due and not self.stopping):
            for slot, when in list(due.items()):  # each slot's pause runs on its own clock
                if self.stopping:
                    due.clear()
                elif time.monotonic() >= when:
                    del due[slot]
                    restarts[slot].started()
                    self.fork(slot)
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if not pid:
                time.sleep(0.05)
                continue
            if pid not in self.children:
                continue
            slot = self.children.pop(pid)
            code = os.waitstatus_to_exitcode(wait_status)
            if self.stopping:
                self.status = max(self.status, code if code > 0 else 0)
                continue
            how = f"signal {-code}" if code < 0 else f"status {code}"
            pause = restarts[slot].ended()
            if pause is None:
                self.say(restarts[slot].given_up(f"{self.name}{slot}", how))
                self.status = max(self.status, exit_status(code) if code else 1)
                self.stop(signal.SIGTERM)
                continue
            self.say(f"{self.name}{slot} ended ({how}); starting it again in {pause:g} s")
            due[slot] = time.monotonic() + pause
        return self.status
