"""Multi-agent code review as a pattern of the run engine.

Stages (each name is also the journal key of its model calls):
  ``analyze``     every analyzer that reads each changed file, secrets scanners on all
                  (``analyze.py``); no model call
  ``review``      security, architecture and style reviewers, concurrently, beside the
                  change-level checks (``checks``: cross-file analysis, review rules)
  ``reflect``     each reviewer reads its colleagues' findings and amends, concurrently
  ``verify``      every finding checked against the code by the verifier (keep, correct or
                  discard with a reason), severity by the written rubric, kind
                  (``verify``, ``../quality``)
  ``synthesize``  amendments applied, duplicates merged, weak findings dropped, repeats
                  clustered into one finding with every location, verdict
  (gate ``triage``: the person accepts or overrides the verdict; findings are triaged
  one by one outside the state machine, since they do not move the run)
  ``close``       the run completes with the decided verdict

A reviewer that raises or times out degrades the review (the others go on); the review
fails only when no reviewer succeeded. Synthesis records what really examined each file
(``coverage.py``); a review that left part of the change unexamined, or missed a reviewer,
does not propose approve. The critical path is four model latencies:
reviewers overlap, reflections overlap, the verifier's batches overlap, and synthesis is one
call.

Modules: ``stages`` (the ``CodeReview`` pattern), ``analyze`` (its first stage), ``checks``,
``verify``, ``helpers`` (prompt batches, code lookup,
coverage, fallback summary), ``records`` (what the Django side persists), ``constants``.
"""

from __future__ import annotations

from .constants import DEFAULTS, TRIAGE_GATE, VERDICT_LABELS
from .stages import CodeReview

PATTERN = CodeReview()

__all__ = ["DEFAULTS", "PATTERN", "TRIAGE_GATE", "VERDICT_LABELS", "CodeReview"]
