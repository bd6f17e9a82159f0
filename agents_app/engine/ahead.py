"""A stage's commit made while the next stage's first model call is out (issue 37).

A worker that goes on in place (``stages._in_place``) claims the next stage in the commit of
the one before (a fused commit). On PostgreSQL that commit takes a few round trips and a WAL
flush, ~3 ms after a model's wait; the next stage's first act is nearly always a model call
of seconds. So the fused commit of a stage that goes on to another is handed to a small pool
of committer threads, and the next stage starts at once from the run as that commit leaves
it (``predicted``): the commit runs while the model thinks, as LangGraph's default
durability ("async") writes a step's checkpoint while the next step runs.

What does not change:
- Nothing of the next stage is written before the commit it builds on is known to have
  succeeded. Its journal ``confirm``s first whenever it is about to write or read the run (a
  call's record, a lease extension, a check of the run), and the stage confirms before its
  own commit or stop. Only its model call goes out earlier.
- The commit is the same transaction, with the same conditional UPDATE, on a connection of
  its own: no model call waits inside it.
- A refused commit (the run moved on) drops the next stage, its call's answer included. A
  commit the database failed is recovered as before (``stages._interrupted``: carried on
  when it did happen after all) and the next stage dropped. A cancel asked for meanwhile
  stops the next stage as cancelled, its call recorded.

- A cancel asked for during the stage's last call still stops the run before the next
  stage's first call: the commit goes ahead only when ``cancels.asked`` (Redis, else the run
  read) says none was asked for (``journal.DbJournal.may_go_on``).

What it costs: the next stage's first call goes out before the commit is durable, so a
worker killed in those milliseconds makes that call again (as it makes again a stage's last
call, which the commit writes).

Off (the commit in the stage's own thread, as before) inside a transaction the caller holds
(a test's), when the process is busy (``possible``), and when ``QUORUM_COMMIT_AHEAD`` is false
(its default on SQLite, where a commit costs no more than the check)."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from django.conf import settings
from django.db import connection
from django.db.models import DecimalField

from ..models import Run
from ..patterns.base import StageAbandoned

log = logging.getLogger("quorum.engine")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    global _pool, _out, _advancing, _pool_lock
    _pool, _out, _advancing = None, 0, 0  # a forked child has none of its parent's threads
    _pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


_out = 0  # commits handed off and not finished yet, in this process
_advancing = 0  # runs this process is advancing in place now


@contextmanager
def advancing() -> Iterator[None]:
    """Around a run advanced in place (``stages._in_place``): counted, for ``possible``."""
    global _advancing
    with _pool_lock:
        _advancing += 1
    try:
        yield
    finally:
        with _pool_lock:
            _advancing -= 1


def possible() -> bool:
    """Whether a commit may be made ahead here: the setting is on, the calling thread is not
    inside a transaction (whose rows another connection could not see), and the process has
    time to spare: no more runs in flight than committers, and one of them free. A worker
    busy with many runs commits in each stage's thread, as before. There the overlap gains
    nothing (other runs' work fills the waits) and costs CPU: with 200 runs at once in two
    processes, CPU a run in the worker measured 31–37 ms with every commit made ahead against
    30 without (docs/BENCHMARKS.md, "Issue 37, fourth round")."""
    limit = settings.QUORUM_COMMIT_AHEAD_THREADS
    pool = (connection.settings_dict.get("OPTIONS") or {}).get("pool")
    if isinstance(pool, dict) and pool.get("max_size"):
        # Committers and the stages waiting on them never take more than the pool holds.
        limit = min(limit, max(1, int(pool["max_size"]) // 2))
    return (bool(settings.QUORUM_COMMIT_AHEAD) and not connection.in_atomic_block
            and _out < limit and _advancing <= limit)


def _committers() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=settings.QUORUM_COMMIT_AHEAD_THREADS,
                                       thread_name_prefix="quorum-commit")
        return _pool


def _commit(write: Callable[[], Run | None]) -> Run | None:
    global _out
    try:
        return write()
    finally:
        # As a task's end does (Django's close_old_connections): a broken connection, or one
        # past CONN_MAX_AGE (0 by default, and always with the pool), is closed; a pooled one
        # goes back to its pool.
        try:
            connection.close_if_unusable_or_obsolete()
        finally:
            with _pool_lock:
                _out -= 1


class Journal(Protocol):
    """What the commit needs of the committed stage's journal (``journal.DbJournal``)."""

    def written(self, calls: list[Any]) -> None: ...

    def flush_quietly(self) -> None: ...


class AheadFailed(StageAbandoned):
    """The commit the stage built on did not happen (or its outcome is unknown): the stage is
    dropped. ``error`` is None when the commit was refused (the run moved on), else what the
    commit raised; ``tokens``, ``stage`` and ``journal`` are the committed stage's, for its
    recovery."""

    def __init__(self, ahead: Ahead, error: BaseException | None):
        self.error = error
        self.tokens = ahead.tokens
        self.stage = ahead.stage
        self.journal = ahead.journal
        super().__init__(f"the commit of stage {ahead.stage} "
                         + ("was refused" if error is None else f"failed: {error}"))


@dataclass
class Ahead:
    """A stage's commit in flight in the committer pool."""

    future: Future[Run | None]
    tokens: tuple[str, str]  # the stage's claim, and the next stage's (made by this commit)
    stage: str
    journal: Journal | None
    calls: list[Any]
    run_id: int
    _settled: Run | AheadFailed | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def settle(self) -> Run:
        """Wait for the commit: the run as committed, or ``AheadFailed`` (the same each
        time it is asked). The committed stage's journal learns its calls were written."""
        with self._lock:
            if self._settled is None:
                self._settled = self._outcome()
            outcome = self._settled
        if isinstance(outcome, AheadFailed):
            raise outcome
        return outcome

    def _outcome(self) -> Run | AheadFailed:
        try:
            committed = self.future.result()
        except Exception as exc:  # the stage thread decides (``stages._run_stage``)
            return AheadFailed(self, exc)
        if committed is None:
            log.warning("run %s: stage result dropped, the run moved on", self.run_id)
            if self.calls and self.journal is not None:  # kept for a replay if still allowed
                self.journal.flush_quietly()
            return AheadFailed(self, None)
        if self.journal is not None:
            self.journal.written(self.calls)
        return committed


def hand_off(write: Callable[[], Run | None], *, run_id: int, tokens: tuple[str, str],
             stage: str, journal: Journal | None, calls: list[Any]) -> Ahead:
    """Start the commit ``write`` in the committer pool."""
    global _out
    pool = _committers()
    with _pool_lock:
        _out += 1
    try:
        future = pool.submit(_commit, write)
    except BaseException:
        with _pool_lock:
            _out -= 1
        raise
    return Ahead(future, tokens, stage, journal, calls, run_id)


def predicted(run: Run, values: dict[str, Any], state: Any) -> Run:
    """The run as a fused commit to the next stage will leave it: ``run`` (the stage's, as
    claimed) with ``values`` set, and ``state`` as read back from the database (a copy: the
    commit still has to write the one it was given)."""
    nxt = Run.from_db(run._state.db or "default", [f.attname for f in Run._meta.concrete_fields],
                      [getattr(run, f.attname) for f in Run._meta.concrete_fields])
    json_field = Run._meta.get_field("state")
    nxt.state = json.loads(json.dumps(state, cls=json_field.encoder), cls=json_field.decoder)
    for name, value in values.items():
        setattr(nxt, name, value)
    for name in ("cost_usd", "max_cost_usd"):  # as the database's column gives it back
        column = Run._meta.get_field(name)
        assert isinstance(column, DecimalField)
        places = column.decimal_places
        value = getattr(nxt, name)
        if value is not None:
            setattr(nxt, name, value.quantize(Decimal(1).scaleb(-places)))
    return nxt

