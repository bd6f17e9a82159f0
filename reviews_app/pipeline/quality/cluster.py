"""Clustering repeated findings (seed 003): the same problem in many places, across lines and
files, becomes one finding whose ``locations`` list every place (its own first); the others
are dropped with "Clustered into KEY".

``synthesis.merge_duplicates`` merges findings on the same lines; this goes further, across
lines and files, but only for findings that are plainly the same problem: they rest on the
same analyzer rule, or (neither names a rule the other lacks) they are of the same kind with
the same title once names, quoted code and numbers are taken out. Committed keys are never
clustered: each is a different key to revoke. Each finding is compared
with a cluster's strongest finding only, so similarity does not chain.
"""

from __future__ import annotations

import re

from ..schema import SEVERITY_RANK
from .apply import CLUSTER, note

MAX_LOCATIONS = 200
_QUOTED = re.compile(r"`[^`]*`|\"[^\"]*\"|'[^']*'|\u201c[^\u201d]*\u201d")
_NON_WORD = re.compile(r"[^a-z]+")


def normal_title(title: str) -> str:
    """The title with quoted names and code, numbers and punctuation taken out."""
    return " ".join(_NON_WORD.sub(" ", _QUOTED.sub(" ", str(title or "").lower())).split())


def _rules(f: dict) -> set[str]:
    return {str(r).strip().upper() for r in f.get("rules") or () if str(r).strip()}


def _secret(f: dict) -> bool:
    """A committed key: each one is its own key to revoke, never "the same problem"."""
    return any(str(r).startswith("secret-") for r in f.get("rules") or ())


def same_problem(a: dict, b: dict) -> str:
    if _secret(a) or _secret(b):
        return ""
    ra, rb = _rules(a), _rules(b)
    if ra & rb:
        return f"same rule {sorted(ra & rb)[0]}"
    if ra or rb:
        return ""
    ta = normal_title(a.get("title", ""))
    if ta and a.get("kind") == b.get("kind") and ta == normal_title(b.get("title", "")):
        return f"same {a.get('kind') or 'kind of'} problem, same title"
    return ""


def _strength(f: dict) -> tuple:
    """Strongest first; on a tie the first place in the change leads its cluster."""
    return (SEVERITY_RANK[f["severity"]], -float(f.get("confidence") or 0), f["file"],
            f.get("line") or 0, f["key"])


def _place(f: dict) -> dict:
    return {"file": f["file"], "line": f.get("line"), "end_line": f.get("end_line"),
            "key": f["key"]}


def _spot(loc: dict) -> tuple:
    return loc["file"], loc.get("line"), loc.get("end_line")


def cluster(findings: list[dict]) -> int:
    """Cluster kept findings in place. Returns how many were merged into another."""
    kept = sorted((f for f in findings if f["status"] == "kept"), key=_strength)
    groups: list[tuple[dict, list[dict], list[str]]] = []
    for f in kept:
        for leader, members, reasons in groups:
            why = same_problem(leader, f)
            if why:
                members.append(f)
                reasons.append(why)
                break
        else:
            groups.append((f, [f], []))
    merged = 0
    for leader, members, reasons in groups:
        if len(members) < 2:
            continue
        places = sorted((p for f in members for p in (f.get("locations") or [_place(f)])),
                        key=lambda p: (p["file"], p.get("line") or 0))
        spots = {_spot(p) for p in places}
        if len(spots) < 2:
            continue  # all in one place: a duplicate, not a repeat (merge_duplicates' job)
        seen: set[tuple] = set()
        locations = []
        for p in [_place(leader), *places]:
            if _spot(p) not in seen and len(locations) < MAX_LOCATIONS:
                seen.add(_spot(p))
                locations.append({"file": p["file"], "line": p.get("line"),
                                  "end_line": p.get("end_line"), "key": p.get("key", "")})
        for other, why in zip(members[1:], reasons, strict=True):
            other["status"] = "dropped"
            other["duplicate_of"] = leader["key"]
            other["drop_reason"] = f"Clustered into {leader['key']}"
            note(other, CLUSTER, "merge", f"the same problem as {leader['key']} "
                                          f"({why})")
            for r in other.get("reviewers") or ():
                if r not in leader.setdefault("reviewers", []):
                    leader["reviewers"].append(r)
            leader["rules"] = list(dict.fromkeys([*(leader.get("rules") or []),
                                                  *(other.get("rules") or [])]))
            merged += 1
        before = len(leader.get("locations") or []) or 1
        leader["locations"] = locations
        files = len({p["file"] for p in locations})
        note(leader, CLUSTER, "cluster",
             f"{len(members)} findings of the same problem ({reasons[0]}) in "
             f"{len(locations)} places across {files} file(s)",
             before={"locations": before}, after={"locations": len(locations)})
    return merged
