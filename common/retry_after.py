"""How long a server asks to be left alone: ``Retry-After`` (seconds or an HTTP date), else a
rate-limit reset time. Shared by the code-host clients and the notification webhooks."""

from __future__ import annotations

import datetime as dt
import email.utils
import time

import httpx


def retry_after_of(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or an HTTP date), else from a rate-limit
    reset time (``x-ratelimit-reset`` / ``ratelimit-reset``: epoch seconds)."""
    now = time.time() if now is None else now
    value = headers.get("retry-after", "").strip()
    if value:
        if value.isdigit():
            return float(int(value))
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None:
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
            return max(0.0, when.timestamp() - now)
    for name in ("x-ratelimit-reset", "ratelimit-reset"):
        reset = headers.get(name, "").strip()
        if reset.isdigit():
            n = int(reset)
            # GitLab's RateLimit-Reset is epoch seconds too; a small number is a delay
            return float(max(0, n - int(now))) if n > 1_000_000_000 else float(n)
    return None
