"""Fault: the model provider fails 30% of the time, every kind of failure, for every pattern.

The fake OpenAI-compatible provider (tests/fakeprovider.py) answers like the offline model
over real HTTP and, by a seeded rate, fails a request with a 429 (Retry-After), a 500, a
connection reset, no answer at all (the call times out), malformed JSON or a truncated body.
A real Celery worker runs the runs of every pattern twice: with the gateway retrying
(``QUORUM_LLM_MAX_RETRIES=2``, most faults absorbed) and without retries (every fault
reaches the pattern). Gates are answered like a person (approve the plan, merge, accept the
verdict), except the escalation gate of a change run, which a person decides.

Every run must end in one of:

* completed, with no model call failing for good;
* degraded: completed although some call failed for good, and an event says what degraded
  (a step failed and was replanned, a debate position was silent, a reviewer failed, ...);
* failed with a readable reason: ``Run.error`` non-empty, no traceback, not an internal
  error, naming the role or model that failed (or the subtask, position, reviewer);
* waiting at a gate a person decides (a change run's escalation after its executor's or
  reviewer's model failed), saying why;

never left queued or running. ``--runs`` runs per pattern and setting (default 20).

    .venv/bin/python tests/faults/model_faults.py [--runs 20] [--rate 0.3] [--retries 2 0]

Exit status 0 when every run ends as above, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.faults import common  # noqa: E402

# Events by which a pattern says a failed call degraded its result instead of ending the run.
DEGRADED = {
    "plan_execute": ("step_failed",),
    "plan_execute_review": ("escalated",),
    "reflective": (),
    "debate": ("argument_failed",),
    "team_lead": ("subtask_failed",),
    "rewoo": (),
    "react": (),
    "code_review": ("reviewer_failed", "reflection_failed", "synthesizer_failed",
                    "check_failed", "verify_failed"),
}
# Variants that need no person except at gates answered below.
FAULT_VARIANTS = {p: [v for v in vs if v.name != "gated"] for p, vs in common.VARIANTS.items()}


def fake_routes(pattern: str) -> dict[str, str]:
    from agents_app.patterns import get_pattern
    from tests.fakeprovider import fake_models

    return fake_models(*get_pattern(pattern).roles)


def classify(run_id: int) -> tuple[str, str]:
    """(outcome, problem): outcome is completed, degraded, failed, waiting or stuck; problem is
    empty when the run ended as it should."""
    from agents_app.models import RUNNABLE, Event, ModelCall, Run
    from agents_app.patterns import get_pattern

    run = Run.objects.get(pk=run_id)
    failed_calls = list(ModelCall.objects.filter(run=run).exclude(error="")
                        .values_list("role", flat=True))
    kinds = set(Event.objects.filter(run=run).values_list("kind", flat=True))
    if run.status in RUNNABLE:
        return "stuck", f"left {run.status} at stage {run.stage or '?'}"
    if run.status == "completed":
        if not failed_calls:
            return "completed", ""
        said = kinds & set(DEGRADED[run.pattern])
        if said:
            return "degraded", ""
        return "degraded", (f"silent: {len(failed_calls)} call(s) of "
                            f"{', '.join(sorted(set(failed_calls)))} failed for good, but no "
                            f"event says what degraded (events: {sorted(kinds)})")
    if run.is_waiting:
        why = (run.state or {}).get("escalation", "")
        if run.gate == "escalation" and why:
            return "waiting", ""
        return "waiting", f"waiting at {run.gate} with no reason given"
    error = run.error or ""
    roles = get_pattern(run.pattern).roles
    if run.status == "budget_exceeded":
        return "failed", "" if error else "over budget without a reason"
    if not error.strip():
        return "failed", "failed with an empty error"
    if "Traceback" in error or 'File "' in error:
        return "failed", f"traceback in the error: {error[:200]}"
    if error.startswith("Internal error"):
        return "failed", f"internal error: {error[:300]}"
    names = (*roles, *(run.models_used or {}).values(), "subtask", "position", "reviewer")
    if not any(name in error for name in names):
        return "failed", f"does not name the role or model that failed: {error[:300]}"
    return "failed", ""


def batch(retries: int, args, stack: common.Stack, fake) -> dict:
    from django.db import close_old_connections

    workers = common.Workers(stack.dir, node=f"models{retries}", concurrency=args.concurrency,
                             QUORUM_API_BASE=fake.url, OPENAI_API_KEY="sk-fake-provider-key",
                             QUORUM_LLM_MAX_RETRIES=retries, QUORUM_LLM_TIMEOUT=args.timeout,
                             QUORUM_LLM_RETRY_BASE_DELAY=0)
    ids: dict[int, str] = {}
    decided: list[common.Decided] = []
    seen_before = len(fake.seen)
    try:
        workers.start()
        started = time.monotonic()
        for p in args.patterns:
            variants = FAULT_VARIANTS[p]
            for i in range(args.runs):
                v = variants[i % len(variants)]
                run_id = common.start(v, i, models=fake_routes(p),
                                      repo_name=f"{p}-{retries}-{i}")
                ids[run_id] = p
        deadline = started + args.timeout_all
        while time.monotonic() < deadline:
            common.answer_gates(ids, decided, skip=("escalation",))
            if common.settled(ids, decided, skip=("escalation",)):
                break
            time.sleep(0.2)
        wall = time.monotonic() - started
    finally:
        workers.close()
    close_old_connections()
    faults = Counter(s.fault or "ok" for s in fake.seen[seen_before:])
    out = {}
    for run_id, p in ids.items():
        outcome, problem = classify(run_id)
        row = out.setdefault(p, {"runs": 0, "problems": [], **{k: 0 for k in (
            "completed", "degraded", "failed", "waiting", "stuck")}})
        row["runs"] += 1
        row[outcome] += 1
        if problem:
            row["problems"].append((run_id, outcome, problem))
    return {"rows": out, "wall": wall, "faults": faults}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per pattern and setting")
    parser.add_argument("--patterns", nargs="+", default=list(common.PATTERN_NAMES),
                        choices=common.PATTERN_NAMES)
    parser.add_argument("--rate", type=float, default=0.3, help="fault rate, all kinds alike")
    parser.add_argument("--retries", type=int, nargs="+", default=[2, 0])
    parser.add_argument("--latency", type=float, default=0.02, help="fake provider s/call")
    parser.add_argument("--timeout", type=float, default=1.0, help="QUORUM_LLM_TIMEOUT, s")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=40)
    parser.add_argument("--timeout-all", type=float, default=300.0)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    from tests.fakeprovider import FAULTS, FakeProvider

    total = time.monotonic()
    stack = common.Stack("model-faults", keep=args.keep)
    results = {}
    try:
        fake = FakeProvider(latency=args.latency, seed=args.seed, hang=args.timeout + 2,
                            faults={k: args.rate / len(FAULTS) for k in FAULTS}).start()
        stack.own(fake)
        for retries in args.retries:
            results[retries] = batch(retries, args, stack, fake)
            print(f"  retries={retries}: {results[retries]['wall']:.0f} s", flush=True)
    finally:
        stack.close()

    print(f"\n# Model faults — {time.strftime('%Y-%m-%d %H:%M')}, {common.machine()}")
    print(f"# SQLite (WAL); fake provider over HTTP: {args.rate:.0%} of requests fail, spread over "
          f"{', '.join(FAULTS)}; {args.latency} s/call; QUORUM_LLM_TIMEOUT={args.timeout} s; "
          f"worker threads x{args.concurrency}\n")
    bad = []
    for retries, res in results.items():
        f = res["faults"]
        print(f"retries={retries}: {sum(f.values())} requests, "
              + ", ".join(f"{k} {f.get(k, 0)}" for k in ("ok", *FAULTS)) + f"; {res['wall']:.0f} s\n")
        rows = []
        for p, r in res["rows"].items():
            rows.append([p, retries, r["runs"], r["completed"], r["degraded"], r["failed"],
                         r["waiting"], r["stuck"], len(r["problems"])])
            bad += [(p, retries, *x) for x in r["problems"]]
        print(common.table(["pattern", "retries", "runs", "completed", "degraded",
                            "failed (readable)", "waiting (escalated)", "stuck", "problems"],
                           rows))
        print()
    for p, retries, run_id, outcome, problem in bad[:40]:
        print(f"run {run_id} ({p}, retries={retries}, {outcome}): {problem}")
    runs = sum(r["runs"] for res in results.values() for r in res["rows"].values())
    print(f"\n{'PASS' if not bad else 'FAIL'}: {runs - len(bad)} of {runs} runs ended completed, "
          f"degraded and saying so, failed with a readable reason, or waiting at their gate; "
          f"{time.monotonic() - total:.0f} s in all.")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
