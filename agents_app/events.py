"""Events: written to the database first (ordered per run), then announced to the run's
channel group once the transaction commits. A page renders from the database and then
subscribes, so a dropped announcement costs nothing but a moment's delay."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from .models import Event, Run
from .patterns.base import Event as EventSpec

log = logging.getLogger("quorum.events")


def group_name(run_id: int) -> str:
    return f"run-{run_id}"


def append_events(run_id: int, specs: Iterable[EventSpec]) -> list[Event]:
    specs = list(specs)
    if not specs:
        return []
    with transaction.atomic():
        last = (Run.objects.select_for_update().filter(pk=run_id)
                .values_list("last_event_seq", flat=True).get())
        rows = [Event(run_id=run_id, seq=last + i, kind=s.kind, message=s.message[:4000],
                      data=s.data) for i, s in enumerate(specs, 1)]
        Event.objects.bulk_create(rows)
        newest = last + len(rows)
        Run.objects.filter(pk=run_id).update(last_event_seq=newest)
        transaction.on_commit(lambda: broadcast(run_id, newest))
    return rows


def broadcast(run_id: int, seq: int) -> None:
    """Tell the run's watchers that events up to ``seq`` exist. Best effort by design."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group_name(run_id), {"type": "run.event", "seq": seq})
    except Exception as exc:  # Redis away: the events are safe in the database
        level = logging.DEBUG if _warned else logging.WARNING
        log.log(level, "could not announce event %s of run %s (live pages catch up when the "
                "channel layer is back): %s", seq, run_id, exc)
        _warned.add(True)


_warned: set[bool] = set()
