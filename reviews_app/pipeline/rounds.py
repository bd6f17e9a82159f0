"""Earlier rounds of a pull request's review, applied at synthesis (after the memories).

Plain Python. Three things, all in place on the findings list of the synthesize stage:

- **Suppressed**: a finding whose fingerprint a person rejected earlier for this repository
  (``options["suppressed"]``) is dropped, naming the review and the reason. The fingerprint
  includes the code, so the same problem on *changed* code is raised again.
- **Carried**: the earlier round's open findings (``options["carried"]``, each with the code
  it pointed at) come back as findings of this round, keeping their keys (this round numbers
  its own findings past them) and with ``carried_from`` "<review run id>:<old key>". While
  its code is untouched a finding also keeps the decision a person made on it (``decision``:
  accepted, by whom, when), so nobody triages it twice. A finding in a file this round did
  not touch is carried as it is. In a touched file:
    * the same fingerprint raised again → "not" implemented: the new finding stays and the
      carried one is merged into it;
    * the code it pointed at unchanged → still open, carried (its lines follow the code);
    * otherwise a deterministic guess — "partially" when part of the old code remains or a
      finding of this round on the same rule (or, without rules, category) sits nearby,
      "implemented" when the old code is gone and nothing reports the problem there.
- **Validated**: the guesses go to the synthesizer role in one call (seed 003's check of
  whether a suggestion was implemented in the new code: implemented / partially / not), whose
  answer overrides the guess; the offline model answers with the guess. Either way the
  finding's history says what was decided and why. "Implemented" findings are dropped as
  "resolved in <sha>: implemented"; the others stay open with their resolution.

``with_rules`` adds the ``.quorum.toml`` rules that apply to a prompt's files.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, Field

from agents_app.patterns.base import ModelClient, RunStopped, StageAbandoned
from common.secret_keys import mask, mask_deep

from . import synthesis

NEAR = 10  # lines: a finding this close on the same rule means the problem is still there
CONTEXT = 3
_SPACE = re.compile(r"\s+")
CHECK_KEY = "validate_implemented"
CHECK_SECTION = "Suggestions to check"
Status = Literal["implemented", "partially", "not"]

VALIDATE_SYSTEM = """You check whether the authors of a pull request acted on earlier review
findings. For each finding you get the code it pointed at before, what was suggested, the
code there now, and a first guess from a mechanical comparison. Answer per finding (by its
key) with "implemented" (the problem is gone: the suggestion or an equivalent fix is in the
new code), "partially" (some of it was done, or the problem remains in part) or "not" (the
problem is still there), and one sentence saying why."""


class CheckItem(BaseModel):
    key: str
    status: Status
    reason: str = ""


class ImplementedCheck(BaseModel):
    """The answer to the check of earlier findings against the new code."""

    items: list[CheckItem] = Field(default_factory=list)


# --- suppressed -------------------------------------------------------------------------------
def suppress(findings: list[dict], suppressed: list[dict] | None) -> int:
    by_fp = {s["fingerprint"]: s for s in suppressed or () if isinstance(s, dict)
             and s.get("fingerprint")}
    n = 0
    for f in findings:
        s = by_fp.get(f.get("fingerprint") or "")
        if s is None or f["status"] != "kept":
            continue
        reason = " ".join(str(s.get("reason") or "").split())[:300]
        f["status"] = "dropped"
        f["drop_reason"] = (f"rejected by a person in review {s.get('review')}"
                            + (f" ({reason})" if reason else ""))
        n += 1
    return n


# --- the code, old and new ----------------------------------------------------------------------
def _norm(code: str) -> list[str]:
    return [ln for ln in (_SPACE.sub(" ", x).strip() for x in code.split("\n")) if ln]


def _known_lines(file: dict) -> dict[int, str]:
    """New-file line number → text, for every line we have (the whole file, or the hunks)."""
    if file.get("content") is not None:
        return dict(enumerate(file["content"].split("\n"), 1))
    return {ln["new"]: ln["text"] for h in file.get("hunks") or () for ln in h.get("lines") or ()
            if ln.get("new") is not None}


def _locate(old: list[str], lines: dict[int, str], near: int) -> int | None:
    """The line where the old code (normalised) starts now, closest to ``near``."""
    norm = {n: _SPACE.sub(" ", t).strip() for n, t in lines.items()}
    if not old or not norm:
        return None
    last = max(norm)
    starts = [n for n, t in norm.items() if t == old[0]]
    for n in sorted(starts, key=lambda n: abs(n - near)):
        got, m = [], n
        while len(got) < len(old) and m <= last:
            if norm.get(m):
                got.append(norm[m])
            m += 1
        if got == old:
            return n
    return None


def _same_problem(c: dict, f: dict) -> bool:
    rc = {str(r).upper() for r in c.get("rules") or ()}
    rf = {str(r).upper() for r in f.get("rules") or ()}
    if rc or rf:
        return bool(rc & rf)
    return c.get("category") == f.get("category")


def guess(c: dict, file: dict | None, new_findings: list[dict]) -> tuple[str | None, str]:
    """The deterministic resolution of carried finding ``c`` in its touched ``file`` (None:
    the file was removed): None when its code is unchanged (still open), else a status."""
    old = _norm(c.get("code") or "")
    line = int(c.get("line") or 0)
    if file is None:
        return "implemented", "the file was removed"
    lines = _known_lines(file)
    if old:
        if file.get("content") is None and line and not any(
                abs(n - line) <= NEAR for n in lines):
            return None, "the change did not touch the lines it pointed at"
        if _locate(old, lines, line) is not None:
            return None, "the code it pointed at is unchanged"
    for f in new_findings:
        if f["file"] == file["path"] and _same_problem(c, f) and (
                not line or not f.get("line") or abs(int(f["line"]) - line) <= NEAR):
            what = ", ".join(f.get("rules") or ()) or f.get("category")
            return "partially", f"{f['key']} still reports the {what} problem nearby"
    if not old:
        return None, "the code it pointed at is not known"
    now = {_SPACE.sub(" ", t).strip() for t in lines.values()}
    if any(ln in now for ln in old):
        return "partially", "part of the code it pointed at remains"
    return "implemented", "the code it pointed at is gone and nothing reports the problem there"


# --- carrying -----------------------------------------------------------------------------------
_FIELDS = ("category", "severity", "file", "line", "end_line", "title", "description",
           "suggestion", "confidence", "rules", "reviewer", "reviewers", "fingerprint")


def _copy(c: dict, findings: list[dict], ref: str, round_no: object) -> dict:
    reviewer = str(c.get("reviewer") or c.get("category") or "carried")
    f = {k: c.get(k) for k in _FIELDS}
    f["reviewer"] = reviewer
    f["reviewers"] = list(c.get("reviewers") or [reviewer])
    f["rules"] = list(c.get("rules") or [])
    [numbered] = synthesis.number_findings(reviewer, [f],
                                           synthesis.next_index(findings, reviewer))
    key = str(c.get("key") or "")
    if key and all(g["key"] != key for g in findings):
        numbered["key"] = key  # the key the person knows it by
    numbered["history"] = [*(c.get("history") or []),
                           f"carried from round {round_no} ({ref}): still open"]
    numbered["carried_from"] = ref[:40]
    return numbered


def _rekey(findings: list[dict], f: dict, key: str) -> None:
    """Give finding ``f`` the carried ``key`` when no other finding has it, and follow the
    duplicates that point at it."""
    old = f["key"]
    if not key or key == old or any(g["key"] == key for g in findings):
        return
    f["key"] = key
    for g in findings:
        if g.get("duplicate_of") == old:
            g["duplicate_of"] = key
    f["history"].append(f"keeps its key {key} from the earlier round (found as {old} here)")


def keep_decision(f: dict, c: dict, why: str) -> None:
    """The decision a person made on carried finding ``c`` stays on ``f`` (its code is
    untouched): a person does not triage the same finding twice."""
    d = c.get("decision")
    if not isinstance(d, dict) or d.get("decision") != "accepted":
        return
    f["carried_decision"] = dict(d)
    who = str(d.get("by_name") or "a person")[:150]
    f["history"].append(f"accepted by {who} in round {d.get('round') or 'before'}; kept: {why}")


def _paths(state: dict) -> tuple[dict[str, dict], set[str]]:
    files = {f["path"]: f for f in state.get("files") or ()}
    for f in list(files.values()):
        if f.get("old_path") and f["old_path"] not in files:
            files[f["old_path"]] = f  # a renamed file: the old findings follow it
    removed = {c.get("path") for c in state.get("coverage") or ()
               if isinstance(c, dict) and c.get("reason") == "deleted"}
    return files, removed


def apply(findings: list[dict], state: dict, code_at, client: ModelClient | None = None
          ) -> list[str]:
    """Apply the suppressed and carried findings of ``state["options"]`` in place; returns
    notes for the review. ``client`` asks the synthesizer role to check the guesses."""
    opts = state.get("options") or {}
    notes: list[str] = []
    if n := suppress(findings, opts.get("suppressed")):
        notes.append(f"{n} finding(s) were not raised again: a person rejected them earlier for "
                     "the same code.")
    carried = [c for c in opts.get("carried") or () if isinstance(c, dict) and c.get("key")]
    if not carried:
        return notes
    pr = opts.get("pull_request") or {}
    sha = str(pr.get("head_sha") or "")[:12] or "this push"
    round_no = pr.get("previous_round") or "before"
    gone = {s.get("fingerprint") for s in opts.get("suppressed") or () if isinstance(s, dict)}
    files, removed = _paths(state)
    new = [f for f in findings if f["status"] == "kept"]
    by_fp = {f["fingerprint"]: f for f in new if f.get("fingerprint")}
    checks: list[tuple[dict, dict]] = []
    for c in carried:
        if c.get("fingerprint") and c["fingerprint"] in gone:
            continue
        ref = f"{c.get('review')}:{c['key']}"
        again = by_fp.get(c.get("fingerprint") or "")
        if again is not None:
            again["carried_from"], again["resolution"] = ref[:40], "not"
            again["history"].append(f"raised in round {round_no} too ({ref}) and raised again: "
                                    "not implemented")
            _rekey(findings, again, str(c.get("key") or ""))
            keep_decision(again, c, "the same code raised the same finding")
            continue
        f = _copy(c, findings, ref, round_no)
        findings.append(f)
        path = c.get("file") or ""
        if path not in files and path not in removed:
            keep_decision(f, c, "this round did not touch its file")
            continue  # a file this round did not touch: the finding stands as it was
        file = files.get(path)
        status, why = guess(c, file, new)
        if status is None:
            if file is not None and c.get("code"):
                _follow(f, c, file)
            f["history"].append(f"compared with {sha}: {why}")
            if c.get("code"):  # unchanged code, not merely unknown
                keep_decision(f, c, why)
            continue
        f["resolution"] = status
        f["history"].append(f"compared with {sha}: {status} ({why})")
        checks.append((f, {**c, "why": why, "file_now": file}))
    if checks and client is not None:
        notes += _validate(client, checks, sha)
    resolved = 0
    for f, _ in checks:
        if f["resolution"] == "implemented":
            f["status"] = "dropped"
            f["drop_reason"] = f"resolved in {sha}: implemented"
            resolved += 1
    kept = sum(1 for f, _ in checks if f["status"] == "kept")
    notes.append(f"{len(carried)} open finding(s) of round {round_no} carried: {resolved} "
                 f"resolved, {kept} whose code changed still open.")
    return notes


def _follow(f: dict, c: dict, file: dict) -> None:
    at = _locate(_norm(c["code"]), _known_lines(file), int(c.get("line") or 0))
    if at and c.get("line"):
        shift = at - int(c["line"])
        f["line"] = at
        if c.get("end_line"):
            f["end_line"] = int(c["end_line"]) + shift


# --- the check by the synthesizer role ------------------------------------------------------------
def _around(file: dict | None, line: int, end: int) -> str:
    if file is None:
        return "(the file was removed)"
    lines = _known_lines(file)
    picked = [f"{n} {lines[n]}" for n in range(max(1, line - CONTEXT), end + CONTEXT + 1)
              if n in lines]
    return "\n".join(picked) or "(those lines are not part of the change shown)"


def check_messages(checks: list[tuple[dict, dict]]) -> list[dict[str, str]]:
    items = []
    for f, c in checks:
        line = int(c.get("line") or 0)
        items.append({"key": f["key"], "file": f["file"], "title": f["title"],
                      "suggestion": f.get("suggestion") or "", "code_before": c.get("code") or "",
                      "code_now": _around(c["file_now"], line, int(c.get("end_line") or line)),
                      "guess": f["resolution"], "why": c["why"]})
    body = (f"## {CHECK_SECTION}\n```json\n"
            + json.dumps(mask_deep(items), indent=1, ensure_ascii=False) + "\n```")
    return [{"role": "system", "content": VALIDATE_SYSTEM}, {"role": "user", "content": body}]


def _validate(client: ModelClient, checks: list[tuple[dict, dict]], sha: str) -> list[str]:
    try:
        reply = client.complete("synthesizer", check_messages(checks), schema=ImplementedCheck,
                                key=CHECK_KEY)
        answer: ImplementedCheck = reply.data
    except (RunStopped, StageAbandoned):
        raise
    except Exception as exc:  # the deterministic guesses stand
        return [f"The check of earlier findings against the new code failed ({exc}); the "
                "mechanical comparison decides."]
    by_key = {f["key"]: f for f, _ in checks}
    changed = 0
    for item in answer.items:
        f = by_key.get(item.key.strip())
        if f is None:
            continue
        reason = mask(" ".join(item.reason.split()))[:300]
        if item.status != f["resolution"]:
            changed += 1
        f["resolution"] = item.status
        f["history"].append(f"checked against {sha}: {item.status}"
                            + (f" ({reason})" if reason else ""))
    return [f"The check of earlier findings changed {changed} resolution(s)."] if changed else []


# --- repository rules in the prompts ----------------------------------------------------------------
def with_rules(messages: list[dict[str, str]], rules: list[dict] | None,
               paths: set[str]) -> list[dict[str, str]]:
    """``messages`` with the rules that apply to ``paths`` added to the user message."""
    from reviews_app.hosting.repo_config import glob_match

    mine = [r for r in rules or () if isinstance(r, dict) and r.get("text") and any(
        glob_match(str(r.get("path_glob") or "**"), p) for p in paths)]
    if not mine:
        return messages
    text = "\n".join(f"- ({r.get('severity') or 'medium'}; {r.get('path_glob') or '**'}) "
                     f"{' '.join(str(r['text']).split())}" for r in mine)
    out = [dict(m) for m in messages]
    out[-1]["content"] += ("\n\n## Repository rules\nThe repository's maintainers ask reviewers "
                           f"to check these rules; report a break as a finding:\n{text}")
    return out
