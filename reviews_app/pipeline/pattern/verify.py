"""The quality stage after reflection (seed 003): every kept finding is checked against the
code by the verifier (safeguard: keep, correct or discard with a reason), given a severity by
the written rubric (``quality/rubric.py``) and a kind (``schema.KINDS``).

One verifier call per batch of files, all batches concurrently (like the reviewers), so the
stage adds one model latency to the review. A call that fails or times out keeps its
findings unchanged and says so: the safeguard never drops a finding it could not check.
"""

from __future__ import annotations

from agents_app.patterns.base import Event, ModelClient, StageResult
from agents_app.patterns.parallel import run_parallel
from common import secret_keys

from ..quality import apply, prompt
from .helpers import code_lookup


def run(state: dict, client: ModelClient) -> StageResult:
    opts = state["options"]
    findings = state.get("findings") or []
    apply.set_kinds(findings)
    live = [f for f in findings if f["status"] == "kept"]
    known = {f["path"]: prompt.new_lines(f) for f in state["files"]}
    code_at = code_lookup(state["files"])
    parts = prompt.batches(live, state["files"], int(opts["max_prompt_chars"]))
    jobs = {}
    for i, (files, items) in enumerate(parts):
        briefs = [prompt.brief(f, known.get(f["file"]),
                               code_at(f["file"], f.get("line"), f.get("end_line")))
                  for f in items]
        msgs = prompt.messages(state.get("label", ""), files, briefs)
        jobs[f"verify:{i}"] = (lambda m=msgs, k=f"verify:{i}":
                               client.complete("verifier", m, schema=prompt.SafeguardAnswer,
                                               key=k))
    outcomes = run_parallel(jobs, float(opts["reviewer_timeout"]),
                            int(opts["max_parallel_calls"]))
    totals = dict.fromkeys(("kept", "corrected", "discarded", "unanswered", "severity", "kind",
                            "unchecked"), 0)
    events: list[Event] = []
    notes: list[str] = []
    for i, (_, items) in enumerate(parts):
        out = outcomes[f"verify:{i}"]
        if out.error:
            error = secret_keys.mask(str(out.error))[:300]
            apply.unchecked(items, error)
            totals["unchecked"] += len(items)
            text = (f"The safeguard could not check {len(items)} finding(s) "
                    f"({'timed out' if out.timed_out else error}); they are kept unchanged.")
            notes.append(text)
            events.append(Event("verify_failed", text, {"findings": len(items)}))
            continue
        checks = [c.model_dump() for c in out.value.data.checks]
        for k, n in apply.apply_checks(items, checks, known).items():
            totals[k] += n
    totals["severity"] += apply.apply_floors(findings)
    summary = (f"Safeguard: {totals['kept']} kept, {totals['corrected']} corrected, "
               f"{totals['discarded']} discarded"
               + (f", {totals['unchecked'] + totals['unanswered']} unchecked"
                  if totals["unchecked"] + totals["unanswered"] else "")
               + f"; severity changed on {totals['severity']}, kind on {totals['kind']}.")
    events.append(Event("verify_done", summary, {k: v for k, v in totals.items()}))
    state["findings"] = findings
    state["verify"] = {"calls": len(parts), **totals}
    state["amendment_notes"] = [*(state.get("amendment_notes") or []), *notes]
    return StageResult(state=state, next_stage="synthesize", events=events)
