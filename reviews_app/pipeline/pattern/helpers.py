"""Helpers of the review stages: packing files into prompts, looking up the new code at a
finding's lines, the true coverage once the reviewers have run, and the summary used when the
synthesizer gave none."""

from __future__ import annotations

from .. import coverage, prompts, synthesis
from .constants import VERDICT_LABELS


def batches(files: list[dict], budget: int) -> list[list[dict]]:
    """Pack files into prompts of at most ``budget`` characters (a file larger than the
    budget goes alone), so a large change costs more calls in parallel, not a longer path."""
    out: list[list[dict]] = []
    size = 0
    for f in files:
        n = len(prompts.file_block(f))
        if out and size + n <= budget:
            out[-1].append(f)
            size += n
        else:
            out.append([f])
            size = n
    return out or [[]]


def true_coverage(state: dict) -> list[dict]:
    opts = state["options"]
    return coverage.examined(
        state["files"], state["coverage"], state.get("analysis") or {},
        state.get("model_readers") or {}, list(opts["reviewers"]),
        set(opts.get("offline_roles") or ()), state.get("reviewers") or {})


def code_lookup(files: list[dict]):
    """``code_at(path, line, end_line)``: the new code at those lines, if we have it."""
    by_path = {f["path"]: f for f in files}

    def code_at(path: str, line: int | None, end_line: int | None) -> str | None:
        f = by_path.get(path)
        if f is None or not line:
            return None
        end = max(line, end_line or line)
        if f.get("content") is not None:
            lines = f["content"].split("\n")
            return "\n".join(lines[line - 1:end]) if line <= len(lines) else None
        got = {ln["new"]: ln["text"] for h in f["hunks"] for ln in h["lines"]
               if ln["new"] is not None}
        if not all(n in got for n in range(line, end + 1)):
            return None
        return "\n".join(got[n] for n in range(line, end + 1))

    return code_at


def fallback_summary(kept: list[dict], verdict: str, reviewers: dict[str, dict]) -> str:
    counts = synthesis.severity_counts(kept)
    parts = [f"{n} {sev}" for sev, n in counts.items() if n]
    found = ", ".join(parts) if parts else "no findings"
    failed = [r for r, v in reviewers.items() if v["status"] not in ("ok", "partial")]
    text = f"The reviewers kept {found}. By the severity rules the verdict is " \
           f"{VERDICT_LABELS[verdict]}."
    if failed:
        text += f" Not reviewed by: {', '.join(failed)}."
    return text
