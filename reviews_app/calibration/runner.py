"""Running a calibration set as real reviews, and reading the scorecard back from them.

Each case goes the way a pasted diff goes (``services.from_text``, ``services.prepare``,
``services.start_review``), as a review owned by the person, listed in their history, run
to its end in this process (``engine.run_inline``; the proposed verdict is accepted for
them, as ``manage.py review`` does, and no finding is triaged). What differs, and why:

* the run carries ``options["calibration"]``: the batch (one id per run of a set), the set,
  the case, its place in the set, and its known defects. That marker is how calibration
  runs are recognised again: only this module sets it (no form or command passes options
  through), and a fork of such a run is not one (``forked_from`` is set);
* the history names the run "Calibration <set> i/n: <case>", while the reviewers read the
  label any pasted diff gets ("Pasted diff: <first file>"): a case's name can give its
  defect away, and what the models see must be what a real review shows them;
* the owner's memories and review rules are left out, so that the figures are the
  reviewers' and repeat from one person to the next.

The scorecard is computed from the runs of one batch (the newest by default) of one owner,
so a page can show it at any time, during a run included; another person's runs never
count. Precision comes from the owner's triage of their other reviews.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from agents_app import engine
from agents_app.llm.gateway import check_model_name, is_offline
from agents_app.llm.runtime import OFFLINE_MODELS
from agents_app.models import ModelCall, Run
from agents_app.patterns.base import Decision
from common.analyzers.tools import BY_NAME

from .. import services
from ..models import Finding, Review
from . import scoring
from .cases import Case, CaseSet, Defect

MARK = "calibration"
OFFLINE = OFFLINE_MODELS[0]
AUTHOR = "Calibration"
NO_TRIAGE = "no triaged reviews yet"


class BadModels(ValueError):
    """A ``role=model`` the calibration cannot use; the message says which and why."""


def default_models() -> dict[str, str]:
    """The built-in offline model for every role of the review."""
    return dict.fromkeys(services.ROLES, OFFLINE)


def parse_models(specs: list[str]) -> dict[str, str]:
    """``role=model`` items over the offline default. Raises BadModels."""
    models = default_models()
    for spec in specs:
        role, sep, name = spec.partition("=")
        role, name = role.strip(), name.strip()
        if not sep or role not in services.ROLES:
            raise BadModels(f"--models takes ROLE=MODEL with ROLE one of "
                            f"{', '.join(services.ROLES)} (got {_oneline(spec)!r}).")
        if problem := check_model_name(name):
            raise BadModels(f"--models {role}: {_oneline(problem)}")
        models[role] = name
    return models


# --- running ------------------------------------------------------------------------------
@dataclass
class Batch:
    id: str
    label: str
    runs: list[int] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (case, why it did not run)


def run_set(user, case_set: CaseSet, models: dict[str, str] | None = None, *,
            progress: Callable[[int, Case, Run | None, str], None] | None = None) -> Batch:
    """Review every case of the set as ``user``, one after another, to the end. A case that
    cannot start (a daily cap reached, an input the settings' limits refuse) is recorded in
    ``errors`` with the reason, and the others go on."""
    models = {**default_models(), **(models or {})}
    batch = Batch(id=uuid.uuid4().hex[:12], label=case_set.label)
    started = timezone.now().isoformat(timespec="seconds")
    total = len(case_set.cases)
    for i, case in enumerate(case_set.cases, 1):
        marker = {"batch": batch.id, "set": case_set.label, "case": case.name, "index": i,
                  "cases": total, "language": case.language, "started": started,
                  "defects": [d.as_dict() for d in case.defects]}
        try:
            run = start_case(user, case, models, marker)
        except services.InputError as exc:
            batch.errors.append((case.name, str(exc)))
            if progress:
                progress(i, case, None, str(exc))
            continue
        run = finish(run)
        batch.runs.append(run.pk)
        if progress:
            progress(i, case, run, "")
    return batch


def start_case(user, case: Case, models: dict[str, str], marker: dict[str, Any]) -> Run:
    inp = services.from_text(case.diff_text)
    prepared = services.prepare(inp)
    title = f"{AUTHOR} {marker['set']} {marker['index']}/{marker['cases']}: {case.name}"
    return services.start_review(user, inp, prepared, models=models, enqueue=False,
                                 options={MARK: marker, "review_rules": []},
                                 title=title, remembered=False)


def finish(run: Run) -> Run:
    """Run the review in this process; at the triage gate accept the proposed verdict (no
    finding is decided), then run it to its end."""
    run = engine.run_inline(run.pk)
    if run.status == "awaiting_triage":
        run = engine.decide(run, run.owner, run.stage_seq, Decision(
            action="accept", author=AUTHOR,
            feedback="Accepted automatically by the calibration run; no person triaged it."),
            enqueue=False)
        run = engine.run_inline(run.pk)
    return run


# --- reading back -------------------------------------------------------------------------
def calibration_runs(user):
    """The user's calibration runs (forks of them are not)."""
    return Run.objects.filter(owner=user, pattern=services.PATTERN, forked_from__isnull=True,
                              options__has_key=MARK)


def latest_batch(user) -> str | None:
    run = calibration_runs(user).order_by("-id").only("options").first()
    if run is None:
        return None
    return str((run.options or {}).get(MARK, {}).get("batch") or "") or None


def scorecard(user, batch: str | None = None) -> dict[str, Any] | None:
    """The scorecard of one of ``user``'s batches (the newest when None); None when they
    have none (or not that one)."""
    batch = batch or latest_batch(user)
    if not batch:
        return None
    runs = list(calibration_runs(user).filter(**{f"options__{MARK}__batch": batch})
                .select_related("review").order_by("id"))
    if not runs:
        return None
    newest: dict[str, Run] = {}
    for run in runs:  # one run per case: a case run twice in a batch counts its newest run
        newest[str(run.options[MARK].get("case"))] = run
    runs = sorted(newest.values(), key=lambda r: r.options[MARK].get("index") or 0)
    costs = _role_costs([r.pk for r in runs])
    outcomes = [outcome_of(r, costs.get(r.pk, {})) for r in runs]
    card = scoring.scorecard(outcomes)
    first = runs[0].options[MARK]
    expected = max(int(r.options[MARK].get("cases") or 0) for r in runs)
    models = {role: m for role, m in runs[0].models_used.items()}
    card.update(batch=batch, set=str(first.get("set") or ""), started=first.get("started"),
                set_cases=expected, missing=max(expected - len(runs), 0), models=models,
                offline=all(is_offline(m) for m in models.values()))
    card["precision"] = triage_precision(user)
    card["precision_note"] = "" if card["precision"] else NO_TRIAGE
    return card


def _role_costs(run_ids: list[int]) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for row in (ModelCall.objects.filter(run_id__in=run_ids).values("run_id", "role")
                .annotate(cost=Sum("cost_usd"))):
        out.setdefault(row["run_id"], {})[row["role"]] = float(row["cost"] or Decimal(0))
    return out


def outcome_of(run: Run, costs: dict[str, float]) -> scoring.Outcome:
    """One calibration run as the scoring reads it."""
    mark = run.options.get(MARK) or {}
    try:
        defects = [Defect.from_dict(d) for d in mark.get("defects") or ()]
    except (KeyError, TypeError, ValueError):
        defects = []
    outcome = scoring.Outcome(case=str(mark.get("case") or run.pk),
                              language=str(mark.get("language") or ""), defects=defects,
                              run_id=run.pk, status=run.status, cost=float(run.cost_usd or 0),
                              title=run.task)
    review = getattr(run, "review", None)
    state = run.state or {}
    synthesized = review is not None and bool(state.get("result"))
    if review is None:
        outcome.error = "the run has no review"
    elif run.is_terminal and run.status != "completed":
        outcome.error = f"the review ended as {run.status}: {run.error or 'no findings'}"
    elif not synthesized and run.status in scoring.SCORED:
        outcome.error = "the review has no synthesized findings"
    if not outcome.error and run.status in scoring.SCORED:
        outcome.findings = [scoring.Reported.of({
            "key": f.key, "category": f.category, "file": f.file, "line": f.line,
            "end_line": f.end_line, "locations": f.locations, "reviewer": f.reviewer,
            "reviewers": f.reviewers}) for f in review.findings.filter(kept=True)]
    for role in scoring.ROLES:
        model = run.models_used.get(role)
        if model:
            examined = examined_by(role, model, review, state) if synthesized else frozenset()
            outcome.roles[role] = scoring.RoleRun(model=model, examined=examined,
                                                  cost=costs.get(role, 0.0))
    return outcome


def examined_by(role: str, model: str, review: Review, state: dict) -> frozenset[str]:
    """The files ``role`` examined in this review (see ``scoring``'s rules)."""
    paths = [str(f.get("path")) for f in review.files or () if isinstance(f, dict)]
    if role == "checker":
        info = (state.get("checks") or {}).get("crossfile") or {}
        if info.get("status") != "ok":
            return frozenset()
        left = set(info.get("left_out") or ())
        return frozenset(p for p in paths if p not in left)
    if ((review.reviewers or {}).get(role) or {}).get("status") not in ("ok", "partial"):
        return frozenset()
    out = set()
    for c in review.coverage or ():
        if not isinstance(c, dict) or c.get("path") not in paths:
            continue
        if is_offline(model):  # it restates analyzer results: it sees what they read
            if any(t in BY_NAME and BY_NAME[t].reads_code for t in c.get("analyzers") or ()):
                out.add(str(c["path"]))
        elif role in (c.get("reviewers") or ()):
            out.add(str(c["path"]))
    return frozenset(out)


def triage_precision(user) -> list[dict[str, Any]]:
    """Precision of each role and model from the findings ``user`` accepted or rejected in
    their own reviews, calibration runs left out."""
    rows = (Finding.objects.filter(review__owner=user, kept=True,
                                   decision__in=(Finding.Decision.ACCEPTED,
                                                 Finding.Decision.REJECTED))
            .exclude(review__run__options__has_key=MARK)
            .values_list("reviewers", "reviewer", "review__run__models_used", "decision"))
    return scoring.triage_precision((reviewers or [reviewer], models or {}, decision)
                                    for reviewers, reviewer, models, decision in rows)


def _oneline(text: object) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in str(text))[:200]
