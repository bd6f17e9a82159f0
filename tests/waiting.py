"""Waiting on a condition with a deadline, instead of sleeping a fixed time (no Django)."""

from __future__ import annotations

import os
import time


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.05,
               what: str = "condition"):
    """Poll ``predicate`` until it returns something true, and return that; fail after
    ``timeout`` seconds. The deadline only bounds a failure: a passing test waits as long
    as the condition takes and no longer."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def process_gone(pid: int) -> bool:
    """True once ``pid`` has exited (gone, or a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
