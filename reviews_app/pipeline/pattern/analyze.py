"""The review's first stage: static analysis of every changed file, no model call.

Every analyzer that reads a file's kind runs on it (``common.analyzers.tools``: ruff and bandit
for Python, semgrep with our rules for JavaScript/TypeScript/Go/Java/shell/PHP/Ruby/C#/Kotlin
(and its taint rules for Python and JavaScript web code), oxlint, shellcheck,
hadolint) and the secrets scanners read every file (detect-secrets and our provider key
formats). All tools run at once, against one deadline; a tool that is missing, fails or times
out is a warning here and a reason in the coverage of each file it should have read.

What the stage leaves in ``state["analysis"]``:

* ``evidence``: the results (our analyzers', then imported SARIF results on files of the
  change), each with its concrete fix.
* ``examined``: the paths an analyzer that reads code ran on (what coverage may count).
* ``examined_by``: path -> every analyzer that ran on it, secrets scanners included.
* ``not_run``: path -> why an analyzer that reads its kind did not run on it.
* ``kinds``, ``tools`` (name -> version), ``errors``, ``seconds``, ``files``,
  ``imported_tools``.
"""

from __future__ import annotations

from agents_app.patterns.base import Event, StageResult
from common import analyzers, secret_keys
from common.analyzers import classes, runner
from common.analyzers.tools import BY_NAME

from .. import imported

KEY_FORMATS = "secrets"  # the tool name of common.secret_keys' results


def describe() -> str:
    return ("Running the analyzers on the changed files: ruff and bandit (Python), semgrep "
            "with our rules (JavaScript, TypeScript, Go, Java, shell, PHP, Ruby, C#, Kotlin; "
            "taint rules for Python and JavaScript web code), oxlint, shellcheck, "
            "hadolint, and the secrets scanners on every file.")


def inputs_of(files: list[dict]) -> list[analyzers.AnalyzerInput]:
    """What the analyzers read of the change's files (the files with new code)."""
    return [i for i in (analyzers.input_from_file(f) for f in files) if i]


def analyze(state: dict) -> StageResult:
    inputs = inputs_of(state["files"])
    # Our provider key formats: the added lines of every file, in process.
    found = secret_keys.scan_files(state["files"])
    ours, outside = imported.join(state["files"], state["options"].get("imported") or [])
    for e in ours:
        e["fix"] = analyzers.suggestion_for(e)
    report = analyzers.run_analyzers(inputs)
    report.evidence = runner.with_key_formats(found, report.evidence)
    for e in report.evidence:
        e["fix"] = e.get("fix") or analyzers.suggestion_for(e)
    for e in report.evidence + ours:  # one rubric: each problem class graded one way
        classes.grade(e)
    examined_by = {p: list(t) for p, t in report.examined.items()}
    for inp in inputs:
        examined_by.setdefault(inp.path, []).append(KEY_FORMATS)
    code_read = sorted({p for p, tools in report.examined.items()
                        if any(BY_NAME[t].reads_code for t in tools if t in BY_NAME)},
                       key=[i.path for i in inputs].index)
    state["analysis"] = {"evidence": report.evidence + ours, "errors": report.errors,
                         "tools": report.tools, "seconds": round(report.seconds, 3),
                         "files": len(inputs), "examined": code_read,
                         "examined_by": examined_by, "not_run": report.not_run,
                         "kinds": report.kinds,
                         "imported_tools": imported.tools_by_file(ours)}
    on_changed = [e for e in report.evidence + ours if e.get("on_changed_line", True)]
    events = [Event("analysis_done", _summary(report, inputs, code_read, on_changed)
                    + _imported_text(ours, outside, state), {"evidence": len(on_changed)})]
    events += [Event("analysis_warning", e) for e in report.errors[:20]]
    return StageResult(state=state, next_stage="review", events=events)


def ran(analysis: dict) -> list[dict]:
    """The analyzers a review's analysis record says ran, as the exports and the synthesizer
    name them: each tool that ran (with its version), Quorum's key formats when there were
    files to scan, then the tools of imported SARIF results. Never a fixed list."""
    out = [{"id": str(name), "name": str(name), "version": str(version or ""),
            "imported": False} for name, version in (analysis.get("tools") or {}).items()]
    if analysis.get("files"):
        out.append({"id": KEY_FORMATS, "name": "Quorum's secret key formats", "version": "",
                    "imported": False})
    imported: list[str] = []
    for tools in (analysis.get("imported_tools") or {}).values():
        imported += [str(t) for t in tools or () if str(t) not in imported]
    return out + [{"id": t, "name": t, "version": "", "imported": True} for t in imported]


def _summary(report, inputs, code_read, on_changed) -> str:
    if not inputs:
        return (f"No new code to analyze: the analyzers had nothing to read. "
                f"{len(on_changed)} result(s) on changed lines.")
    tools = ", ".join(sorted(report.tools)) or "no analyzer"
    left = len(inputs) - len(code_read)
    text = (f"{tools} checked {len(inputs)} file(s) in {report.seconds:.1f} s: "
            f"{len(on_changed)} result(s) on changed lines.")
    if left:
        text += (f" {left} file(s) were checked for secrets only: no analyzer that reads "
                 "their code ran on them (see the coverage).")
    return text


def _imported_text(ours: list[dict], outside: int, state: dict) -> str:
    notes = " ".join(str(n) for n in state["options"].get("imported_notes") or ())
    if not ours and not outside:
        return f" {notes}" if notes else ""
    tools = sorted({e["tool"] for e in ours})
    text = (f" Imported results: {len(ours)} on files of the change"
            + (f" (from {', '.join(tools)})" if tools else ""))
    text += f", {outside} on other files left out." if outside else "."
    return text + (f" {notes}" if notes else "")
