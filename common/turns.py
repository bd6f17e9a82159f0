"""Turns: how many of a worker's task threads run Python at once.

A worker holds a hundred runs in a hundred threads, and the interpreter lets one thread run at
a time, switching every 5 ms among all that are ready. When a batch of runs is ready together
(their model calls answered together), that sharing moves them in step: each needs ~20 ms, all
finish near the end of a 2 s burst, all send their next call then, and the process idles while
the calls are out. With turns, at most ``n`` task threads run our code at once and the others
queue (first come, first served): the first run is done with its stage after 20 ms and its next
call is out while the rest are still being served, so waiting overlaps working. A thread gives
its turn up while it waits on something outside the process (a model's answer, a child
process, a pause before a retry) and queues for one when the wait is over.

Turns order the work; they never stop it. A thread that has queued ``PATIENCE`` seconds goes on
without a turn, so a wait this module was not told about cannot deadlock the process, it only
slows it down. Threads that never took a turn (a parallel stage's helpers, the web server, the
command line) are not counted, and ``waiting`` does nothing in them. Measured in
docs/BENCHMARKS.md ("Fifth round: turns")."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

PATIENCE = 30.0  # s a thread queues for a turn before it goes on without one

_slots: threading.Semaphore | None = None
_held = threading.local()
# Called in the waiting thread as each wait begins (in every thread, turns or not): the app
# gives its pooled database connection back there (common/dbpool.py, issue 37).
_before_wait: Callable[[], None] | None = None


def before_wait(hook: Callable[[], None] | None) -> None:
    """Set what each ``waiting`` calls first (None: nothing). Set once, at start-up."""
    global _before_wait
    _before_wait = hook


def enable(n: int) -> None:
    """At most ``n`` task threads of this process run at once; 0 lifts the limit. Called once
    per worker process, before it takes tasks."""
    global _slots
    _slots = threading.Semaphore(n) if n > 0 else None


def enabled() -> bool:
    return _slots is not None


def holds() -> bool:
    """Whether this thread holds a turn."""
    return getattr(_held, "slots", None) is not None


def take() -> None:
    """Queue for a turn (a task starts, or a wait ended). A no-op if turns are off or this
    thread holds one."""
    slots = _slots
    if slots is None or holds():
        return
    if slots.acquire(timeout=PATIENCE):
        _held.slots = slots  # released into this one even if ``enable`` runs again


def give_back() -> None:
    """Give this thread's turn to the next in the queue (a task ended)."""
    slots = getattr(_held, "slots", None)
    if slots is not None:
        _held.slots = None
        slots.release()


@contextmanager
def waiting() -> Iterator[None]:
    """Around a wait outside the process: the turn goes to another thread meanwhile, and this
    one queues for it again afterwards. Only a thread that held a turn queues again. The
    ``before_wait`` hook runs first, in any thread."""
    hook = _before_wait
    if hook is not None:
        hook()
    had = holds()
    give_back()
    try:
        yield
    finally:
        if had:
            take()
