"""Every child process Quorum starts goes through :func:`start` / :func:`run`.

One set of rules for git, the analyzers and the commands an agent may run:

- an argument list, never a shell; stdin closed;
- one scrubbed environment (:func:`child_env`): only what a tool needs to run, nothing of ours
  (no provider keys, no database URL, no ``GIT_*`` that could point git elsewhere);
- a time limit, after which the whole process group is killed (and it is killed at the end in
  any case, so nothing a command left behind keeps running);
- output read as it comes and capped, keeping its head (and optionally its tail);
- a thread that waits on a child can be watched (:func:`watched`): a check made every second
  or so that may end the wait (the run was cancelled) and kill the child.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess  # noqa: S404 # nosec B404 - argument lists only, see start()
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import turns

# What a child inherits from our environment: enough to find programs and nothing else.
_INHERITED = ("PATH", "SYSTEMROOT")
# Set for every child: plain locale, git never prompts, reads no system or user config and
# takes no optional locks; Python writes no bytecode into the directory it runs in.
_FIXED = {
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_OPTIONAL_LOCKS": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
}


def child_env(extra: Mapping[str, str] | None = None, *, home: str | None = None) -> dict[str, str]:
    """The environment of a child process: PATH, the fixed settings above, ``HOME``/``TMPDIR``
    (a throwaway directory when given, else ours) and ``extra``, which the caller names."""
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(_FIXED)
    if home is not None:
        env["HOME"] = env["TMPDIR"] = home
    elif "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


class _Capped:
    """The first ``head`` bytes of a stream and, if ``tail``, its last ``tail`` bytes."""

    def __init__(self, head: int, tail: int = 0):
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def full(self) -> bool:
        return self.total > self.head_limit and not self.tail_limit

    def parts(self) -> tuple[bytes, bytes]:
        tail = bytes(self.tail[-self.tail_limit:]) if self.tail_limit else b""
        return bytes(self.head), tail

    @property
    def truncated(self) -> bool:
        head, tail = self.parts()
        return self.total > len(head) + len(tail)


@dataclass
class Result:
    argv: list[str]
    returncode: int | None  # None when it was stopped for taking too long
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_tail: bytes = b""  # the end of stdout when ``tail`` was asked for and it overflowed
    timed_out: bool = False
    truncated: bool = False  # stdout went over its cap (reading stopped unless ``tail``)
    seconds: float = 0.0

    def text(self, stream: str = "stdout") -> str:
        return getattr(self, stream).decode("utf-8", "replace")


@dataclass
class Child:
    """A started process. :meth:`wait` collects it; nothing else should touch ``proc``."""

    argv: list[str]
    proc: subprocess.Popen
    out: _Capped
    err: _Capped
    began: float
    stop_when_full: bool
    _readers: list[threading.Thread] = field(default_factory=list)

    def _pump(self, stream, buffer: _Capped, *, stop: bool) -> None:
        try:
            while chunk := os.read(stream.fileno(), 65536):
                buffer.feed(chunk)
                if stop and buffer.full:
                    self.kill()
                    break
        except OSError:
            pass

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout: float) -> Result:
        """Wait up to ``timeout`` seconds, then kill what is left of the child's group. What
        this thread's watch (:func:`watched`) raises ends the wait early, the child killed."""
        with turns.waiting():  # another run's stage goes on meanwhile (common/turns.py)
            try:
                timed_out = not self._exited_watched(max(timeout, 0.0))
            finally:
                self.kill()  # on a timeout, and whatever the command left running behind it
                self.proc.wait()
                for reader in self._readers:
                    reader.join(timeout=5)
                for stream in (self.proc.stdout, self.proc.stderr):
                    if stream is not None:
                        stream.close()
        out_head, out_tail = self.out.parts()
        return Result(argv=self.argv, returncode=None if timed_out else self.proc.returncode,
                      stdout=out_head, stdout_tail=out_tail, stderr=self.err.parts()[0],
                      timed_out=timed_out, truncated=self.out.truncated,
                      seconds=round(time.monotonic() - self.began, 3))

    def _exited_watched(self, timeout: float) -> bool:
        watch = getattr(_watch, "current", None)
        if watch is None:
            return _exited(self.proc, timeout)
        check, every, begin = watch
        if begin is not None:
            begin()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if _exited(self.proc, max(min(left, every), 0.0)):
                return True
            if left <= every:
                return False
            check()


_watch = threading.local()


@contextlib.contextmanager
def watched(check: Callable[[], None], every: float = 1.0,
            begin: Callable[[], None] | None = None) -> Iterator[None]:
    """While this thread waits on a child process (:meth:`Child.wait`), ``check`` is called
    every ``every`` seconds (and ``begin`` once as each wait begins); what they raise kills the
    child and ends the wait with that exception. The engine watches a stage's thread for a
    cancel request, and has the model call made before the command journaled. Other threads,
    and waits outside the block, are not watched."""
    previous = getattr(_watch, "current", None)
    _watch.current = (check, every, begin)
    try:
        yield
    finally:
        _watch.current = previous


def _exited(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``proc`` to exit; True if it did. Sleeps on a pidfd
    where there is one: ``Popen.wait(timeout)`` polls, adding up to 50 ms to every call."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3, or it has been reaped already
        fd = None
    if fd is not None:
        try:
            if not select.select([fd], [], [], timeout)[0]:
                return False
        finally:
            os.close(fd)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


def start(argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str] | None = None,
          home: str | None = None, stdin: bytes | None = None, limit: int = 10_000_000,
          tail: int = 0, merge_stderr: bool = False, stop_when_full: bool = False) -> Child:
    """Start ``argv`` in ``cwd``. stdout keeps its first ``limit`` bytes (and its last ``tail``);
    with ``stop_when_full`` the process is killed once ``limit`` is passed. stderr keeps 64 KiB.
    OSError (no such program or directory, not executable) is raised for the caller to word."""
    argv = [str(a) for a in argv]
    proc = _popen(argv, cwd, env, home, piped_stdin=stdin is not None,
                  merge_stderr=merge_stderr)
    child = _collect(argv, proc, limit, tail, stop_when_full)
    if proc.stdin is not None:  # fed from a thread: a child that never reads cannot block us
        threading.Thread(target=_feed, args=(proc.stdin, stdin or b""), daemon=True).start()
    return child


def _popen(argv: list[str], cwd: str | Path, env: Mapping[str, str] | None, home: str | None,
           *, piped_stdin: bool, merge_stderr: bool) -> subprocess.Popen:
    return subprocess.Popen(  # noqa: S603 # nosec B603 - argument list, no shell
        argv, cwd=str(cwd), shell=False, env=child_env(env, home=home),
        stdin=subprocess.PIPE if piped_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True)


def _collect(argv: list[str], proc: subprocess.Popen, limit: int, tail: int,
             stop_when_full: bool) -> Child:
    child = Child(argv, proc, _Capped(limit, tail), _Capped(65536), time.monotonic(),
                  stop_when_full)
    streams = [(proc.stdout, child.out, stop_when_full)]
    if proc.stderr is not None:
        streams.append((proc.stderr, child.err, False))
    for stream, buffer, stop in streams:
        reader = threading.Thread(target=child._pump, args=(stream, buffer), kwargs={"stop": stop},
                                  daemon=True)
        reader.start()
        child._readers.append(reader)
    return child


# --- started ahead -------------------------------------------------------------------------
# A Python tool's interpreter and imports can take longer than its work (bandit and
# detect-secrets: a quarter to a third of a second, most of it imports). ``Warm`` starts the
# interpreter and imports the tool's modules before its arguments are known; ``launch`` then
# hands it its argument list and directory on stdin, it runs its program (our constant text,
# never anything from the change), and from there it is an ordinary ``Child``. Isolated mode
# (``-I``): the directory it runs in (the code under review) is never on its import path and
# no PYTHON* variable applies; ``-B``: no bytecode written. Its stdin ends after the job; a
# child never launched exits when its stdin closes (``close``, or this process ending).
_LAUNCHER = """\
import importlib, json, os, shutil, sys
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
program = compile(sys.argv[2], "<program>", "exec")
job = json.loads(sys.stdin.readline() or "null")
if not job:
    if sys.argv[3]:
        shutil.rmtree(sys.argv[3], ignore_errors=True)
    sys.exit(0)
os.chdir(job["cwd"])
sys.argv = job["argv"]
exec(program, {"__name__": "__main__"})
"""


class Warm:
    """A Python program started ahead (see above) in the environment ``start`` gives for
    ``env`` and ``home``: ``imports`` imported now, ``code`` run at :meth:`launch`.
    ``owns``: a directory of its own (its ``home``) that it removes if it is never launched,
    even when this process is killed first."""

    def __init__(self, imports: Sequence[str], code: str, *,
                 env: Mapping[str, str] | None = None, home: str | None = None,
                 owns: str = ""):
        self.proc = _popen([sys.executable, "-I", "-B", "-c", _LAUNCHER, json.dumps(list(imports)),
                            code, owns], Path.cwd(), env, home, piped_stdin=True,
                           merge_stderr=False)
        self.used = False

    def launch(self, argv: Sequence[str], *, cwd: str | Path, limit: int = 10_000_000,
               tail: int = 0, stop_when_full: bool = False) -> Child:
        """Run the program with ``sys.argv`` = ``argv`` in ``cwd``: a ``Child`` as ``start``
        returns (its time counted from now). If it died meanwhile, the ``Child`` reports its
        exit and its stderr."""
        self.used = True
        argv = [str(a) for a in argv]
        child = _collect(argv, self.proc, limit, tail, stop_when_full)
        _feed(self.proc.stdin, (json.dumps({"argv": argv, "cwd": str(cwd)}) + "\n").encode())
        return child

    def close(self) -> None:
        """Stop it unless it was launched (a launched one belongs to its ``Child``)."""
        if self.used:
            return
        self.used = True
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def run(argv: Sequence[str], *, cwd: str | Path, timeout: float, **kwargs) -> Result:
    """:func:`start` then wait at most ``timeout`` seconds."""
    return start(argv, cwd=cwd, **kwargs).wait(timeout)
