"""The code review pattern: its stages, its gate and the person's verdict (see the package
docstring for the flow)."""

from __future__ import annotations

from typing import Any

from agents_app.patterns.base import (
    Decision,
    Event,
    ForkEdit,
    Gate,
    InvalidDecision,
    ModelClient,
    Pattern,
    RunStopped,
    StageAbandoned,
    StageResult,
)
from agents_app.patterns.parallel import run_parallel
from common import analyzers, secret_keys

from ...fixes import check as fixcheck
from ...memories import match as memories
from .. import coverage, fingerprint, fold, prompts, rounds, synthesis
from ..quality.cluster import cluster
from ..schema import VERDICTS, ReflectionAnswer, ReviewerFindings, SynthesisAnswer
from . import analyze, checks, forks, verify
from .constants import DEFAULTS, TRIAGE_GATE, VERDICT_LABELS
from .helpers import batches, code_lookup, fallback_summary, true_coverage
from .records import ReviewersFinished, ReviewSynthesized, VerdictDecided


class CodeReview(Pattern):
    name = "code_review"
    label = "Code review"
    summary = ("Analyzers and a security, an architecture and a style reviewer read a diff; a "
               "synthesizer proposes a verdict; you triage every finding and decide it.")
    stage_labels = {"analyze": "Analyzers", "review": "Reviewers", "reflect":
                    "Reviewers reading each other's findings", "verify": "Checking the findings",
                    "synthesize": "Verdict", "close": "Closing"}
    # checker: cross-file analysis and the review-rules guardian; verifier: the safeguard,
    # severity and category passes over every finding.
    roles = ("security", "architecture", "style", "checker", "verifier", "synthesizer")
    role_defaults = {"style": "cheap"}
    live_renderer = "reviews_app.views.render_live_update"
    gates = (TRIAGE_GATE,)
    starts_from_task = False
    page = "review_detail"
    # A pull request's status says when its review was cancelled or failed (issue 31).
    on_terminal = "reviews_app.prflow.status.after_end"
    # A fork is a review of its own: its input, and its findings once synthesized (issue 33).
    on_fork = "reviews_app.services.fork_review"

    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        options = dict(options)
        source = options.pop("input")
        opts = {**DEFAULTS, **options}
        return {"task": task, "options": opts, "label": source.get("label", task),
                "files": source["files"], "coverage": source["coverage"],
                "total_files": source.get("total_files", len(source["files"]))}

    def first_stage(self, state):
        return "analyze"

    def status_for(self, stage: str | None) -> str:
        return {"analyze": "analyzing", "review": "reviewing", "reflect": "reflecting",
                "verify": "reflecting", "synthesize": "synthesizing",
                "close": "synthesizing"}.get(stage or "", "queued")

    def describe_stage(self, stage: str) -> str | None:
        return {"analyze": analyze.describe(),
                "review": "The security, architecture and style reviewers are reading the "
                          "change.",
                "reflect": "Each reviewer is reading its colleagues' findings.",
                "verify": "Checking every finding against the code, with a severity rubric "
                          "and a category.",
                "synthesize": "Merging the findings and proposing a verdict.",
                "close": "Closing the review."}.get(stage)

    def gate_message(self, gate: str) -> str | None:
        if gate == TRIAGE_GATE:
            return ("Waiting for you: accept or reject the findings, then accept or override "
                    "the verdict.")
        return None

    def run_stage(self, stage: str, state: dict, client: ModelClient) -> StageResult:
        handler = {"analyze": self._analyze, "review": self._review, "reflect": self._reflect,
                   "verify": verify.run, "synthesize": self._synthesize,
                   "close": self._close}[stage]
        return handler(dict(state), client)

    # --- 1. static analysis (analyze.py) ------------------------------------------------------
    def _analyze(self, state: dict, client: ModelClient) -> StageResult:
        return analyze.analyze(state)

    # --- 2. reviewers in parallel ----------------------------------------------------------------
    def _review(self, state: dict, client: ModelClient) -> StageResult:
        opts = state["options"]
        evidence = [e for e in state.get("analysis", {}).get("evidence", [])
                    if e.get("on_changed_line", True)]
        parts = batches(state["files"], int(opts["max_prompt_chars"]))
        jobs = {}
        for reviewer in opts["reviewers"]:
            for i, part in enumerate(parts):
                paths = {f["path"] for f in part}
                ev = [e for e in analyzers.for_category(evidence, reviewer) if e["file"] in paths]
                msgs = rounds.with_rules(
                    prompts.reviewer_messages(reviewer, state["label"], part, ev,
                                              memories=opts.get("memories")),
                    opts.get("rules"), paths)
                jobs[f"{reviewer}:{i}"] = (lambda r=reviewer, m=msgs, k=f"{reviewer}:{i}":
                                           client.complete(r, m, schema=ReviewerFindings, key=k))
        extra = checks.jobs(state, client)  # cross-file and rules checks, beside the reviewers
        outcomes = run_parallel({**jobs, **extra}, float(opts["reviewer_timeout"]),
                                 int(opts["max_parallel_calls"]))
        reviewed = {f["path"] for f in state["files"]}
        findings: list[dict] = []
        dropped: list[dict] = []
        reviewers: dict[str, dict] = {}
        readers: dict[str, list[str]] = {}
        offline = set(opts.get("offline_roles") or ())
        events = []
        for reviewer in opts["reviewers"]:
            mine = [outcomes[f"{reviewer}:{i}"] for i in range(len(parts))]
            for part, outcome in zip(parts, mine, strict=True):
                if not outcome.error and reviewer not in offline:
                    for f in part:
                        readers.setdefault(f["path"], []).append(reviewer)
            ok = [o for o in mine if not o.error]
            errors = sorted({o.error for o in mine if o.error})
            # A model may quote a secret it read in the diff: never whole in a finding.
            raw = [secret_keys.mask_finding(f.model_dump())
                   for o in ok for f in o.value.data.findings]
            numbered = synthesis.number_findings(
                reviewer, raw, synthesis.after_carried(opts.get("carried"),
                                                       synthesis.prefix_of(reviewer)))
            for f in numbered:
                f["category"] = f["category"] or reviewer
                if f["file"] not in reviewed:
                    f["status"] = "dropped"
                    f["drop_reason"] = "names a file that is not part of this change"
                    dropped.append(f)
                else:
                    findings.append(f)
            status = "ok" if ok else ("timeout" if all(o.timed_out for o in mine) else "failed")
            reviewers[reviewer] = {
                "status": status if len(ok) == len(mine) or not ok else "partial",
                "error": "; ".join(errors), "findings": len(numbered),
                "seconds": round(max(o.seconds for o in mine), 2),
                "batches": len(mine), "batches_ok": len(ok)}
            if ok:
                msg = f"The {reviewer} reviewer found {len(numbered)} issue(s)."
                if errors:
                    msg += f" {len(mine) - len(ok)} of {len(mine)} parts failed: {errors[0]}"
                events.append(Event("reviewer_done", msg, {"reviewer": reviewer,
                                                           "findings": len(numbered)}))
            else:
                events.append(Event("reviewer_failed", f"The {reviewer} reviewer failed: "
                                    f"{'; '.join(errors)}", {"reviewer": reviewer}))
        more, more_events = checks.collect(state, {k: outcomes[k] for k in extra})
        findings += [f for f in more if f["status"] == "kept"]
        dropped += [f for f in more if f["status"] != "kept"]
        events += more_events
        state.update(findings=findings + dropped, reviewers=reviewers, model_readers=readers)
        records = [ReviewersFinished(reviewers)]
        succeeded = [r for r, v in reviewers.items() if v["status"] in ("ok", "partial")]
        if not succeeded:
            reasons = "; ".join(f"{r}: {v['error']}" for r, v in reviewers.items())
            return StageResult(state=state, outcome="failed", records=records, events=events,
                               error=f"No reviewer succeeded, so there is no review. {reasons}")
        return StageResult(state=state, next_stage="reflect", records=records, events=events)

    # --- 3. reflection in parallel -------------------------------------------------------------------
    def _reflect(self, state: dict, client: ModelClient) -> StageResult:
        opts = state["options"]
        findings = state["findings"]
        live = [f for f in findings if f["status"] == "kept"]
        ok = [r for r, v in state["reviewers"].items() if v["status"] in ("ok", "partial")]
        jobs, events, reflection = {}, [], {}
        for reviewer in ok:
            own = [f for f in live if f["reviewer"] == reviewer]
            others = [f for f in live if f["reviewer"] != reviewer and f["reviewer"] in ok]
            if not others:
                note = ("skipped: no colleague findings to read" if len(ok) > 1 else
                        "skipped: the only reviewer that succeeded has no colleagues to read")
                reflection[reviewer] = {"status": "skipped", "note": note, "amendments": 0}
                events.append(Event("reflection_skipped", f"The {reviewer} reviewer's "
                                    f"reflection was {note}.", {"reviewer": reviewer}))
                continue
            msgs = prompts.reflection_messages(reviewer, own, others)
            jobs[reviewer] = (lambda r=reviewer, m=msgs:
                              client.complete(r, m, schema=ReflectionAnswer, key=f"reflect:{r}"))
        outcomes = run_parallel(jobs, float(opts["reviewer_timeout"]),
                                 int(opts["max_parallel_calls"]))
        amendments: dict[str, list[dict]] = {}
        for reviewer, out in outcomes.items():
            if out.error:
                reflection[reviewer] = {"status": "timeout" if out.timed_out else "failed",
                                        "note": out.error, "amendments": 0}
                events.append(Event("reflection_failed", f"The {reviewer} reviewer's reflection "
                                    f"failed ({out.error}); its first findings stand.",
                                    {"reviewer": reviewer}))
                continue
            items = [secret_keys.mask_deep(a.model_dump()) for a in out.value.data.amendments]
            amendments[reviewer] = items
            reflection[reviewer] = {"status": "ok", "note": "", "amendments": len(items)}
            kinds = ", ".join(f"{sum(a['action'] == k for a in items)} {k}"
                              for k in ("add", "upgrade", "downgrade", "retract")
                              if any(a["action"] == k for a in items)) or "no changes"
            events.append(Event("reflection_done", f"The {reviewer} reviewer reflected: {kinds}.",
                                {"reviewer": reviewer}))
        ordered = {r: amendments[r] for r in opts["reviewers"] if r in amendments}
        notes = synthesis.apply_amendments(findings, ordered)
        reviewed = {f["path"] for f in state["files"]}
        for f in findings:
            if f["status"] == "kept" and f["file"] not in reviewed:
                f["status"] = "dropped"
                f["drop_reason"] = "names a file that is not part of this change"
        state.update(findings=findings, amendments=ordered, reflection=reflection,
                     amendment_notes=notes)
        return StageResult(state=state, next_stage="verify", events=events)

    # --- 4. synthesis --------------------------------------------------------------------------------
    def _synthesize(self, state: dict, client: ModelClient) -> StageResult:
        opts = state["options"]
        findings = state["findings"]
        synthesis.merge_duplicates(findings)
        fold.fold_style_into_security(findings)  # a style fix that keeps an injection
        code_at = code_lookup(state["files"])
        synthesis.drop_weak(findings, float(opts["min_confidence"]), code_at)
        fingerprint.stamp(findings, code_at)
        # (issue 15) memories, rejected fingerprints and earlier rounds apply here, in place
        memories.apply(findings, opts.get("memories"))
        state["amendment_notes"] = [*(state.get("amendment_notes") or []),
                                    *rounds.apply(findings, state, code_at, client)]
        cluster(findings)  # the same problem in many places becomes one finding (quality/)
        kept = synthesis.ordered([f for f in findings if f["status"] == "kept"])
        state["coverage"] = true_coverage(state)
        left = coverage.incomplete_text(coverage.unexamined(state["coverage"]))
        rule = synthesis.rule_verdict(kept, incomplete=bool(left))  # told to the synthesizer
        notes = [*(state.get("check_notes") or []), *(state.get("amendment_notes") or [])]
        model_verdict, summary = "", ""
        coverage_notes = [f"{c['path']}: {c['reason']}" for c in state["coverage"]][:50]
        try:
            ran = [a["name"] for a in analyze.ran(state.get("analysis") or {})]
            reply = client.complete("synthesizer", prompts.synthesis_messages(
                state["label"], kept, rule, state["reviewers"], coverage_notes, ran),
                schema=SynthesisAnswer, key="synthesis")
            answer: SynthesisAnswer = reply.data
            notes += synthesis.apply_model_duplicates(findings, [g.model_dump()
                                                                 for g in answer.duplicates])
            model_verdict = answer.verdict
            summary = secret_keys.mask(answer.summary.strip())
            synth_error = ""
        except (RunStopped, StageAbandoned):
            raise
        except Exception as exc:  # degrade: the rules still give a verdict
            synth_error = str(exc)
            synth_note = (f"The synthesizer failed ({exc}); the verdict follows the rules and "
                          "the summary is generated.")
            notes.append(synth_note)
        kept = synthesis.ordered([f for f in findings if f["status"] == "kept"])
        dropped = [f for f in findings if f["status"] == "dropped"]
        missing = coverage.unfinished(state["reviewers"])
        if missing and synthesis.rule_verdict(kept) == "approve":
            notes.append(f"Incomplete review: {', '.join(missing)} did not finish, so the "
                         "verdict cannot be approve.")
        if left:
            # Nobody looked at part of the change: approving it would claim otherwise.
            notes.append(f"Incomplete review: {left}. The verdict cannot be approve.")
        rule = synthesis.rule_verdict(kept, incomplete=bool(missing or left))
        verdict = synthesis.combine_verdicts(rule, model_verdict or None)
        if not summary:
            summary = fallback_summary(kept, verdict, state["reviewers"])
        if left:
            summary = f"Incomplete review: {left}. " + summary
        if missing:
            summary = (f"Incomplete review: the {', '.join(missing)} reviewer"
                       f"{'s' if len(missing) > 1 else ''} did not finish. " + summary)
        notes += fixcheck.prove_review(kept, state)  # issue 16: fixes proven before offered
        state["result"] = {"verdict": verdict, "rule_verdict": rule,
                           "model_verdict": model_verdict, "summary": summary,
                           "synthesizer_error": synth_error, "notes": notes}
        state["findings"] = findings
        counts = synthesis.severity_counts(kept)
        msg = (f"Review ready: {len(kept)} finding(s), {len(dropped)} dropped. Proposed verdict: "
               f"{VERDICT_LABELS[verdict]}.")
        events = [Event("review_synthesized", msg, {"verdict": verdict, "counts": counts})]
        if synth_error:
            events.insert(0, Event("synthesizer_failed", synth_note))
        record = ReviewSynthesized(kept=kept, dropped=dropped, verdict=verdict, rule_verdict=rule,
                                   model_verdict=model_verdict, summary=summary, notes=notes,
                                   coverage=state["coverage"])
        return StageResult(state=state, next_stage="close", records=[record], events=events,
                           gate=Gate(TRIAGE_GATE, {"verdict": verdict}))

    # --- the person's verdict -----------------------------------------------------------------------
    def decide(self, gate: str, state: dict, decision: Decision) -> StageResult:
        if gate != TRIAGE_GATE:
            raise InvalidDecision(f"This review is not waiting at {gate!r}.")
        proposed = state["result"]["verdict"]
        if decision.action == "accept":
            verdict, reason = proposed, decision.feedback.strip()
        elif decision.action == "override":
            verdict = (decision.edits or {}).get("verdict")
            reason = decision.feedback.strip()
            if verdict not in VERDICTS:
                raise InvalidDecision("Choose the verdict you want instead.")
            if verdict == proposed:
                raise InvalidDecision("That is the proposed verdict already: accept it instead.")
            if not reason:
                raise InvalidDecision("Say why you override the verdict; the reason is kept "
                                      "with the review.")
        else:
            raise InvalidDecision("Accept the verdict or override it.")
        state = dict(state)
        state["decision"] = {"action": decision.action, "verdict": verdict, "reason": reason,
                             "author": decision.author}
        what = ("accepted the verdict" if decision.action == "accept" else
                f"overrode the verdict to {VERDICT_LABELS[verdict]}: {reason}")
        return StageResult(state=state, next_stage="close",
                           records=[VerdictDecided(decision.action, verdict, reason,
                                                   decision.author)],
                           events=[Event("verdict_decided", f"{decision.author} {what}.",
                                         {"verdict": verdict})])

    # --- forks (issue 33): forks.py ----------------------------------------------------------
    def fork_refusal(self, stage: str, gate: str, state: dict) -> str | None:
        return forks.refusal(stage, gate)

    def fork_edit(self, stage: str, gate: str, state: dict) -> ForkEdit | None:
        return forks.edit(stage, gate, state)

    def replay_refusal(self, state: dict) -> str | None:
        return forks.REPLAY_REFUSAL

    def decided_on(self, gate: str, state: dict) -> None:
        # The verdict rests on the triage of each finding, rows outside the state that a fork
        # starts afresh: a fork's triage is always its person's, never reused.
        return None

    def _close(self, state: dict, client: ModelClient) -> StageResult:
        d = state["decision"]
        answer = (f"**Verdict: {VERDICT_LABELS[d['verdict']]}** (decided by {d['author']})\n\n"
                  f"{state['result']['summary']}")
        return StageResult(state=state, outcome="completed", answer=answer)
