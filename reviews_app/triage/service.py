"""Triage of a review: the person's decision on each finding and on the verdict.

Every change is recorded as a ``TriageDecision`` in the same transaction as the change, under
the lock of the run and then the review row (the order the engine uses), so two tabs or a
double submit cannot interleave. Rules:

- findings are triaged only while the verdict is open (at the gate, or after a reopen);
- the verdict is finalised only when no kept finding is pending: the person triages each one
  or settles the rest at once (accept all remaining / reject all remaining);
- a final verdict locks triage until someone reopens it; finalising again makes a new version.

Each refusal is a ``Refused`` with the words the page shows and the HTTP status to answer.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from agents_app import engine
from agents_app import records as run_records
from agents_app.events import append_events
from agents_app.models import Run, Status
from agents_app.patterns import get_pattern
from agents_app.patterns.base import Decision, Event

from ..memories import service as memories
from ..models import Finding, RejectReason, Review, TriageDecision, Verdict
from ..pipeline.pattern import TRIAGE_GATE
from ..pipeline.schema import SEVERITIES
from ..prflow import status as commit_status
from ..prflow.publishing import dispatch as publishing

Kind = TriageDecision.Kind
# The run event of a finding's decision (reviews_app/views.py redraws the panels it changes).
FINDINGS_TRIAGED = "findings_triaged"
PENDING, ACCEPTED, REJECTED = (Finding.Decision.PENDING, Finding.Decision.ACCEPTED,
                               Finding.Decision.REJECTED)
OPEN_STATUSES = (Status.AWAITING_TRIAGE, Status.COMPLETED)


class Refused(Exception):
    """The decision was not taken and nothing changed; ``str()`` says why, in plain words."""

    def __init__(self, message: str, status: int = 409, *, untriaged: bool = False,
                 critical: list[str] | None = None):
        super().__init__(message)
        self.status = status
        self.untriaged = untriaged
        self.critical = critical or []  # approving needs a confirmation naming these


# --- reading the state ---------------------------------------------------------------------------
def version_text(review: Review) -> str:
    """Which version of the triage the review shows, e.g. for exports and the locked notice."""
    if not review.final_verdict:
        if review.triage_version:
            return f"draft: not finalised (version {review.triage_version} was reopened)"
        return "draft: not finalised"
    by = review.verdict_decided_by.get_username() if review.verdict_decided_by else "someone"
    at = (f" at {timezone.localtime(review.verdict_decided_at):%Y-%m-%d %H:%M}"
          if review.verdict_decided_at else "")
    return f"triage version {review.triage_version}, finalised by {by}{at}"


def closed_reason(review: Review) -> str | None:
    """Why triage cannot change now, or None while it is open."""
    if not review.proposed_verdict:
        return "The findings are not ready yet: wait for the review to finish."
    if review.final_verdict:
        return (f"The verdict is final ({version_text(review)}), so triage is locked. "
                "Reopen the review to change a decision.")
    if review.run.status not in OPEN_STATUSES:
        return (f"This review ended as “{review.run.get_status_display()}”, so its triage is "
                "closed.")
    return None


def _state_text(f: Finding) -> str:
    if f.decision == PENDING:
        return "not triaged"
    by = f.decided_by.get_username() if f.decided_by else "someone"
    return f"{f.get_decision_display().lower()} by {by}"


def _pending(review: Review):
    return review.findings.filter(kept=True, decision=PENDING).order_by("position")


def accepted_critical(review: Review) -> list[Finding]:
    """The critical findings the person accepted: approving the change over them needs a
    confirmation that names them."""
    return list(review.findings.filter(kept=True, decision=ACCEPTED, severity="critical")
                .order_by("position"))


def named(findings: list[Finding]) -> str:
    """Findings by key and title, for a sentence: SEC-2 “Shell command built with %”."""
    def title(f: Finding) -> str:
        return f.title if len(f.title) <= 100 else f.title[:99] + "…"
    return ", ".join(f"{f.key} \u201c{title(f)}\u201d" for f in findings)


def _check_critical(review: Review, verdict: str, confirmed: list[str] | None) -> None:
    """Approving over accepted critical findings is refused unless the person confirmed
    exactly those (a page that showed others is out of date)."""
    if verdict != Verdict.APPROVE:
        return
    critical = accepted_critical(review)
    if critical and sorted(confirmed or ()) != sorted(f.key for f in critical):
        n = len(critical)
        raise Refused(
            f"Approving needs your confirmation: you accepted {n} critical finding"
            f"{'s' if n > 1 else ''}: {named(critical)}. Tick “I approve despite "
            f"{'these critical findings' if n > 1 else 'this critical finding'}” and approve "
            "again, or change the verdict.", critical=[f.key for f in critical])


# --- writing -----------------------------------------------------------------------------------
def _lock(review: Review) -> Review:
    """Lock the run, then the review, and read the review afresh (inside a transaction)."""
    Run.objects.select_for_update().filter(pk=review.run_id).values_list("pk").get()
    return (Review.objects.select_for_update(of=("self",))
            .select_related("run", "verdict_decided_by").get(pk=review.pk))


def _record(review: Review, user, kind: str, *, changes=(), before: str = "", after: str = "",
            note: str = "", version: int | None = None) -> TriageDecision:
    decision = TriageDecision.objects.create(
        review=review, kind=kind, actor=user, actor_name=user.get_username() if user else "",
        version=review.triage_version if version is None else version,
        changes=list(changes), verdict_before=before, verdict_after=after, note=note)
    if kind not in (Kind.FINALISE, Kind.REOPEN):  # those have run events of their own
        # A run event too (same transaction, announced after commit): every page open on the
        # review redraws its findings, verdict and history live, not only the one that decided.
        append_events(review.run_id, [Event(
            FINDINGS_TRIAGED, f"{decision.actor_name or 'Someone'} {describe(decision)}.",
            {"kind": kind, "findings": [c["finding"] for c in decision.changes]})])
    return decision


def _places(review: Review, keys: list[str]):
    """The dropped findings that ``keys`` hold: each place a cluster folded ("Clustered into
    KEY") and each duplicate merged into it, whose decision follows the finding's own."""
    return review.findings.select_for_update(of=("self",)).filter(
        kept=False, duplicate_of__in=keys).order_by("position")


def _follow(review: Review, finding: Finding) -> list[str]:
    """Give ``finding``'s decision to every place it holds (a rejected cluster is rejected
    everywhere: each place's fingerprint is then suppressed in the pull request's next round,
    as the finding's own is). Returns their keys."""
    places = list(_places(review, [finding.key]))
    for p in places:
        p.decision, p.comment, p.reject_reason = (finding.decision, finding.comment,
                                                  finding.reject_reason)
        p.decided_by, p.decided_at = finding.decided_by, finding.decided_at
        p.save(update_fields=["decision", "comment", "reject_reason", "decided_by",
                              "decided_at"])
    return [p.key for p in places]


def decide_finding(review: Review, key: str, user, decision: str, comment: str = "",
                   seen: str = "", reason: str = "") -> tuple[Finding, str]:
    """Accept, reject or undo (``pending``) one kept finding. ``seen`` is the state the page
    showed, if it says: a different state now means the page is out of date. ``reason``
    (``RejectReason``, rejections only) is kept on the finding and in the decision record,
    and may suggest a memory (``memories.suggest``); undoing clears it and withdraws the
    suggestion. Returns the finding and a notice ("" when it changed as asked)."""
    if decision not in Finding.Decision.values:
        raise Refused("That decision could not be read: accept or reject the finding.", 400)
    if reason and (reason not in RejectReason.values or decision != REJECTED):
        raise Refused("That reason could not be read: reject the finding as wrong, not "
                      "important here, intended, duplicate or other.", 400)
    if "\x00" in comment:
        raise Refused("The comment contains a NUL byte; remove it and try again.", 400)
    with transaction.atomic():
        review = _lock(review)
        finding = (review.findings.select_for_update(of=("self",)).select_related("decided_by")
                   .get(kept=True, key=key))
        if closed := closed_reason(review):
            raise Refused(closed)
        if seen and seen != finding.decision:
            raise Refused(f"{key} is {_state_text(finding)} since this page was loaded, so "
                          "nothing changed. Its current state is shown.")
        if finding.decision == decision:
            return finding, f"{key} is {_state_text(finding)} already; nothing changed."
        if decision != PENDING and finding.decision != PENDING:
            raise Refused(f"{key} is {_state_text(finding)} already. Undo that first.")
        before = finding.decision
        finding.decision = decision
        finding.comment = comment.strip()[:4000]
        finding.reject_reason = reason if decision == REJECTED else ""
        finding.decided_by = None if decision == PENDING else user
        finding.decided_at = None if decision == PENDING else timezone.now()
        finding.save(update_fields=["decision", "comment", "reject_reason", "decided_by",
                                    "decided_at"])
        places = _follow(review, finding)
        kind = {PENDING: Kind.UNDO, ACCEPTED: Kind.ACCEPT, REJECTED: Kind.REJECT}[decision]
        change = {"finding": key, "before": before, "after": decision}
        if finding.reject_reason:
            change["reason"] = finding.reject_reason
        if places:
            change["places"] = places
        _record(review, user, kind, changes=[change], note=finding.comment)
        # A memory for each file the finding holds a place in (one per file: the glob is the
        # file's), so a rejected cluster across files is not raised again in any of them.
        files = {finding.file: finding}
        for p in _places(review, [key]):
            files.setdefault(p.file, p)
        for f in files.values():
            if decision == REJECTED:
                memories.suggest(review, f, user)
            elif before == REJECTED:
                memories.withdraw(review, f, user)
    return finding, ""


def _settle(review: Review, user, findings, decision: str, kind: str, note: str = "") -> int:
    keys = list(findings.values_list("key", flat=True))
    if not keys:
        return 0
    now = timezone.now()
    Finding.objects.filter(review=review, key__in=keys, decision=PENDING).update(
        decision=decision, decided_by=user, decided_at=now)
    held: dict[str, list[str]] = {}
    for p in _places(review, keys):
        held.setdefault(p.duplicate_of, []).append(p.key)
    Finding.objects.filter(review=review, kept=False, duplicate_of__in=keys).update(
        decision=decision, decided_by=user, decided_at=now, comment="", reject_reason="")
    changes = []
    for k in keys:
        change = {"finding": k, "before": PENDING, "after": decision}
        if held.get(k):
            change["places"] = held[k]
        changes.append(change)
    _record(review, user, kind, note=note, changes=changes)
    return len(keys)


def accept_severity(review: Review, severity: str, user) -> int:
    """Accept every still-pending kept finding of ``severity``; the number accepted."""
    if severity not in SEVERITIES:
        raise Refused("Choose a severity.", 400)
    with transaction.atomic():
        review = _lock(review)
        if reason := closed_reason(review):
            raise Refused(reason)
        return _settle(review, user, _pending(review).filter(severity=severity), ACCEPTED,
                       Kind.ACCEPT_SEVERITY, note=severity)


def settle_rest(review: Review, decision: str, user, seen: list[str] | None = None) -> int:
    """Accept or reject every kept finding still pending; the number settled. ``seen`` lists
    the pending findings the page showed, if it says: another set means it is out of date."""
    if decision not in (ACCEPTED, REJECTED):
        raise Refused("Choose to accept or to reject the remaining findings.", 400)
    with transaction.atomic():
        review = _lock(review)
        if reason := closed_reason(review):
            raise Refused(reason)
        pending = _pending(review)
        if seen is not None and sorted(seen) != sorted(pending.values_list("key", flat=True)):
            raise Refused("The findings changed since this page was loaded, so nothing was "
                          "settled. Check the list below and try again.")
        kind = Kind.ACCEPT_REST if decision == ACCEPTED else Kind.REJECT_REST
        return _settle(review, user, pending, decision, kind)


def finalise(review: Review, user, *, action: str, verdict: str = "", reason: str = "",
             seq: int, confirmed_critical: list[str] | None = None) -> Review:
    """Accept the proposed verdict or override it, once nothing is left untriaged. At the
    gate the engine takes the decision (and moves the run on); after a reopen the pattern
    checks it the same way and the review alone changes. Approving over accepted critical
    findings needs ``confirmed_critical`` to name exactly them."""
    decision = Decision(action=action, feedback=reason,
                        edits={"verdict": verdict} if action == "override" else None,
                        author=user.get_username())
    with transaction.atomic():
        review = _lock(review)
        if review.final_verdict:
            raise Refused(f"The verdict is final already ({version_text(review)}); nothing "
                          "changed.")
        if why := closed_reason(review):
            raise Refused(why)
        left = list(_pending(review).values_list("key", flat=True))
        if left:
            raise Refused(
                f"The verdict cannot be finalised yet: {len(left)} finding"
                f"{'s are' if len(left) > 1 else ' is'} not triaged ({', '.join(left)}). "
                "Accept or reject each one, or settle them all at once with “Accept all "
                "remaining” or “Reject all remaining”.", untriaged=True)
        if action in ("accept", "override"):
            _check_critical(review, review.proposed_verdict if action == "accept" else verdict,
                            confirmed_critical)
        run = review.run
        if run.status == Status.AWAITING_TRIAGE:
            try:
                engine.decide(run, user, seq, decision)  # records.py writes the decision
            except engine.StaleDecision as exc:
                raise Refused(str(exc)) from None
        else:
            result = get_pattern(run.pattern).decide(TRIAGE_GATE, run.state, decision)
            run_records.persist(run, result.records, user=user)
            Run.objects.filter(pk=run.pk).update(state=result.state)
            append_events(run.pk, result.events)
    review.refresh_from_db()
    return review


def record_final(review: Review, user, verdict: str, reason: str) -> None:
    """The verdict becomes final as a new version (called where the verdict is persisted)."""
    version = review.triage_version + 1
    Review.objects.filter(pk=review.pk).update(
        final_verdict=verdict, verdict_reason=reason, verdict_decided_by=user,
        verdict_decided_at=timezone.now(), triage_version=version)
    _record(review, user, Kind.FINALISE, before=review.proposed_verdict, after=verdict,
            note=reason, version=version)
    publishing.after_final(review, version, user)  # the policy says whether it publishes
    commit_status.touch(review)  # a finalised approval turns the pull request's status green


def reopen(review: Review, user, note: str = "") -> Review:
    """Unlock triage of a finalised review; the next finalisation makes a new version."""
    with transaction.atomic():
        review = _lock(review)
        if not review.final_verdict:
            raise Refused("This review's verdict is not final, so triage is open already; "
                          "nothing changed.")
        if review.run.status != Status.COMPLETED:
            raise Refused("The review is still closing; reopen it in a moment.")
        from agents_app.gates.core import rule_at

        rule = rule_at(review.run, TRIAGE_GATE)
        if rule is not None and rule.required_approvals > 1:
            # A reopened verdict is decided by one person, off the gate: it could not gather
            # the approvals the team's rule asks for (issue 35).
            raise Refused(f"The team's rule “{rule.name}” asks for {rule.required_approvals} "
                          "approvals of the verdict, which a reopened review cannot gather: "
                          "start a new review round instead.", 400)
        note = note.strip()[:4000]
        _record(review, user, Kind.REOPEN, before=review.final_verdict, after="", note=note)
        Review.objects.filter(pk=review.pk).update(
            final_verdict="", verdict_reason="", verdict_decided_by=None, verdict_decided_at=None)
        who = user.get_username()
        commit_status.touch(review)  # no longer final: no longer green
        append_events(review.run_id, [Event(
            "triage_reopened",
            f"{who} reopened triage after version {review.triage_version}"
            + (f": {note}" if note else "."), {"version": review.triage_version})])
    review.refresh_from_db()
    return review


def history(review: Review) -> list[TriageDecision]:
    """The decisions on ``review``, oldest first (the page and the timeline read the same
    way)."""
    return list(review.decisions.order_by("id"))


STATE_WORDS = {PENDING: "not triaged", ACCEPTED: "accepted", REJECTED: "rejected"}
VERDICT_WORDS = {v: label.lower() for v, label in Verdict.choices}
REASON_WORDS = {v: label.lower() for v, label in RejectReason.choices}


def describe(d: TriageDecision) -> str:
    """What ``d`` did, in words (without who and when, which the page shows beside it)."""
    if d.kind == Kind.FINALISE:
        how = ("accepted the proposed verdict" if d.verdict_after == d.verdict_before else
               f"overrode the proposed verdict ({VERDICT_WORDS.get(d.verdict_before, '?')})")
        return (f"finalised the verdict as version {d.version}: "
                f"{VERDICT_WORDS.get(d.verdict_after, d.verdict_after)} ({how})")
    if d.kind == Kind.REOPEN:
        return (f"reopened triage after version {d.version}: "
                f"{VERDICT_WORDS.get(d.verdict_before, d.verdict_before)} → draft")
    changes = d.changes or []
    keys = ", ".join(c["finding"] for c in changes)
    moves = {(c["before"], c["after"]) for c in changes}
    move = (" → ".join(STATE_WORDS.get(s, s) for s in next(iter(moves))) if len(moves) == 1
            else "changed")
    what = {Kind.ACCEPT_SEVERITY: f"accepted all {d.note} findings",
            Kind.ACCEPT_REST: "accepted all remaining findings",
            Kind.REJECT_REST: "rejected all remaining findings"}.get(d.kind)
    held = sum(len(c.get("places") or ()) for c in changes)
    if held:  # the places a cluster held follow its decision
        keys += f" and the {held} place{'s' if held != 1 else ''} {'they' if len(changes) > 1 else 'it'} held"
    if what:
        return f"{what} ({len(changes)}): {keys} ({move})"
    why = REASON_WORDS.get(changes[0].get("reason", "")) if len(changes) == 1 else None
    return f"{d.get_kind_display()} {keys} ({move})" + (f", as {why}" if why else "")
