"""Run a command and start it again when it dies, for ``make dev``'s workers.

honcho (``manage.py devstack``) stops the whole stack as soon as one of its processes exits.
For a worker killed by a signal (SIGKILL from the OOM killer or a person) or crashed, that
turned one lost worker into a stopped site; a worker started again instead frees the leases
its previous incarnation held and goes on with those runs (``engine.recover_after_restart``).

    python -m common.keepalive [--name worker2] -- celery -A config worker ...

The command is started again after it ends by a signal or with a non-zero status, after a
pause (1 s, doubling with each end within ``WINDOW`` seconds, at most 30 s); after
``MAX_RESTARTS`` starts within ``WINDOW`` seconds it is left down and its status returned, so
a command that cannot start stops the stack as before.
A clean exit (0) ends this too. SIGTERM, SIGINT and SIGHUP are passed on to the command,
which is then not started again. No Django: it starts before and outlives the command."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

MAX_RESTARTS = 5
WINDOW = 60.0


def exit_status(code: int) -> int:
    """A shell's status for a return code (-N: killed by signal N)."""
    return code if code >= 0 else 128 - code


class Restarts:
    """One command's starts, and when to start it again after it ended: after a pause of
    ``first_pause``, doubling with each end within ``WINDOW`` seconds, at most 30 s (one that
    kept running for a while starts again after the first pause); never once it has started
    more than ``MAX_RESTARTS`` times within ``WINDOW`` seconds. Shared with common/forks.py."""

    def __init__(self, first_pause: float = 1.0) -> None:
        self.first_pause = first_pause
        self.starts: list[float] = []

    def started(self) -> None:
        self.starts.append(time.monotonic())

    def ended(self) -> float | None:
        """The pause before the next start, or None: leave it down."""
        now = time.monotonic()
        self.starts = [t for t in self.starts if now - t < WINDOW]
        if len(self.starts) > MAX_RESTARTS:
            return None
        return min(self.first_pause * 2 ** max(len(self.starts) - 1, 0), 30.0)

    def given_up(self, name: str, how: str) -> str:
        return (f"{name} ended ({how}) {len(self.starts)} times within {WINDOW:.0f} s; "
                "leaving it down")


class Keeper:
    def __init__(self, command: Sequence[str], name: str, pause: float = 1.0) -> None:
        self.command, self.name, self.first_pause = list(command), name, pause
        self.child: subprocess.Popen[bytes] | None = None
        self.stopping = False

    def stop(self, signum: int, frame: object = None) -> None:
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self.stop)
        restarts = Restarts(self.first_pause)
        while True:
            restarts.started()
            self.child = subprocess.Popen(self.command)  # noqa: S603 - our own command line
            code = self.child.wait()
            if self.stopping or code == 0:
                return exit_status(code)
            how = f"signal {-code}" if code < 0 else f"status {code}"
            pause = restarts.ended()
            if pause is None:
                self._say(restarts.given_up(self.name, how))
                return exit_status(code)
            self._say(f"{self.name} ended ({how}); starting it again in {pause:g} s")
            deadline = time.monotonic() + pause
            while time.monotonic() < deadline and not self.stopping:
                time.sleep(0.05)
            if self.stopping:
                return exit_status(code)

    def _say(self, text: str) -> None:
        print(f"keepalive: {text}", file=sys.stderr, flush=True)


def _pause(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 60:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 60 seconds")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="keepalive", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="the command")
    parser.add_argument("--pause", type=_pause, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    parser.error = lambda message: parser.exit(2, f"keepalive: {message}\n")  # type: ignore[method-assign]
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.exit(2, "keepalive: no command given (keepalive -- COMMAND ...)\n")
    return Keeper(command, args.name, args.pause).run()


if __name__ == "__main__":
    sys.exit(main())
