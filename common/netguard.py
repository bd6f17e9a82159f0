"""No network call inside a database transaction.

A provider, model or webhook call waits seconds. Inside a transaction that wait holds what
the transaction holds: on SQLite the database's one write lock, so every other writer (a
webhook delivery, a triage click) waits behind it and gives up with "database is locked"; on
PostgreSQL row locks and a connection. The rule for the whole code base is therefore: fetch
first, then claim and write in a short transaction.

This module makes the rule checkable without importing Django: the code that talks to the
network (``reviews_app.hosting.http.Api``, ``agents_app.llm.gateway``) calls
:func:`before_network`, which does nothing until a check is installed. Under DEBUG and in the
tests (``QUORUM_NET_GUARD``) Django's side installs one that raises
:class:`NetworkInTransaction` when the calling thread is inside an ``atomic`` block (the
test case's own wrapping transaction excepted), so a call in the wrong place fails loudly
where it is written instead of timing out under load.
"""

from __future__ import annotations

from collections.abc import Callable

_check: Callable[[str], None] | None = None
# Tests turn this off (QUORUM_ALLOW_PROVIDER_REQUESTS=false, like QUORUM_ALLOW_MODEL_REQUESTS
# for models): then the code-host clients call only loopback hosts (the fake provider
# servers), never a real provider.
ALLOW_REMOTE_HOSTS = True


class NetworkInTransaction(RuntimeError):
    """A network call was made inside a database transaction."""


def install(check: Callable[[str], None] | None) -> None:
    """Set (or, with None, remove) the check :func:`before_network` runs."""
    global _check
    _check = check


def before_network(what: str) -> None:
    """Call before a request leaves the process; ``what`` names it for the error."""
    if _check is not None:
        _check(what)


def django_check(what: str) -> None:
    """The check for Django code: no open ``atomic`` block on this thread's connections,
    except the ones a test case opened around the whole test."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if any(not getattr(block, "_from_testcase", False) for block in conn.atomic_blocks):
            raise NetworkInTransaction(
                f"{what} was about to be made inside a database transaction (on "
                f"{conn.alias!r}). Fetch first, then claim and write in a short transaction: "
                "a network wait inside one holds its locks for the whole call.")
