"""Scoring a code review against cases with expected findings (the review-quality benchmark).

Plain functions, no Django: ``bench_review_quality.py`` runs the reviews and prints what these
compute, and ``tests/test_review_quality_scoring.py`` checks them on hand-made inputs.

A case is a folder of ``tests/data/review_cases/`` with ``change.diff`` and ``expected.json``
(its README describes the fields). The rules:

* **Counted findings**: the review's kept findings of severity critical, high, medium or
  low. ``info`` findings are notes, not claims that something is wrong, and are left out.
  A finding with several ``locations`` (a cluster) counts once per distinct location.
* **Match**: a reported finding matches an expected one when it names the same file and its
  lines (``line`` to ``end_line``) come within ``TOLERANCE`` (2) lines of the expected line
  or range. Matching is one to one (a maximum matching, closest pairs preferred): each
  expected finding is matched at most once, and each reported one too, so a second report
  of the same problem is a false positive. A finding without a line matches nothing.
* **Counts**: matched = true positive (TP); counted finding left unmatched = false positive
  (FP); expected finding left unmatched = false negative (FN). Severity is not part of the
  match: ``severity_ok`` counts the matches whose severity is at least the expected
  ``severity_at_least``.
* **Undefined ratios are "n/a"**: precision needs TP + FP > 0 and recall TP + FN > 0; with
  no expected and no reported findings (a clean case reviewed cleanly) both are n/a, not
  1.0, and F1 / F0.5 are n/a whenever precision or recall is. F scores are 0 when precision
  and recall are both 0.
* **Per class** (issue 36, ``by_class``): each expected finding has a ``kind`` and so may a
  documented negative. Per kind, TP and FN are the expected findings of that kind found and
  missed; a reported item left unmatched counts as a false positive of the kind of the
  negative it sits on, else of the kind its rule names (``kind_of_finding``); precision,
  recall, F1 and F0.5 follow. The OWASP Benchmark score is TPR − FPR per kind: TPR is the
  recall, FPR the share of that kind's negatives that were reported (FP on a negative
  over the negatives of that kind), n/a without negatives of that kind.
* **Verdict**: a case with ``verdict_not`` is right when the proposed verdict differs from it;
  a ``clean`` case is right when the verdict is approve; otherwise it has no expectation.
* **Stages**: a dropped finding is attributed to the stage that discarded it: the last
  ``quality`` entry with action ``discard``, else (no quality record) its ``drop_reason``
  text (``stage_from_reason``). Per stage: *right* removals match no expected finding,
  *wrong* removals would have matched an expected finding that no kept finding matched, and
  *redundant* ones match an expected finding already found; ``changed`` counts ``correct``
  actions. ``without`` is the score had that stage kept what it dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from reviews_app.calibration.scoring import one_to_one

TOLERANCE = 2
COUNTED = ("critical", "high", "medium", "low")
SEVERITY_RANK = {s: i for i, s in enumerate(("critical", "high", "medium", "low", "info"))}
VERDICTS = ("approve", "needs_discussion", "request_changes")


class CaseError(ValueError):
    """A case folder that cannot be used; the message names it and says why."""


@dataclass
class Case:
    name: str
    language: str
    description: str
    diff_text: str
    expected: list[dict]
    verdict_not: str | None = None
    clean: bool = False
    negatives: list[dict] = field(default_factory=list)


# --- loading ------------------------------------------------------------------------------
def _span_of_expected(item: dict, where: str) -> tuple[int, int]:
    if "lines" in item:
        lines = item["lines"]
        if (not isinstance(lines, list) or len(lines) != 2
                or not all(isinstance(n, int) and n > 0 for n in lines) or lines[0] > lines[1]):
            raise CaseError(f"{where}: 'lines' must be [first, last], positive, in order.")
        return lines[0], lines[1]
    line = item.get("line")
    if not isinstance(line, int) or isinstance(line, bool) or line <= 0:
        raise CaseError(f"{where}: needs a positive 'line' or 'lines': [a, b].")
    return line, line


def load_case(folder: Path) -> Case:
    """One case folder, checked. Raises CaseError."""
    name = folder.name
    try:
        meta = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
        diff = (folder / "change.diff").read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise CaseError(f"case {name}: missing {Path(exc.filename).name}.") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CaseError(f"case {name}: unreadable ({type(exc).__name__}).") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("language"), str) \
            or not meta["language"].strip():
        raise CaseError(f"case {name}: expected.json needs a 'language'.")
    expected = meta.get("expected", [])
    if not isinstance(expected, list) or not all(isinstance(e, dict) for e in expected):
        raise CaseError(f"case {name}: 'expected' must be a list of objects.")
    out = []
    for i, e in enumerate(expected):
        where = f"case {name}, expected[{i}]"
        if not isinstance(e.get("file"), str) or not e["file"]:
            raise CaseError(f"{where}: needs a 'file'.")
        sev = e.get("severity_at_least", "low")
        if sev not in SEVERITY_RANK:
            raise CaseError(f"{where}: unknown severity_at_least {sev!r}.")
        start, end = _span_of_expected(e, where)
        out.append({**e, "start": start, "end": end, "severity_at_least": sev,
                    "kind": str(e.get("kind") or "unspecified")})
    verdict_not = meta.get("verdict_not")
    if verdict_not is not None and verdict_not not in VERDICTS:
        raise CaseError(f"case {name}: unknown verdict_not {verdict_not!r}.")
    clean = bool(meta.get("clean", False))
    if clean and out:
        raise CaseError(f"case {name}: a clean case cannot have expected findings.")
    negatives = []
    for i, n in enumerate(meta.get("negatives") or []):
        start, end = _span_of_expected(n, f"case {name}, negatives[{i}]")
        negatives.append({**n, "start": start, "end": end})
    return Case(name=name, language=meta["language"].strip().lower(),
                description=str(meta.get("description", "")), diff_text=diff, expected=out,
                verdict_not=verdict_not, clean=clean, negatives=negatives)


def load_cases(root: Path, language: str | None = None) -> list[Case]:
    """Every case folder under ``root`` (sorted by name), optionally of one language."""
    if not root.is_dir():
        raise CaseError(f"{root} is not a folder.")
    folders = sorted(p for p in root.iterdir()
                     if p.is_dir() and (p / "expected.json").exists())
    if not folders:
        raise CaseError(f"{root} has no case folders (each needs expected.json and "
                        "change.diff).")
    cases = [load_case(p) for p in folders]
    if language is not None:
        cases = [c for c in cases if c.language == language.lower()]
    return cases


# --- matching -----------------------------------------------------------------------------
def reported_items(findings: list[dict]) -> list[dict]:
    """The counted findings as one item per location: {file, start, end, severity, finding}.
    Findings not kept, of severity info, or unknown are left out; start is None when the
    finding names no line."""
    items = []
    for f in findings:
        if f.get("status", "kept") != "kept" or f.get("severity") not in COUNTED:
            continue
        items += _locations(f)
    return items


def _locations(f: dict) -> list[dict]:
    places = [f] + [loc for loc in (f.get("locations") or []) if isinstance(loc, dict)]
    seen, out = set(), []
    for p in places:
        start = p.get("line") if isinstance(p.get("line"), int) and p.get("line") > 0 else None
        end = p.get("end_line") if isinstance(p.get("end_line"), int) else None
        end = max(end or start or 0, start or 0) or None
        key = (p.get("file") or f.get("file"), start, end)
        if key in seen:
            continue
        seen.add(key)
        out.append({"file": key[0], "start": start, "end": end,
                    "severity": f.get("severity"), "finding": f})
    return out


def distance(item: dict, expected: dict, tolerance: int = TOLERANCE) -> int | None:
    """Lines between a reported item and an expected finding, or None when they do not match
    (another file, no line, or more than ``tolerance`` lines apart). 0 means overlapping."""
    if item.get("file") != expected.get("file") or item.get("start") is None:
        return None
    gap = max(expected["start"] - item["end"], item["start"] - expected["end"], 0)
    return gap if gap <= tolerance else None


def match(expected: list[dict], items: list[dict],
          tolerance: int = TOLERANCE) -> list[tuple[int, int]]:
    """A maximum one-to-one matching of expected findings to reported items, as
    (expected index, item index) pairs; among candidates the closest is tried first."""
    options = []
    for ei, e in enumerate(expected):
        near = [(d, ii) for ii, it in enumerate(items)
                if (d := distance(it, e, tolerance)) is not None]
        options.append([ii for _, ii in sorted(near)])
    # The expected findings with the closest candidate go first, so that when two expected
    # findings compete for one report the nearer one keeps it.
    order = sorted((ei for ei in range(len(expected)) if options[ei]),
                   key=lambda ei: (distance(items[options[ei][0]], expected[ei], tolerance), ei))
    owner = one_to_one(options, order)  # item index -> expected index
    return sorted((ei, ii) for ii, ei in owner.items())


# --- scores -------------------------------------------------------------------------------
def ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def f_beta(precision: float | None, recall: float | None, beta: float) -> float | None:
    if precision is None or recall is None:
        return None
    if precision == 0 and recall == 0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * precision * recall / (b2 * precision + recall)


def metrics(tp: int, fp: int, fn: int) -> dict:
    p, r = ratio(tp, tp + fp), ratio(tp, tp + fn)
    return {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r,
            "f1": f_beta(p, r, 1.0), "f05": f_beta(p, r, 0.5)}


def verdict_ok(case: Case, verdict: str | None) -> bool | None:
    """Whether the proposed verdict is what the case asks for (None: no expectation)."""
    if case.verdict_not is not None:
        return verdict is not None and verdict != case.verdict_not
    if case.clean:
        return verdict == "approve"
    return None


def score_case(case: Case, findings: list[dict], verdict: str | None) -> dict:
    """TP/FP/FN of one reviewed case, with the matches and what else is worth printing."""
    items = reported_items(findings)
    pairs = match(case.expected, items)
    matched_items = {ii for _, ii in pairs}
    severity_ok = sum(1 for ei, ii in pairs if SEVERITY_RANK[items[ii]["severity"]]
                      <= SEVERITY_RANK[case.expected[ei]["severity_at_least"]])
    on_negatives = sum(1 for ii, it in enumerate(items) if ii not in matched_items
                       and any(distance(it, n, 0) is not None for n in case.negatives))
    neg_hits = [{"kind": str(n.get("kind") or "unspecified"),
                 "flagged": any(ii not in matched_items and distance(it, n, 0) is not None
                                for ii, it in enumerate(items))} for n in case.negatives]
    unmatched_kinds = [_kind_on_negative(it, case.negatives) or kind_of_finding(it["finding"])
                       for ii, it in enumerate(items) if ii not in matched_items]
    return {"case": case.name, "language": case.language, "tp": len(pairs),
            "negative_hits": neg_hits, "fp_kinds": unmatched_kinds,
            "fp": len(items) - len(pairs), "fn": len(case.expected) - len(pairs),
            "severity_ok": severity_ok, "on_negatives": on_negatives,
            "blocking": sum(1 for it in items if SEVERITY_RANK[it["severity"]] <= 2),
            "verdict": verdict, "verdict_ok": verdict_ok(case, verdict),
            "expects": ("not_approve" if case.verdict_not == "approve" else
                        "approve" if case.clean and case.verdict_not is None else None),
            "missed": [{k: case.expected[ei][k] for k in ("file", "start", "kind")}
                       for ei in range(len(case.expected)) if ei not in {e for e, _ in pairs}],
            "found_kinds": sorted(case.expected[ei]["kind"] for ei, _ in pairs)}


def summarise(scores: list[dict]) -> dict:
    """Totals and metrics of a group of case scores, with verdict accuracy."""
    tp, fp, fn = (sum(s[k] for s in scores) for k in ("tp", "fp", "fn"))
    judged = [s["verdict_ok"] for s in scores if s["verdict_ok"] is not None]
    flagged = [s["verdict_ok"] for s in scores if s.get("expects") == "not_approve"]
    clean = [s["verdict_ok"] for s in scores if s.get("expects") == "approve"]
    return {**metrics(tp, fp, fn), "cases": len(scores),
            "flagged_not_approved": sum(flagged), "flagged": len(flagged),
            "clean_approved": sum(clean), "clean": len(clean),
            "severity_ok": sum(s["severity_ok"] for s in scores),
            "on_negatives": sum(s["on_negatives"] for s in scores),
            "verdicts_right": sum(judged), "verdicts_judged": len(judged),
            "verdict_accuracy": ratio(sum(judged), len(judged))}


def by_kind(scores: list[dict]) -> dict[str, tuple[int, int]]:
    """Expected findings found and expected, per kind, over the given case scores."""
    out: dict[str, list[int]] = {}
    for s in scores:
        for kind in s["found_kinds"]:
            out.setdefault(kind, [0, 0])[0] += 1
        for kind in s["found_kinds"] + [m["kind"] for m in s["missed"]]:
            out.setdefault(kind, [0, 0])[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}


def by_language(scores: list[dict]) -> dict[str, dict]:
    langs = sorted({s["language"] for s in scores})
    return {lang: summarise([s for s in scores if s["language"] == lang]) for lang in langs}


# --- per class (issue 36) -------------------------------------------------------------------
# A reported finding's kind, from its analyzer rules (or its title, "<rule>: ..." offline):
# the first pattern that matches names it. The kinds are the corpus's (tests/data/review_cases).
_KIND_OF_RULE = (
    # Infrastructure, workflow and documentation rules (issue 36) first: "key-duplicates"
    # is not a key, "template-injection" is not code injection in a program.
    (re.compile(r"(?i)key-duplicates|sql-unbounded-write"), "bug"),
    (re.compile(r"(?i)misspelling|codespell"), "spelling"),
    (re.compile(r"(?i)tf-public-bucket"), "public_bucket"),
    (re.compile(r"(?i)tf-open-admin-port"), "open_port"),
    (re.compile(r"(?i)tf-public-database"), "public_database"),
    (re.compile(r"(?i)k8s-host-path"), "host_path"),
    (re.compile(r"(?i)curl-pipe-shell"), "insecure_download"),
    (re.compile(r"(?i)tf-unencrypted-storage"), "unencrypted_storage"),
    (re.compile(r"(?i)tf-iam-wildcard"), "wildcard_iam"),
    (re.compile(r"(?i)k8s-privileged"), "privileged"),
    (re.compile(r"(?i)k8s-host-namespace"), "host_namespace"),
    (re.compile(r"(?i)k8s-no-resource-limits"), "no_limits"),
    (re.compile(r"(?i)k8s-latest-image|unpinned-uses|unpinned-images|DL3007"),
     "unpinned_dependency"),
    (re.compile(r"(?i)template-injection"), "script_injection"),
    (re.compile(r"(?i)gha-pr-target-head-checkout"), "untrusted_checkout"),
    (re.compile(r"(?i)dangerous-triggers"), "dangerous_trigger"),
    (re.compile(r"(?i)excessive-permissions"), "broad_token"),
    (re.compile(r"(?i)sql-grant-to-public"), "broad_grant"),
    (re.compile(r"(?i)xxe|\bB3(1[3-9]|20)\b|\bB4(0[5-9]|1[0-1])\b"), "xxe"),
    (re.compile(r"(?i)ldap"), "ldap_injection"),
    (re.compile(r"(?i)xpath"), "xpath_injection"),
    (re.compile(r"(?i)path-traversal|\bB108\b"), "path_traversal"),
    (re.compile(r"(?i)ssrf|\bB310\b"), "ssrf"),
    (re.compile(r"(?i)redirect"), "open_redirect"),
    (re.compile(r"(?i)trust-boundary"), "trust_boundary"),
    (re.compile(r"(?i)cookie"), "insecure_cookie"),
    (re.compile(r"(?i)sql|\bB608\b|\bS608\b"), "sql_injection"),
    (re.compile(r"(?i)command-injection|shell-c|\bB60[2-7]\b|\bS60[2-7]\b|SC2086"),
     "command_injection"),
    (re.compile(r"(?i)code-injection"), "code_injection"),
    (re.compile(r"(?i)eval|\bB307\b|\bS307\b"), "eval"),
    (re.compile(r"(?i)xss|html-injection|\bB70[1-3]\b"), "xss"),
    (re.compile(r"(?i)deserializ|pickle|yaml-load|\bB30[1-2]\b|\bB506\b"), "deserialization"),
    (re.compile(r"(?i)weak-random|\bB311\b|\bS311\b"), "weak_random"),
    (re.compile(r"(?i)weak-crypto|\bB30[3-5]\b|\bB324\b|\bS324\b"), "weak_crypto"),
    (re.compile(r"(?i)tls|ssl|curl-k|\bB501\b|\bS501\b"), "tls_disabled"),
    (re.compile(r"(?i)secret|key|token|password"), "hardcoded_secret"),
)


def kind_of_finding(finding: dict) -> str:
    """The corpus kind a reported finding's rule names, or ``other``."""
    rules = [str(r) for r in finding.get("rules") or [] if r]
    title = str(finding.get("title") or "").split(":", 1)[0]
    text = " ".join(rules + [title]).lower()
    for pattern, kind in _KIND_OF_RULE:
        if pattern.search(text):
            return kind
    return "other"


def _kind_on_negative(item: dict, negatives: list[dict]) -> str | None:
    for n in negatives:
        if n.get("kind") and distance(item, n, 0) is not None:
            return str(n["kind"])
    return None


def by_class(scores: list[dict]) -> dict[str, dict]:
    """Per kind: TP/FP/FN, precision, recall, F1, F0.5, and the OWASP Benchmark score
    (TPR − FPR over that kind's documented negatives; n/a without any)."""
    rows: dict[str, dict] = {}

    def row(kind: str) -> dict:
        return rows.setdefault(kind, {"tp": 0, "fp": 0, "fn": 0, "neg": 0, "neg_flagged": 0})

    for s in scores:
        for kind in s["found_kinds"]:
            row(kind)["tp"] += 1
        for m in s["missed"]:
            row(m["kind"])["fn"] += 1
        for kind in s.get("fp_kinds", []):
            row(kind)["fp"] += 1
        for n in s.get("negative_hits", []):
            r = row(n["kind"])
            r["neg"] += 1
            r["neg_flagged"] += int(n["flagged"])
    out = {}
    for kind in sorted(rows):
        r = rows[kind]
        m = metrics(r["tp"], r["fp"], r["fn"])
        tpr = m["recall"]
        fpr = ratio(r["neg_flagged"], r["neg"])
        out[kind] = {**m, "negatives": r["neg"], "negatives_flagged": r["neg_flagged"],
                     "tpr": tpr, "fpr": fpr,
                     "owasp": None if tpr is None or fpr is None else tpr - fpr}
    return out


# --- stages -------------------------------------------------------------------------------
_REASONS = (
    (re.compile(r"^names a file that is not part"), "file check"),
    (re.compile(r"^retracted by "), "reflection"),
    (re.compile(r"^duplicate of "), "duplicates"),
    (re.compile(r"^below the confidence threshold"), "confidence"),
    (re.compile(r"^no suggestion"), "empty suggestion"),
    (re.compile(r"^the suggestion is identical"), "no-op suggestion"),
    (re.compile(r"^memory #"), "memories"),
    (re.compile(r"^(rejected by a person|resolved in )"), "earlier rounds"),
)
_PREFIX = re.compile(r"^([A-Za-z][\w -]{0,30}?)\s*[:(\u2014]")


def stage_from_reason(reason: str) -> str:
    """The stage a drop reason names: the known reasons of the pipeline, else the text before
    its first colon (``safeguard: …`` → ``safeguard``), else ``other``."""
    text = (reason or "").strip()
    for pattern, stage in _REASONS:
        if pattern.search(text):
            return stage
    m = _PREFIX.match(text)
    return m.group(1).strip().lower() if m else "other"


def _quality(finding: dict) -> list[dict]:
    q = finding.get("quality")
    return [a for a in q if isinstance(a, dict)] if isinstance(q, list) else []


def removed_by(finding: dict) -> str | None:
    """The stage that dropped a finding, or None when it is kept."""
    if finding.get("status", "kept") == "kept":
        return None
    discards = [a for a in _quality(finding) if a.get("action") == "discard"]
    if discards:
        return str(discards[-1].get("stage") or "unnamed stage")
    return stage_from_reason(str(finding.get("drop_reason") or ""))


def stage_effects(case: Case, findings: list[dict]) -> dict[str, dict]:
    """Per stage, for one case: removals (right / wrong / redundant), corrections, and the
    TP/FP/FN had the stage kept what it dropped."""
    kept_items = reported_items(findings)
    found = {ei for ei, _ in match(case.expected, kept_items)}
    missed = [case.expected[i] for i in range(len(case.expected)) if i not in found]
    stages: dict[str, list[dict]] = {}
    changed: dict[str, int] = {}
    for f in findings:
        for a in _quality(f):
            if a.get("action") == "correct":
                name = str(a.get("stage") or "unnamed stage")
                changed[name] = changed.get(name, 0) + 1
        stage = removed_by(f)
        if stage is not None and f.get("severity") in COUNTED:
            stages.setdefault(stage, []).append(f)
    out = {}
    for stage in sorted(set(stages) | set(changed)):
        dropped = [{**f, "status": "kept"} for f in stages.get(stage, [])]
        items = reported_items(dropped)
        wrong = match(missed, items)
        taken = {ii for _, ii in wrong}
        redundant = sum(1 for ii, it in enumerate(items) if ii not in taken and any(
            distance(it, e) is not None for e in case.expected))
        again = score_case(case, findings + dropped, None)
        out[stage] = {"removed": len(items), "wrong": len(wrong), "redundant": redundant,
                      "right": len(items) - len(wrong) - redundant,
                      "changed": changed.get(stage, 0),
                      "without": {k: again[k] for k in ("tp", "fp", "fn")}}
    return out


def sum_stages(per_case: list[dict[str, dict]], scores: list[dict]) -> dict[str, dict]:
    """Stage effects over all cases; ``without`` becomes metrics over all cases (a case the
    stage did not touch counts with its own TP/FP/FN)."""
    names = sorted({s for effects in per_case for s in effects})
    out = {}
    for name in names:
        total = {"removed": 0, "wrong": 0, "redundant": 0, "right": 0, "changed": 0}
        tp = fp = fn = 0
        for effects, score in zip(per_case, scores, strict=True):
            e = effects.get(name)
            for k in total:
                total[k] += e[k] if e else 0
            base = e["without"] if e else score
            tp, fp, fn = tp + base["tp"], fp + base["fp"], fn + base["fn"]
        out[name] = {**total, "without": metrics(tp, fp, fn)}
    return out


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
