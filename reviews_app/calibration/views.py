"""The calibration page: the scorecard of the signed-in person's newest calibration, read from
their own calibration runs (``runner``), and the precision of their own triage. Nothing of
another person's is ever read; with no calibration yet the page says how to run one."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from . import report, runner
from .cases import STARTER_NAME
from .scoring import WHOLE


def _table(card: dict) -> list[dict]:
    return [{"name": report.name(row), "whole": row["role"] == WHOLE, "model": row["model"],
             "recall": report.recall_text(row), "interval": report.interval(row),
             "not_examined": row["not_examined"], "fp": report.fp_text(row),
             "extra": row["extra"], "unique": row["unique"],
             "cost": report.money(row["cost_per_find"], none="n/a (none found)"),
             "by_category": row["by_category"]} for row in card["rows"]]


@login_required
@require_GET
def calibration(request):
    card = runner.scorecard(request.user)
    ctx = {"card": card, "starter": STARTER_NAME,
           "username": request.user.get_username(),
           "precision": card["precision"] if card else runner.triage_precision(request.user),
           "no_triage": runner.NO_TRIAGE}
    if card:
        cats = sorted({c for row in card["rows"] for c in row["by_category"]})
        ctx.update(table=_table(card), categories=cats,
                   cost=report.money(card["cost_usd"]),
                   by_category=[(report.name(row), [row["by_category"].get(c) for c in cats])
                                for row in card["rows"]])
    return render(request, "reviews_app/calibration.html", ctx)
