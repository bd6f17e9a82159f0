"""Running model calls side by side inside one stage: every pattern with a parallel step
(reviewers, debaters, team members, tool calls) uses this one helper."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

from common import turns

from .base import ModelError, RunStopped, StageAbandoned


class Outcome:
    def __init__(self) -> None:
        self.value: Any = None
        self.error: str = ""
        self.timed_out = False
        self.seconds = 0.0


def run_parallel(jobs: dict[str, Any], timeout: float, limit: int) -> dict[str, Outcome]:
    """Run ``jobs`` (name → zero-argument callable) in threads. A job past ``timeout`` is
    reported as timed out and left to finish on its own; a job that raises is reported with
    its error, except the control exceptions (cancel, budget, lost lease), which propagate."""
    outcomes = {name: Outcome() for name in jobs}
    if not jobs:
        return outcomes
    pool = ThreadPoolExecutor(max_workers=max(1, min(limit, len(jobs))),
                              thread_name_prefix="parallel")
    started = time.monotonic()

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.monotonic()
        try:
            return fn()
        finally:
            outcomes[name].seconds = time.monotonic() - t0

    futures: dict[Future[Any], str] = {pool.submit(timed, name, fn): name for name, fn in jobs.items()}
    try:
        pending = set(futures)
        while pending:
            remaining = timeout - (time.monotonic() - started)
            if remaining <= 0:
                break
            with turns.waiting():  # the jobs run in threads of their own, without turns
                done, pending = wait(pending, timeout=remaining, return_when=FIRST_EXCEPTION)
            for fut in done:
                exc = fut.exception()
                if isinstance(exc, RunStopped | StageAbandoned):
                    raise exc
        for fut, name in futures.items():
            out = outcomes[name]
            if not fut.done():
                out.timed_out = True
                out.error = f"no answer within {timeout:.0f} s"
                out.seconds = timeout
            elif (exc := fut.exception()) is not None:
                out.error = (str(exc) if isinstance(exc, ModelError) and str(exc)
                             else f"{type(exc).__name__}: {exc}")
            else:
                out.value = fut.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return outcomes
