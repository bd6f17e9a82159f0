"""Fixes proven before they are offered (issue 16), part 2: the proof, for the kept findings
of a review, at the end of the synthesis (before the triage gate).

For each kept finding whose suggestion is code replacing its lines (at most ``cap`` of them,
the most severe first; the rest say "not tried"), :mod:`.proof` builds the patched file;
then

1. **applies**: the lines it replaces are in the reviewed new file (needs the full file: a
   review of a pasted diff has hunks only, and says so);
2. **no new analyzer finding**: the analyzers (``common.analyzers`` public entry points:
   ``input_from_file``, ``run_analyzers``) and the secrets check read the file before and after
   the fix; a result (tool, rule) on the lines the fix wrote that was not on the lines it
   replaced fails the proof. One analyzer run reads every file as reviewed and every patched
   file (each under its own display name, ``quorum-fix-N/<path>``, so two fixes of one file
   are told apart): the cost is one analyzer run whatever the number of fixes;
3. **tests pass**, when a test command is configured and the review has a real checkout (a
   local git range): ``run_tests`` (see :mod:`.testrun`) runs it in a throwaway worktree.

Only a fix that passes every check that ran is "proven" and offered as a fix; the others keep
their suggestion as text and say why. No Django here.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from common import analyzers, secret_keys

from ..pipeline import synthesis
from .proof import Patch, check, fix_info, make_patch

CAP = 20
ANALYZER_TIMEOUT = 60.0
# run_tests(patches) → {finding key: check dict}; the caller (the stage) binds the options
TestRunner = Callable[[list[Patch]], dict[str, dict]]


def _file_for(f: dict, content: str) -> dict:
    # hunks left out: every line is "unchanged", so nothing is filtered by the diff's lines
    return {**f, "content": content, "hunks": []}


def _analyze(items: list[tuple[dict, str, str]]) -> analyzers.AnalyzerReport | None:
    """One analyzer run over (file dict, text, display path) items; None when no analyzer
    reads any of them."""
    inputs = [i for i in (analyzers.input_from_file({**_file_for(f, text), "path": path})
                          for f, text, path in items) if i]
    return analyzers.run_analyzers(inputs, timeout=ANALYZER_TIMEOUT) if inputs else None


def variant(n: int, path: str) -> str:
    return f"quorum-fix-{n}/{path}"


def _keys(evidence: list[dict], path: str, lo: int, hi: int) -> Counter:
    return Counter((str(e.get("tool")), str(e.get("rule"))) for e in evidence
                   if e.get("file") == path and isinstance(e.get("line"), int)
                   and lo <= e["line"] <= hi)


def _secrets(path: str, text: str, lo: int, hi: int) -> list[dict]:
    lines = text.split("\n")
    return secret_keys.scan_lines(path, [(n, lines[n - 1]) for n in range(lo, hi + 1)
                                         if 0 < n <= len(lines)])


def analyzer_check(patch: Patch, report: analyzers.AnalyzerReport | None, shown_as: str,
                   readable: bool) -> dict:
    """Whether the fix brings a new analyzer result onto the lines it wrote (``report`` read
    the reviewed file under its path and the patched one as ``shown_as``)."""
    lo, hi = patch.start, max(patch.stop, patch.start)
    new_secrets = _secrets(patch.path, patch.after, lo, hi)
    if len(new_secrets) > len(_secrets(patch.path, patch.before, patch.line, patch.end_line)):
        return check("no new analyzer finding", False, "The fix writes a secret (a key or "
                     "password) into the code.")
    if not readable:
        return check("no new analyzer finding", True, "No analyzer reads this file type; the "
                     "secrets check found nothing new.")
    if report is None or not report.tools:
        errors = "; ".join((report.errors if report else [])[:2])
        return check("no new analyzer finding", False, "The analyzers did not run, so the fix "
                     f"could not be checked{': ' + errors if errors else ''}.")
    before = after = report
    was = _keys(before.evidence, patch.path, patch.line, patch.end_line)
    now = _keys(after.evidence, shown_as, lo, hi)
    added = now - was
    if added:
        shown = []
        for e in after.evidence:
            k = (str(e.get("tool")), str(e.get("rule")))
            if e.get("file") == shown_as and added.get(k) and lo <= (e.get("line") or 0) <= hi:
                shown.append(f"{e['tool']} {e['rule']} on line {e['line']}: "
                             f"{str(e.get('message') or '')[:160]}")
        return check("no new analyzer finding", False, "The fix brings new analyzer results "
                     "on the lines it writes: " + "; ".join(shown[:3]))
    tools = ", ".join(sorted(after.tools))
    fixed = sum((was - now).values())
    return check("no new analyzer finding", True, f"{tools}: nothing new on lines {lo}-{hi}"
                 + (f"; {fixed} result(s) there before are gone." if fixed else "."))


def prove(kept: list[dict], files: list[dict], *, run_tests: TestRunner | None = None,
          tests_note: str = "", cap: int = CAP) -> dict:
    """Set ``fix`` on every finding of ``kept`` (in place); returns a summary for the stage's
    note: ``{"tried", "proven", "capped", "seconds"}``."""
    started = time.monotonic()
    by_path = {f["path"]: f for f in files}
    patches: list[tuple[dict, Patch]] = []
    capped = 0
    for f in synthesis.ordered(list(kept)):
        src = by_path.get(f.get("file"))
        patch, info = make_patch(f, src.get("content") if src else None)
        if patch is None:
            f["fix"] = info
        elif len(patches) >= cap:
            capped += 1
            f["fix"] = fix_info("not_proven", f"Not tried: only the {cap} most severe fixes "
                                              "of a review are proven.", diff=patch.diff)
        else:
            patches.append((f, patch))
    if not patches:
        return {"tried": 0, "proven": 0, "capped": capped, "seconds": 0.0}
    # the analyzers: one run reads every touched file as reviewed and every patched file
    paths = list(dict.fromkeys(p.path for _, p in patches))
    items = [(by_path[p], by_path[p]["content"], p) for p in paths]
    items += [(by_path[p.path], p.after, variant(n, p.path)) for n, (_, p) in enumerate(patches)]
    report = _analyze(items)
    readable = {p: analyzers.input_from_file(_file_for(by_path[p], by_path[p]["content"]))
                is not None for p in paths}
    results: dict[str, list[dict]] = {}
    for n, (_, patch) in enumerate(patches):
        results[patch.key] = [
            check("applies", True, f"Replaces lines {patch.line}-{patch.end_line} of the "
                                   "reviewed file."),
            analyzer_check(patch, report, variant(n, patch.path), readable[patch.path])]
    ready = [p for _, p in patches if results[p.key][1]["ok"]]
    test_checks = run_tests(ready) if (run_tests and ready) else {}
    proven = 0
    for f, patch in patches:
        checks = results[patch.key]
        if patch.key in test_checks:
            checks.append(test_checks[patch.key])
        elif results[patch.key][1]["ok"]:
            checks.append(check("tests pass", None, tests_note or "Not run: no test command is "
                                "configured for this review."))
        # a configured test command that did not run (time spent, no checkout) proves nothing
        failed = [c for c in checks if c["ok"] is False
                  or (c["ok"] is None and patch.key in test_checks)]
        if failed:
            f["fix"] = fix_info("not_proven", f"Not proven: {failed[0]['detail']}",
                                diff=patch.diff, checks=checks)
        else:
            proven += 1
            f["fix"] = fix_info("proven", "Applies cleanly, brings no new analyzer finding"
                                + (" and keeps the tests passing." if patch.key in test_checks
                                   else "."), diff=patch.diff, checks=checks)
    return {"tried": len(patches), "proven": proven, "capped": capped,
            "seconds": round(time.monotonic() - started, 2)}


def prove_review(kept: list[dict], state: dict) -> list[str]:
    """The synthesis stage's hook: prove the kept findings' fixes with the review's options;
    returns the note for the review (none when no finding had code to try)."""
    from .testrun import runner_for

    opts = (state.get("options") or {}).get("fixes") or {}
    run_tests, note = runner_for(opts)
    cap = opts.get("cap")
    done = prove(kept, state.get("files") or [], run_tests=run_tests, tests_note=note,
                 cap=int(cap) if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 0
                 else CAP)
    if not done["tried"] and not done["capped"]:
        return []
    text = (f"Fixes: {done['proven']} of {done['tried']} suggested code change(s) proven "
            f"in {done['seconds']:.1f} s")
    if done["capped"]:
        text += f"; {done['capped']} more not tried (only the {cap or CAP} most severe are)"
    return [text + "."]
