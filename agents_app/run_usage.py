"""What a run's model calls cost, role by role: the run header of every pattern shows it."""

from __future__ import annotations

from decimal import Decimal

from django.db.models import Count, Sum

from .models import ModelCall, Run
from .patterns import PATTERNS


def usage_by_role(run: Run) -> list[dict]:
    """One row per role that made a call: its model, calls, tokens in and out, and cost, in the
    order the pattern lists its roles (others after, by name)."""
    rows = (ModelCall.objects.filter(run=run).values("role")
            .annotate(calls=Count("id"), prompt=Sum("prompt_tokens"),
                      completion=Sum("completion_tokens"), cost=Sum("cost_usd")))
    pattern = PATTERNS.get(run.pattern)
    order = list(pattern.roles) if pattern else []
    out = [{"role": r["role"], "model": (run.models_used or {}).get(r["role"], ""),
            "calls": r["calls"], "prompt": r["prompt"] or 0, "completion": r["completion"] or 0,
            "tokens": (r["prompt"] or 0) + (r["completion"] or 0),
            "cost": r["cost"] or Decimal(0)} for r in rows]
    return sorted(out, key=lambda r: (order.index(r["role"]) if r["role"] in order else
                                      len(order), r["role"]))
