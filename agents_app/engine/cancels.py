"""Cancel requests told to the workers through Redis as well as the database (issue 37).

A run's cancel request is its ``cancel_requested`` flag, and stays so: the engine checks it
before each model call and a stage's commit returns it. A worker that starts the next stage
while the commit before it is still being made (``ahead.py``) must know of a cancel asked for
during the stage's last call before the next stage's first call goes out; reading the run for
that would cost a database round trip at every stage (after a model's wait, ~1 ms on
PostgreSQL). So whoever sets the flag also sets a key in Redis once the flag is committed
(``told``), and the worker asks Redis (``asked``: one EXISTS, ~0.4 ms after a wait). When
Redis cannot answer, the worker reads the database instead.

A key written after the flag can be missed by a worker checking in between (milliseconds), as
a cancel committed just after a stage's commit is missed by that commit; a key Redis lost or
never got (Redis down when the cancel was asked) only means the next stage's first call goes
out. In both cases the next stage's journal, confirming the commit it built on, finds the flag
and the run stops there, that call recorded."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction

if TYPE_CHECKING:
    import redis

log = logging.getLogger("quorum.engine")

TTL = 24 * 3600  # s a key is kept: far longer than a stage runs between two checks
TIMEOUT = 0.5  # s a Redis that stops answering holds a worker or a request
RECHECK = 5.0  # s after a failure during which the worker reads the database without asking
_client: redis.Redis | None = None
_unanswered_until = 0.0


def _unanswered() -> tuple[type[Exception], ...]:
    """Redis down, unreachable, or a bad REDIS_URL. (redis loads on first use: a process
    that never cancels or advances a run in place, such as an offline review from the command
    line, never loads it.)"""
    import redis

    return (redis.RedisError, OSError, ValueError)


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        import redis

        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=TIMEOUT,
                                       socket_connect_timeout=TIMEOUT)
    return _client


def _key(run_id: int) -> str:
    return f"quorum:cancel:{run_id}"


def told(run_ids: Iterable[int]) -> None:
    """Once the transaction that sets these runs' cancel flags commits, tell the workers."""
    ids = sorted(set(run_ids))
    if ids:
        transaction.on_commit(lambda: _tell(ids))


def _tell(ids: list[int]) -> None:
    try:
        pipe = _redis().pipeline(transaction=False)
        for run_id in ids:
            pipe.set(_key(run_id), 1, ex=TTL)
        pipe.execute()
    except _unanswered() as exc:  # the flag is safe in the database (see the module)
        log.warning("could not tell the workers of the cancel of run(s) %s through Redis "
                    "(they find it at the run's next check): %s", ids[:10], exc)


def asked(run_id: int) -> bool | None:
    """Whether a cancel was asked for the run (True, False), or None when Redis cannot say:
    it failed to answer now, or within the last ``RECHECK`` seconds (so that a Redis that is
    away costs each stage one failed attempt at most every few seconds, not a timeout)."""
    global _unanswered_until
    if time.monotonic() < _unanswered_until:
        return None
    try:
        return bool(_redis().exists(_key(run_id)))
    except _unanswered():  # the caller reads the database instead
        _unanswered_until = time.monotonic() + RECHECK
        return None
