"""Leases: who may run a run's stage now. A worker claims a runnable run with a conditional
update; a lease left by a worker that died is freed when that worker node starts again, or
by the sweeper once it expires."""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from .. import prepared
from ..models import RUNNABLE, Run
from ..patterns.base import StageAbandoned
from ..prepared import slot
from ..returning import instance_from
from . import scheduling

log = logging.getLogger("quorum.engine")

_identity = {"node": f"{socket.gethostname()}-{os.getpid()}", "boot": uuid.uuid4().hex[:12]}


def _new_boot() -> None:
    _identity["boot"] = uuid.uuid4().hex[:12]


# A process forked from another (``manage.py worker``'s children) is a boot of its own: a child
# forked again under a dead one's node name must find that one's leases not its own.
os.register_at_fork(after_in_child=_new_boot)


# Claims this process made: with the process and thread, unique within a boot (whose id is
# random and new in every fork; the pid stays in the token all the same), with no entropy per
# claim.
_claims = itertools.count(1)


def set_worker_identity(node: str) -> None:
    """Called when a Celery worker starts: leases carry its node name and this boot's id
    (new in every process, forked ones included: see ``_new_boot``)."""
    _identity["node"] = node


def lease_token() -> str:
    """Unique per claim: helper threads left over from an abandoned attempt of a stage find
    the lease not theirs, even when the same worker thread claims the run again."""
    return (f"{_identity['node']}|{_identity['boot']}|{os.getpid()}.{threading.get_ident()}|"
            f"{next(_claims)}")


def lease_until() -> datetime:
    return timezone.now() + timedelta(seconds=settings.QUORUM_STAGE_LEASE_SECONDS)


class LeaseLost(StageAbandoned):
    """Another worker owns this run now; drop the stage's result."""


# The database could not be used for a while (SQLite locked past its busy timeout, a Postgres
# connection lost): a transient condition, so the stage is run again, never failed or half
# written (tests/faults/db_locked.py).
DB_UNAVAILABLE = (OperationalError, InterfaceError)


class StageInterrupted(StageAbandoned):
    """The stage could not read or write the database; it runs again later. A pattern that
    catches exceptions broadly re-raises it, like every ``StageAbandoned``, so a locked
    database is never mistaken for a failed reviewer or model."""


def claim(run_id: int, token: str) -> bool:
    """Take the lease on a runnable run nobody holds."""
    return claim_run(run_id, token) is not None


def claim_run(run_id: int, token: str) -> Run | None:
    """Take the lease on a runnable run nobody holds; the run as claimed (one UPDATE …
    RETURNING: no second read), or None."""
    row = prepared.update("claim", _claim_statement, {
        "run": run_id, "now": timezone.now(), "token": token, "until": lease_until()})
    return None if row is None else instance_from(Run, row)


def _claim_statement() -> tuple[QuerySet[Run], dict[str, Any]]:
    """The claim (prepared once): a runnable run whose lease nobody holds, or has expired."""
    return (Run.objects.filter(pk=slot(Run, "run", "id"), status__in=RUNNABLE).filter(
        Q(lease_expires_at__isnull=True)
        | Q(lease_expires_at__lt=slot(Run, "now", "lease_expires_at"))),
        {"lease_owner": slot(Run, "token", "lease_owner"),
         "lease_expires_at": slot(Run, "until", "lease_expires_at"),
         "stage_attempt": F("stage_attempt") + 1})


# --- recovery ----------------------------------------------------------------------------------
def recover_after_restart(node: str, *, enqueue: bool = True) -> list[int]:
    """Free the leases an earlier incarnation of this worker node held, and requeue them."""
    prefix = f"{node}|"
    current = f"{node}|{_identity['boot']}|"
    ids = list(Run.objects.filter(status__in=RUNNABLE, lease_owner__startswith=prefix)
               .exclude(lease_owner__startswith=current).values_list("pk", flat=True))
    for run_id in ids:
        Run.objects.filter(pk=run_id, lease_owner__startswith=prefix).exclude(
            lease_owner__startswith=current).update(lease_owner="", lease_expires_at=None)
        if enqueue:
            scheduling.schedule(run_id)
    if ids:
        log.info("recovered %d run(s) interrupted on %s: %s", len(ids), node, ids)
    return ids


def sweep(*, idle_seconds: float = 120.0, enqueue: bool = True) -> list[int]:
    """Requeue runnable runs whose lease expired, or that sat unclaimed (a lost message)."""
    now = timezone.now()
    stuck = Run.objects.filter(status__in=RUNNABLE).filter(
        Q(lease_expires_at__lt=now)
        | Q(lease_expires_at__isnull=True, updated_at__lt=now - timedelta(seconds=idle_seconds)))
    ids = list(stuck.values_list("pk", flat=True)[:1000])
    for run_id in ids:
        Run.objects.filter(pk=run_id, lease_expires_at__lt=now).update(lease_owner="",
                                                                       lease_expires_at=None)
        Run.objects.filter(pk=run_id).update(updated_at=now)
        if enqueue:
            scheduling.schedule(run_id)
    if ids:
        log.info("sweeper requeued %d run(s): %s", len(ids), ids)
    return ids
