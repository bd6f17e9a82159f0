"""How long a model call may receive nothing before it is given up and retried (issue 37).

A provider now and then loses a request: no answer, no error, the connection held open. With
one fixed timeout (``QUORUM_LLM_TIMEOUT``, 120 s) such a call stalls its run for two minutes
and then succeeds on its retry in a second. The journal knows how long each model takes: a
model's *stall timeout* is ``QUORUM_LLM_STALL_FACTOR`` (3) × the 99th percentile of the
latency of its recent successful first attempts, at least ``QUORUM_LLM_STALL_FLOOR`` (15 s),
at most ``QUORUM_LLM_TIMEOUT``. It is the HTTP read timeout LiteLLM is given: the time the
call may go without receiving anything (a non-streamed answer arrives all at once, so for
one it is the time to the answer). A model with fewer than ``MIN_SAMPLES`` such calls gets
``QUORUM_LLM_TIMEOUT``. The gateway doubles it for each retry and gives the last attempt the
whole ``QUORUM_LLM_TIMEOUT``, so a call that is slow for a reason still gets its answer.

Each process learns each model's figure from the database once per ``TTL`` seconds (one
query of at most ``SAMPLE`` rows), one thread at a time: the others meanwhile use the figure
they had, or the ceiling."""

from __future__ import annotations

import math
import threading
import time

from django.conf import settings
from django.db import DatabaseError

from ..models import ModelCall

SAMPLE = 500  # the model's latest successful first attempts looked at
MIN_SAMPLES = 20  # fewer: the model's latency is not known yet
TTL = 300.0  # s a process keeps a model's figure before reading the journal again

_known: dict[str, tuple[float | None, float]] = {}  # model → (p99 in s or None, read at)
_reading: set[str] = set()
_lock = threading.Lock()


def p99_seconds(model: str) -> float | None:
    """The 99th percentile latency of ``model``'s latest successful first attempts, or None
    with fewer than ``MIN_SAMPLES`` of them."""
    latencies = sorted(ModelCall.objects.filter(
        model=model, error="", attempts=1, replayed_from__isnull=True,
    ).order_by("-id").values_list("latency_ms", flat=True)[:SAMPLE])
    if len(latencies) < MIN_SAMPLES:
        return None
    return latencies[min(len(latencies) - 1, math.ceil(0.99 * len(latencies)) - 1)] / 1000


def stall_timeout(model: str) -> float:
    """Seconds ``model``'s call may receive nothing before it is retried (see the module)."""
    ceiling = float(settings.QUORUM_LLM_TIMEOUT)
    factor = float(settings.QUORUM_LLM_STALL_FACTOR)
    if factor <= 0:
        return ceiling
    now = time.monotonic()
    with _lock:
        p99, read_at = _known.get(model, (None, -math.inf))
        due = now - read_at >= TTL and model not in _reading
        if due:
            _reading.add(model)
    if due:
        try:
            p99 = p99_seconds(model)
        except DatabaseError:  # the call goes on with what was known; read again next time
            pass
        try:
            with _lock:
                _known[model] = (p99, time.monotonic())
        finally:
            with _lock:
                _reading.discard(model)
    if p99 is None:
        return ceiling
    return min(ceiling, max(float(settings.QUORUM_LLM_STALL_FLOOR), factor * p99))


def forget() -> None:
    """Drop every model's figure (tests; a process that wants the journal read again)."""
    with _lock:
        _known.clear()
