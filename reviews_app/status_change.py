"""The one status transition memories and review rules share (suggested → active → retired and
back): the row locked, the move checked against where it may come from, and who decided it
and when recorded. The pages word the outcome themselves."""

from __future__ import annotations

from typing import TypeVar

from django.db import models, transaction
from django.shortcuts import get_object_or_404
from django.utils import timezone

M = TypeVar("M", bound=models.Model)


def change_status(model: type[M], pk: int, user, allowed: tuple[str, ...],
                  to: str) -> tuple[M, str]:
    """``(row, outcome)``: outcome "same" (it already had that status), "refused" (its status
    is not in ``allowed``) or "changed". Another user's row, or none, is a 404."""
    row = get_object_or_404(model, pk=pk, owner=user)
    with transaction.atomic():
        row = model._default_manager.select_for_update().get(pk=row.pk)
        status = row.status  # type: ignore[attr-defined]
        if status == to:
            return row, "same"
        if status not in allowed:
            return row, "refused"
        row.status = to  # type: ignore[attr-defined]
        row.decided_by = user  # type: ignore[attr-defined]
        row.decided_at = timezone.now()  # type: ignore[attr-defined]
        row.save(update_fields=["status", "decided_by", "decided_at"])
    return row, "changed"
