"""Review quality: the code review run on the cases in tests/data/review_cases/ (changes with
the findings a reviewer should make, clean changes, tricky negatives), scored per language
and per stage.

Each case's diff goes through the real pipeline in this process, as ``manage.py review``
does: ``services.prepare`` and ``services.start_review`` on a temporary SQLite database
(DEBUG=false), then the engine's stages until the triage gate. The proposed verdict and the
run's findings (kept and dropped) are scored by ``review_quality`` (its docstring has the
rules: ±2 lines, one-to-one matches, info findings not counted, n/a for undefined ratios).

Offline, every role uses the built-in offline model (analyzer-based review). With ``--model``
(``NAME`` for every role, or ``ROLE=NAME``, repeatable), or when the settings already give
a provider model (a provider key such as OPENAI_API_KEY / ANTHROPIC_API_KEY, or
QUORUM_DEFAULT_MODEL / QUORUM_MODEL_<ROLE>), the cases are reviewed again with those models
and both results are printed.

    .venv/bin/python tests/benchmarks/bench_review_quality.py [--cases DIR] [--language X]
        [--json OUT] [--model NAME | --model ROLE=NAME ...] [--offline-only] [--details]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.benchmarks import review_quality as rq  # noqa: E402

DEFAULT_CASES = ROOT / "tests" / "data" / "review_cases"
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """What the benchmark was given cannot be used; one line says why."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=str(DEFAULT_CASES), metavar="DIR",
                    help="Folder of case folders (default: tests/data/review_cases).")
    ap.add_argument("--language", default=None, metavar="X",
                    help="Only the cases of this language (e.g. python, typescript, shell).")
    ap.add_argument("--json", default=None, metavar="OUT", help="Also write the results here.")
    ap.add_argument("--model", action="append", default=[], metavar="NAME|ROLE=NAME",
                    help="Review again with this model (every role) or a role's model.")
    ap.add_argument("--offline-only", action="store_true",
                    help="Only the offline review, even when a provider model is configured.")
    ap.add_argument("--details", action="store_true",
                    help="Also list the expected findings each case missed.")

    def error(message):
        ap.exit(EXIT_BAD_INPUT, f"{ap.prog}: error: {message} (see --help)\n")

    ap.error = error
    return ap


def _oneline(text) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in str(text))[:300]


def check_args(args) -> tuple[list[rq.Case], Path | None]:
    """The cases to run and the JSON path, or BadInput."""
    root = Path(args.cases)
    try:
        every = rq.load_cases(root)
    except rq.CaseError as exc:
        raise BadInput(_oneline(exc)) from None
    cases = every
    if args.language is not None:
        known = sorted({c.language for c in every})
        lang = args.language.strip().lower()
        if lang not in known:
            raise BadInput(f"--language {_oneline(args.language)!r}: the cases have "
                           f"{', '.join(known)}.")
        cases = [c for c in every if c.language == lang]
    out = None
    if args.json is not None:
        out = Path(args.json)
        if not args.json.strip() or out.is_dir():
            raise BadInput(f"--json {_oneline(args.json)!r} must name a file, not a folder.")
        if not out.parent.is_dir():
            raise BadInput(f"--json: the folder {_oneline(out.parent)} does not exist.")
        if not os.access(out.parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
            raise BadInput(f"--json: {_oneline(out)} is not writable.")
    if args.model and args.offline_only:
        raise BadInput("--offline-only and --model contradict each other: give one.")
    for spec in args.model:
        if not spec.strip() or not spec.isprintable() or len(spec) > 200:
            raise BadInput("--model takes NAME or ROLE=NAME (printable, at most 200 "
                           "characters).")
    return cases, out


def model_sets(specs: list[str], offline_only: bool) -> dict[str, dict[str, str]]:
    """Label -> role models: always the offline review, then the model review when asked for
    or configured. Needs Django set up; BadInput for an unknown role or model."""
    from agents_app.llm.gateway import check_model_name, is_offline
    from reviews_app import services

    roles = services.ROLES
    sets = {"offline": {r: "offline/default" for r in roles}}
    if offline_only:
        return sets
    models = services.default_models()
    for spec in specs:
        role, sep, name = spec.partition("=")
        if sep and role.strip() not in roles:
            raise BadInput(f"--model {_oneline(spec)!r}: ROLE is one of {', '.join(roles)}.")
        name = (name if sep else spec).strip()
        if problem := check_model_name(name):
            raise BadInput(f"--model {_oneline(spec)!r}: {_oneline(problem)}")
        models.update({role.strip(): name} if sep else dict.fromkeys(roles, name))
    if specs or not all(is_offline(m) for m in models.values()):
        sets["model"] = models
    return sets


def review_case(owner, case: rq.Case, models: dict[str, str]) -> dict:
    """One case through the real pipeline, up to the triage gate."""
    from agents_app import engine
    from reviews_app import services
    from reviews_app.pipeline import coverage

    start = time.perf_counter()
    try:
        inp = services.from_text(case.diff_text, label=f"bench: {case.name}")
        run = services.start_review(owner, inp, services.prepare(inp), models=models,
                                    enqueue=False)
    except services.InputError as exc:
        return {"error": _oneline(exc), "findings": [], "verdict": None, "tools": {},
                "unexamined": 0, "seconds": time.perf_counter() - start, "cost_usd": 0.0}
    run = engine.run_inline(run.pk)
    state = run.state or {}
    result = state.get("result") or {}
    error = "" if run.status == "awaiting_triage" else _oneline(
        f"the review ended as {run.status}: {run.error or 'no verdict'}")
    return {"error": error, "findings": _all_findings(state),
            "verdict": result.get("verdict"),
            "tools": dict((state.get("analysis") or {}).get("tools") or {}),
            "unexamined": len(coverage.unexamined(state.get("coverage") or [])),
            "seconds": time.perf_counter() - start, "cost_usd": float(run.cost_usd or 0)}


def _all_findings(state: dict) -> list[dict]:
    """The run's findings, kept and dropped; dropped ones a stage keeps in a list of its own
    (``state["dropped"]``) are added when not already there."""
    findings = [f for f in state.get("findings") or [] if isinstance(f, dict)]
    keys = {f.get("key") for f in findings if f.get("key")}
    for f in state.get("dropped") or []:
        if isinstance(f, dict) and (not f.get("key") or f["key"] not in keys):
            findings.append({**f, "status": f.get("status") or "dropped"})
    return findings


def evaluate(cases: list[rq.Case], outcomes: list[dict]) -> dict:
    scores = [rq.score_case(c, o["findings"], o["verdict"]) for c, o in zip(
        cases, outcomes, strict=True)]
    effects = [rq.stage_effects(c, o["findings"]) for c, o in zip(cases, outcomes, strict=True)]
    for s, o in zip(scores, outcomes, strict=True):
        s.update(error=o["error"], unexamined=o["unexamined"], seconds=round(o["seconds"], 2))
    return {"cases": scores, "languages": rq.by_language(scores),
            "overall": rq.summarise(scores), "stages": rq.sum_stages(effects, scores),
            "kinds": rq.by_kind(scores), "classes": rq.by_class(scores),
            "seconds": round(sum(o["seconds"] for o in outcomes), 2),
            "cost_usd": round(sum(o["cost_usd"] for o in outcomes), 4)}


def _row(name: str, m: dict) -> str:
    f = rq.fmt
    def part(right: int, of: int) -> str:
        return f"{right}/{of}" if of else "n/a"

    return (f"| {name} | {m['cases']} | {m['tp']} | {m['fp']} | {m['fn']} | {f(m['precision'])} "
            f"| {f(m['recall'])} | {f(m['f1'])} | {f(m['f05'])} "
            f"| {part(m['verdicts_right'], m['verdicts_judged'])} "
            f"| {part(m['flagged_not_approved'], m['flagged'])} "
            f"| {part(m['clean_approved'], m['clean'])} |")


def print_classes(classes: dict[str, dict]) -> None:
    """Issue 36: per class (the expected findings' kinds), with the OWASP Benchmark score."""
    if not classes:
        return
    f = rq.fmt
    print("\nPer class (kind of the expected finding; FP by the negative it sits on, else by "
          "its rule; OWASP score = TPR − FPR over that kind's documented negatives):")
    print("\n| class | TP | FP | FN | precision | recall | F1 | F0.5 | negatives flagged "
          "| TPR − FPR |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind, m in classes.items():
        negs = f"{m['negatives_flagged']}/{m['negatives']}" if m["negatives"] else "n/a"
        print(f"| {kind} | {m['tp']} | {m['fp']} | {m['fn']} | {f(m['precision'])} "
              f"| {f(m['recall'])} | {f(m['f1'])} | {f(m['f05'])} | {negs} | {f(m['owasp'])} |")


def print_run(label: str, models: dict[str, str], res: dict, details: bool) -> None:
    names = sorted(set(models.values()))
    print(f"\n## {label}: {', '.join(names)} — {len(res['cases'])} cases in "
          f"{res['seconds']:.1f} s" + (f", ${res['cost_usd']:.4f}" if res["cost_usd"] else ""))
    print("\n| language | cases | TP | FP | FN | precision | recall | F1 | F0.5 | verdicts right "
          "| flagged not approved | clean approved |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for lang, m in res["languages"].items():
        print(_row(lang, m))
    print(_row("**all**", res["overall"]))
    o = res["overall"]
    print(f"\nMatched findings with at least the expected severity: {o['severity_ok']} of "
          f"{o['tp']}; counted findings on documented negatives (example keys, "
          f"parameterised queries, ...): {o['on_negatives']}.")
    print("Expected findings found, by kind: " + ", ".join(
        f"{kind} {found}/{total}" for kind, (found, total) in res["kinds"].items()) + ".")
    print_classes(res.get("classes") or {})
    by_coverage = [s["case"] for s in res["cases"] if s["expects"] == "not_approve"
                   and s["verdict_ok"] and not s["blocking"] and s["unexamined"]]
    if by_coverage:
        print(f"Flagged cases not approved only because part of the change was left "
              f"unexamined (no finding of medium or above): {len(by_coverage)} "
              f"({', '.join(by_coverage)}).")
    print("\n| case | TP | FP | FN | verdict | right | unexamined files |")
    print("|---|---:|---:|---:|---|---|---:|")
    for s in res["cases"]:
        right = {True: "yes", False: "**no**", None: "—"}[s["verdict_ok"]]
        verdict = s["verdict"] or f"none ({s['error']})"
        print(f"| {s['case']} | {s['tp']} | {s['fp']} | {s['fn']} | {verdict} | {right} | "
              f"{s['unexamined']} |")
        if details and s["missed"]:
            for m in s["missed"]:
                print(f"|   missed {m['kind']} at {m['file']}:{m['start']} | | | | | | |")
    stages = res["stages"]
    if not stages:
        print("\nStages: no finding was dropped or changed by any stage.")
        return
    print("\nPer stage (what each stage dropped or changed; *without* = the scores had it "
          "kept what it dropped):")
    print("\n| stage | removed | right | wrong | redundant | changed | P without | R without "
          "| F1 without | F0.5 without |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    f = rq.fmt
    for name, st in stages.items():
        w = st["without"]
        print(f"| {name} | {st['removed']} | {st['right']} | {st['wrong']} | {st['redundant']} "
              f"| {st['changed']} | {f(w['precision'])} | {f(w['recall'])} | {f(w['f1'])} "
              f"| {f(w['f05'])} |")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        cases, out = check_args(args)
    except BadInput as exc:
        print(f"bench_review_quality: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from tests.benchmarks.common import setup_django

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="quorum-bench-quality-") as tmp:
        setup_django(Path(tmp), 6391, DEBUG="false", QUORUM_LOG_LEVEL="ERROR",
                     QUORUM_ALLOW_MODEL_REQUESTS=os.environ.get("QUORUM_ALLOW_MODEL_REQUESTS",
                                                                "true"))
        from django.conf import settings

        # Nobody watches these runs live: events stay in the database, no Redis needed.
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
        import reviews_app
        from tests.benchmarks.common import make_user

        try:
            sets = model_sets(args.model, args.offline_only)
        except BadInput as exc:
            print(f"bench_review_quality: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        owner = make_user()
        results, tools = {}, {}
        for label, models in sets.items():
            outcomes = [review_case(owner, c, models) for c in cases]
            for o in outcomes:
                tools.update(o["tools"])
            results[label] = {"models": models, **evaluate(cases, outcomes)}
        debug = settings.DEBUG

    langs = sorted({c.language for c in cases})
    print(f"# Review quality — {started}, {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, Quorum {reviews_app.__version__}, "
          f"DEBUG={str(debug).lower()}")
    print(f"# {len(cases)} cases ({', '.join(langs)}) from {_oneline(args.cases)}; match: same "
          f"file, within ±{rq.TOLERANCE} lines; counted: kept findings of severity low or "
          "above (info left out)")
    print("# analyzers that ran: " + (", ".join(f"{t} {v}" for t, v in sorted(tools.items()))
                                      or "none"))
    for label, res in results.items():
        print_run(label, res["models"], res, args.details)
    if out is not None:
        payload = {"date": started, "machine": {"arch": platform.machine(),
                                                "cores": os.cpu_count(),
                                                "python": platform.python_version()},
                   "quorum": reviews_app.__version__, "debug": debug, "tools": tools,
                   "tolerance": rq.TOLERANCE, "runs": results}
        out.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
