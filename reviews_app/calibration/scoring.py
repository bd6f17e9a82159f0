"""The calibration scorecard: which reviewer found which known defect, at what cost, and what
it reported on changes that have none. Plain Python (no Django): ``runner`` reads the runs
into :class:`Outcome` objects and this module does the counting.

The rules:

* **What a reviewer reported** is the review's kept findings that it raised, including the
  ones merged into another reviewer's finding as duplicates (the kept finding lists every
  reviewer that raised it). A finding the verifier or the synthesis dropped is not counted:
  the person triaging would never see it. Every severity counts, ``info`` included (a note
  is triaged like any finding). The change-level checks (``cross-file``, ``rules``) are
  the ``checker`` role's.
* **A match**: same file, the finding's lines (or one location of its cluster) overlap
  the defect's lines widened by ``SLACK`` lines each way, and, when the defect has a
  category, the finding's category is that one. Matching is one to one (a maximum
  matching, nearest first): one place of a finding is matched to one defect at most, so a
  finding spanning two defects finds one of them, and a cluster with a location on each
  finds both. A finding without a line matches nothing.
* **In reach**: a reviewer's findings carry its lens as their category (the checker's are
  architecture), so a defect with another category is out of its reach: it is not in that
  reviewer's recall at all (the whole review's row counts every defect). Leave a defect's
  category out and every reviewer is scored on it.
* **Examined**: a defect counts for a reviewer only when that reviewer examined its file:
  a reviewer on a model that reads code and answered for the file; a reviewer on the
  offline model (which restates analyzer results) when an analyzer that reads code ran on
  the file; the checker when its check ran and did not leave the file out for size. A
  reviewer that failed, and every reviewer of a review that failed, examined nothing. A
  defect its reviewers could not see is listed as not examined, never counted as missed.
* **Recall** is found / examined defects in reach, with the Wilson 95% interval;
  **false positives per clean diff** is the reviewer's findings on the clean cases it
  examined, divided by those cases; **other findings on flagged diffs** are its findings
  there that could match no defect (they may be real problems the case does not list, so
  they are shown, not called false).
* **Cost per true finding** is what the role's model calls cost over these runs, divided by
  the defects it found (the whole review's row: the whole runs' cost, the verifier's and the
  synthesizer's included).
* **Found by no other reviewer**: the defects one role found where another role had the
  defect in reach and examined its file, and did not find it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agents_app.experiments.stats import wilson_interval

from .cases import Defect

SLACK = 2
ROLES = ("security", "architecture", "style", "checker")  # the roles that report findings
ROLE_OF_REVIEWER = {"cross-file": "checker", "rules": "checker"}
# The category a role's findings carry (the cross-file and rules checks report
# architecture findings).
LENS = {"security": "security", "architecture": "architecture", "style": "style",
        "checker": "architecture"}
WHOLE = "review"  # the row of the whole review (every reviewer together)
SCORED = ("awaiting_triage", "completed")  # runs whose findings are all written


def role_of(reviewer: str) -> str:
    return ROLE_OF_REVIEWER.get(reviewer, reviewer)


@dataclass(frozen=True)
class Reported:
    """One kept finding, as the scoring reads it: every place it names, its category, and
    the roles that raised it."""

    key: str
    category: str
    roles: tuple[str, ...]
    places: tuple[tuple[str, int, int], ...]  # (file, first, last); none without a line
    file: str = ""

    @classmethod
    def of(cls, f: dict[str, Any]) -> Reported:
        """From a finding's fields (``file``, ``line``, ``end_line``, ``locations``,
        ``category``, ``reviewer``, ``reviewers``, ``key``)."""
        places = []
        for p in [f, *(loc for loc in f.get("locations") or () if isinstance(loc, dict))]:
            line = p.get("line")
            if isinstance(line, int) and line > 0:
                end = p.get("end_line")
                end = end if isinstance(end, int) and end >= line else line
                place = (str(p.get("file") or f.get("file") or ""), line, end)
                if place not in places:
                    places.append(place)
        names = f.get("reviewers") or [f.get("reviewer") or ""]
        roles = tuple(dict.fromkeys(role_of(str(r)) for r in names if r))
        return cls(key=str(f.get("key") or ""), category=str(f.get("category") or ""),
                   roles=roles, places=tuple(places), file=str(f.get("file") or ""))


@dataclass(frozen=True)
class RoleRun:
    """What one role did in one review: its model, the files it examined, its cost."""

    model: str
    examined: frozenset[str]
    cost: float = 0.0


@dataclass
class Outcome:
    """One case's review, read back from its run."""

    case: str
    language: str
    defects: list[Defect]
    run_id: int | None = None
    status: str = ""  # the run's status
    error: str = ""  # why it has no findings to score, if it has none
    findings: list[Reported] = field(default_factory=list)
    roles: dict[str, RoleRun] = field(default_factory=dict)
    cost: float = 0.0
    title: str = ""

    @property
    def clean(self) -> bool:
        return not self.defects

    @property
    def scored(self) -> bool:
        return self.status in SCORED and not self.error


def distance(place: tuple[str, int, int], defect: Defect) -> int:
    """Lines between a place and a defect (0: they overlap); a large number for another
    file."""
    path, first, last = place
    if path != defect.file:
        return 1 << 30
    return max(defect.start - last, first - defect.end, 0)


def compatible(finding: Reported, defect: Defect) -> bool:
    return not defect.category or finding.category == defect.category


def matches(finding: Reported, defect: Defect, slack: int = SLACK) -> bool:
    """Whether the finding could be matched to the defect (the one-to-one matching of
    :func:`match` then gives each place to one defect at most)."""
    return compatible(finding, defect) and any(
        distance(p, defect) <= slack for p in finding.places)


def match(defects: list[Defect], findings: list[Reported],
          slack: int = SLACK) -> dict[int, int]:
    """A maximum one-to-one matching of defects to the findings' places, as defect index ->
    finding index: each place (a finding's lines, or one location of its cluster) counts
    for one defect at most, so a wide finding does not find two defects, while a cluster
    with a location on each does. Among the candidates the nearest is tried first."""
    units = [(fi, place) for fi, f in enumerate(findings) for place in f.places]
    options: list[list[int]] = []
    for d in defects:
        near = sorted((distance(place, d), ui) for ui, (fi, place) in enumerate(units)
                      if compatible(findings[fi], d) and distance(place, d) <= slack)
        options.append([ui for _, ui in near])
    order = sorted((di for di, opts in enumerate(options) if opts),
                   key=lambda di: (distance(units[options[di][0]][1], defects[di]), di))
    return {di: units[ui][0] for ui, di in one_to_one(options, order).items()}


def one_to_one(options: list[list[int]], order: list[int]) -> dict[int, int]:
    """A maximum one-to-one matching by augmenting paths: ``options[i]`` lists item ``i``'s
    candidates, best first, and the items are tried in ``order`` (so that when two compete
    for one candidate, the one tried first keeps it unless the other has no alternative).
    Returns candidate -> item."""
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for c in options[i]:
            if c in seen:
                continue
            seen.add(c)
            if c not in owner or augment(owner[c], seen):
                owner[c] = i
                return True
        return False

    for i in order:
        augment(i, set())
    return owner


def in_reach(role: str, defect: Defect) -> bool:
    """Whether ``role`` can report a finding that matches the defect: its findings carry its
    lens as their category, so a defect of another category is out of its reach."""
    lens = LENS.get(role)
    return not defect.category or lens is None or lens == defect.category


def found_by(outcome: Outcome, slack: int = SLACK) -> list[set[str]]:
    """Per defect of the case, the roles whose own findings are matched to it."""
    out: list[set[str]] = [set() for _ in outcome.defects]
    for role in {r for f in outcome.findings for r in f.roles}:
        mine = [f for f in outcome.findings if role in f.roles]
        for di in match(outcome.defects, mine, slack):
            out[di].add(role)
    return out


def _row(role: str, model: str) -> dict[str, Any]:
    return {"role": role, "model": model, "defects": 0, "found": 0, "not_examined": [],
            "out_of_reach": 0, "clean": 0, "clean_findings": 0, "extra": 0, "findings": 0,
            "cost_usd": 0.0, "unique": [], "by_category": {}}


def _place(outcome: Outcome, d: Defect) -> str:
    return f"{outcome.case}: {d.where}" + (f" ({d.what})" if d.what else "")


def _count(row: dict[str, Any], outcome: Outcome, sees: set[int], examined: bool,
           found: set[int], mine: list[Reported], slack: int) -> None:
    """Add one case to a row: ``found`` the indexes of the defects its findings (``mine``)
    are matched to, ``sees`` those whose file it examined, ``examined`` whether it examined
    any file of the case."""
    for di, d in enumerate(outcome.defects):
        if row["role"] != WHOLE and not in_reach(row["role"], d):
            row["out_of_reach"] += 1
            continue
        if di not in sees:
            row["not_examined"].append(_place(outcome, d))
            continue
        hit = di in found
        row["defects"] += 1
        row["found"] += hit
        cat = row["by_category"].setdefault(d.category or "any", [0, 0])
        cat[0] += hit
        cat[1] += 1
    row["findings"] += len(mine)
    if outcome.clean:
        if examined:
            row["clean"] += 1
            row["clean_findings"] += len(mine)
    else:
        row["extra"] += sum(1 for f in mine
                            if not any(matches(f, d, slack) for d in outcome.defects))


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    found, n = row["found"], row["defects"]
    low, high = wilson_interval(found, n)
    row.update(recall=found / n if n else None, low=low if n else None, high=high if n else None,
               fp_per_clean=row["clean_findings"] / row["clean"] if row["clean"] else None,
               cost_per_find=row["cost_usd"] / found if found else None)
    return row


def scorecard(outcomes: Iterable[Outcome], slack: int = SLACK) -> dict[str, Any]:
    """The figures per role and model, then the whole review's row, and per case what was
    found by whom. Outcomes without findings to score (failed, unfinished) are named, and
    their defects listed as not examined by anyone."""
    outcomes = list(outcomes)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    whole: dict[str, dict[str, Any]] = {}
    cases = []
    for o in outcomes:
        used = {r: rr for r, rr in o.roles.items() if r in ROLES}
        seen = {r: (rr.examined if o.scored else frozenset()) for r, rr in used.items()}
        by = found_by(o, slack) if o.scored else [set() for _ in o.defects]
        for role, rr in used.items():
            row = rows.setdefault((role, rr.model), _row(role, rr.model))
            mine = [f for f in o.findings if role in f.roles]
            sees = {i for i, d in enumerate(o.defects) if d.file in seen[role]}
            _count(row, o, sees, bool(seen[role]), {i for i, h in enumerate(by) if role in h},
                   mine, slack)
            row["cost_usd"] += rr.cost
            for d, h in zip(o.defects, by, strict=True):
                rivals = [r for r in used if r != role and in_reach(r, d)
                          and d.file in seen[r]]
                if h == {role} and rivals:
                    row["unique"].append(_place(o, d))
        label = _models_label({r: rr.model for r, rr in used.items()})
        w = whole.setdefault(label, _row(WHOLE, label))
        found = set(match(o.defects, o.findings, slack)) if o.scored else set()
        sees = {i for i, d in enumerate(o.defects)
                if any(in_reach(r, d) and d.file in x for r, x in seen.items())}
        _count(w, o, sees, any(seen.values()), found, list(o.findings), slack)
        w["cost_usd"] += o.cost
        cases.append(_case(o, by, found, seen, slack))
    order = {r: i for i, r in enumerate(ROLES)}
    ordered = [_finish(rows[k]) for k in sorted(rows, key=lambda k: (order[k[0]], k[1]))]
    unscored = [o for o in outcomes if not o.scored]
    return {
        "slack": slack, "cases": len(outcomes),
        "clean_cases": sum(1 for o in outcomes if o.clean),
        "defects": sum(len(o.defects) for o in outcomes),
        "scored": len(outcomes) - len(unscored),
        "failed": [{"case": o.case, "run": o.run_id, "status": o.status, "error": o.error}
                   for o in unscored if o.error],
        "unfinished": [{"case": o.case, "run": o.run_id, "status": o.status}
                       for o in unscored if not o.error],
        "rows": ordered + [_finish(w) for w in whole.values()],
        "cost_usd": sum(o.cost for o in outcomes),
        "case_results": cases,
    }


def _models_label(models: dict[str, str]) -> str:
    """One model's name when every role used it, else ``role=model`` for each."""
    names = set(models.values())
    if len(names) == 1:
        return names.pop()
    return ", ".join(f"{r}={models[r]}" for r in ROLES if r in models) or "no reviewer"


def _case(o: Outcome, by: list[set[str]], found: set[int], seen: dict[str, frozenset[str]],
          slack: int) -> dict[str, Any]:
    defects = []
    for di, (d, h) in enumerate(zip(o.defects, by, strict=True)):
        reach = [r for r in ROLES if r in seen and in_reach(r, d)]
        blind = [r for r in reach if d.file not in seen[r]]
        defects.append({**d.as_dict(), "where": d.where, "found": di in found,
                        "found_by": [r for r in ROLES if r in h],
                        "not_examined_by": blind, "seen": o.scored and len(blind) < len(reach)})
    unmatched = [f for f in o.findings if not any(matches(f, d, slack) for d in o.defects)]
    return {"case": o.case, "title": o.title, "language": o.language, "run": o.run_id,
            "status": o.status, "error": o.error, "scored": o.scored, "clean": o.clean,
            "defects": defects, "defects_found": len(found), "findings": len(o.findings),
            "unmatched": len(unmatched),
            "cost_usd": o.cost}


# --- precision from the person's triage ----------------------------------------------------
def triage_precision(decisions: Iterable[tuple[list[str], dict[str, str], str]]
                     ) -> list[dict[str, Any]]:
    """Accepted / (accepted + rejected) per role and model, with the Wilson 95% interval,
    from ``(reviewers of the finding, the run's role -> model, decision)``. A finding raised
    by two reviewers counts for both."""
    counts: dict[tuple[str, str], list[int]] = {}
    for reviewers, models, decision in decisions:
        roles = dict.fromkeys(role_of(str(r)) for r in reviewers or () if r)
        for role in roles:
            c = counts.setdefault((role, str((models or {}).get(role) or "unknown")), [0, 0])
            if decision == "accepted":
                c[0] += 1
            elif decision == "rejected":
                c[1] += 1
    order = {r: i for i, r in enumerate(ROLES)}
    out = []
    for (role, model), (acc, rej) in sorted(counts.items(),
                                            key=lambda kv: (order.get(kv[0][0], 9), kv[0])):
        n = acc + rej
        if not n:
            continue
        low, high = wilson_interval(acc, n)
        out.append({"role": role, "model": model, "accepted": acc, "rejected": rej,
                    "precision": acc / n, "low": low, "high": high})
    return out
