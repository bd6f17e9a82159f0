"""Database connections given back while a thread waits (issue 37).

On PostgreSQL each process pools its connections (Django's pool, ``OPTIONS["pool"]``, set
from ``QUORUM_DB_POOL_SIZE`` in the settings): closing a pooled connection hands it back to
the pool, and the thread's next statement takes one again (tens of microseconds, no new
server connection). ``release`` does that for the calling thread whenever it is about to wait
on something outside the process — a model's answer, a child process, a parallel stage's
helpers, a pause before a retry: ``common.turns.waiting`` calls it — so a run waiting for
seconds holds no connection and a process needs a connection only for the threads working
with the database at that moment, not one per thread in flight.

A connection inside a transaction (``atomic``) is never given back: the transaction would be
lost. Without a pool (SQLite, or ``QUORUM_DB_POOL_SIZE=0``) nothing happens: closing would
mean a new connection after every wait."""

from __future__ import annotations

from django.db import connections


def pooled(alias: str = "default") -> bool:
    """Whether ``alias`` has a connection pool configured."""
    try:
        settings_dict = connections.settings[alias]
    except KeyError:
        return False
    return bool((settings_dict.get("OPTIONS") or {}).get("pool"))


def release() -> None:
    """Give this thread's idle pooled connections back to their pools (see the module)."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block:
            continue
        if not (conn.settings_dict.get("OPTIONS") or {}).get("pool"):
            continue
        conn.close()


def close_pools() -> None:
    """Close every pool this process opened (its connections and its threads): before a fork,
    so that a child starts with no pool of its parent's (``manage.py worker``)."""
    for conn in connections.all():
        if (conn.settings_dict.get("OPTIONS") or {}).get("pool") and hasattr(conn, "close_pool"):
            conn.close()
            try:
                conn.close_pool()
            except KeyError:  # no pool was made in this process
                pass
