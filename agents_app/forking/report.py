"""Comparisons and replays as data and as text (issue 33): what ``manage.py compare`` and
``manage.py replay`` print, as plain dicts for ``--json`` (and any page that wants them) and
as lines for a person. Reads runs; changes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models import Checkpoint, ModelCall, Run, Status
from ..trace import stage_label
from . import checkpoints
from .diff import Column, RunDiff, StageRecord, TextDiff, as_text, stage_diff, text_diff
from .stages import gate_name

SHOWN_DIFF_LINES = 60  # lines of one diff the text shows (the JSON has the diff's 400)
LINE_WIDTH = 240       # characters of one diff line the text shows (the JSON has them whole)
LABEL_WIDTH = 34


# --- runs and stages as data -------------------------------------------------------------------
def run_brief(run: Run) -> dict[str, Any]:
    fork = run.fork or {}
    return {"run": run.pk, "pattern": run.pattern, "status": run.status,
            "url": run.get_absolute_url(), "forked_from": run.forked_from_id,
            "fork_seq": run.fork_seq, "kind": fork.get("kind"), "calls": run.calls,
            "tokens": run.total_tokens, "cost_usd": float(run.cost_usd)}


def stage_brief(s: StageRecord | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"seq": s.seq, "stage": s.stage, "label": s.label, "calls": len(s.calls),
            "replayed_calls": sum(1 for c in s.calls if c.replayed), "tokens": s.tokens,
            "cost_usd": round(s.cost, 8), "latency_ms": s.latency_ms, "decision": s.decision}


def _text(d: TextDiff) -> dict[str, Any]:
    return {"same": d.same, "diff": d.lines, "cut": d.cut}


def diff_dict(diff: RunDiff, a: Run, b: Run) -> dict[str, Any]:
    """Two runs' stage-aligned diff: every stage with both sides, whether it is the same, the
    prompt, reply, output and decision diffs, and the deltas (the second run minus the first)."""
    rows = []
    for i, r in enumerate(diff.rows):
        side = r.left or r.right
        rows.append({
            "row": i, "stage": side.stage if side else "", "label": r.name, "same": r.same,
            "first_divergence": i == diff.divergence,
            "left": stage_brief(r.left), "right": stage_brief(r.right),
            "prompt": _text(r.prompts), "reply": _text(r.responses),
            "output": _text(r.outputs), "decision": _text(r.decisions),
            "tokens_delta": r.tokens_delta, "cost_delta_usd": round(r.cost_delta, 8),
            "latency_delta_ms": r.latency_delta_ms})
    first = diff.first_divergent
    return {"runs": [run_brief(a), run_brief(b)], "same": diff.divergence is None,
            "first_divergence": None if first is None else {
                "row": diff.divergence, "label": first.name,
                "stage": (first.left or first.right).stage if (first.left or first.right)
                else ""},
            "stages": rows,
            "totals": {"tokens_delta": sum(r.tokens_delta for r in diff.rows),
                       "cost_delta_usd": round(sum(r.cost_delta for r in diff.rows), 8),
                       "latency_delta_ms": sum(r.latency_delta_ms for r in diff.rows)}}


def columns_dict(columns: list[Column], first: int | None, runs: list[Run]) -> dict[str, Any]:
    """Three to six runs side by side on the first one's stages: each stage with each run's
    (or null) and whether it is the same as the first run's."""
    rows = []
    for i, c in enumerate(columns):
        base = c.stages[0]
        cells = []
        for s in c.stages:
            cell = stage_brief(s)
            if cell is not None:
                cell["same_as_first"] = base is not None and stage_diff(base, s).same
            cells.append(cell)
        present = next((s for s in c.stages if s is not None), None)
        rows.append({"row": i, "stage": present.stage if present else "", "label": c.name,
                     "same": c.same, "first_divergence": i == first, "runs": cells})
    return {"runs": [run_brief(r) for r in runs], "same": first is None,
            "first_divergence": first, "stages": rows}


# --- as text -----------------------------------------------------------------------------------
def _who(run: Run) -> str:
    fork = run.fork or {}
    what = f"run {run.pk} ({run.get_status_display().lower()}"
    if run.forked_from_id:
        what += f", {fork.get('kind', 'fork')} of run {run.forked_from_id} from stage " \
                f"{run.fork_seq}"
    own = "its own calls " if run.forked_from_id else ""
    return what + f"; {own}{run.total_tokens:,} tokens, ${run.cost_usd:.4f})"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _cost(delta: float) -> str:
    return f"{'+' if delta >= 0 else '-'}${abs(delta):.4f}"


def diff_lines(diff: RunDiff, a: Run, b: Run) -> list[str]:
    """The diff for a person: a table of the stages (same or not, with the deltas), the first
    divergence marked, then each differing stage's diffs."""
    out = [f"Comparing {_who(a)}", f"     with {_who(b)}."]
    first = diff.first_divergent
    if first is None:
        out.append(f"The same at every stage ({len(diff.rows)}).")
    else:
        out.append(f"They part at {_where(first)}.")
    out += ["", f"  {'':3}{'stage':<{LABEL_WIDTH + 6}} {'':>14} {'Δ tokens':>9} "
                f"{'Δ cost':>10} {'Δ latency':>10}"]
    for i, r in enumerate(diff.rows):
        side = r.left or r.right
        seq = f"{side.seq:>4}" if side else "    "
        if r.same:
            verdict = "same"
        elif r.left is None:
            verdict = f"only in run {b.pk}"
        elif r.right is None:
            verdict = f"only in run {a.pk}"
        else:
            verdict = "differs"
        mark = ">> " if i == diff.divergence else "   "
        out.append(f"  {mark}{seq}  {_clip(r.name, LABEL_WIDTH):<{LABEL_WIDTH}} {verdict:>14} "
                   f"{r.tokens_delta:>+9,} {_cost(r.cost_delta):>10} "
                   f"{r.latency_delta_ms:>+8,} ms")
    total = (sum(r.tokens_delta for r in diff.rows), sum(r.cost_delta for r in diff.rows),
             sum(r.latency_delta_ms for r in diff.rows))
    out.append(f"  {'':3}{'':4}  {'all stages':<{LABEL_WIDTH}} {'':>14} {total[0]:>+9,} "
               f"{_cost(total[1]):>10} {total[2]:>+8,} ms")
    for i, r in enumerate(diff.rows):
        if r.same:
            continue
        side = r.left or r.right
        head = f"Stage {side.seq} · {r.name}" if side else r.name
        out += ["", head + (" (the first divergence)" if i == diff.divergence else "") + ":"]
        if r.left is None or r.right is None:
            only, stage = (b, r.right) if r.left is None else (a, r.left)
            calls = f"{len(stage.calls)} call(s), {stage.tokens:,} tokens" if stage and \
                stage.calls else "no model call"
            out.append(f"  only run {only.pk} has this stage ({calls})")
            if stage is not None and stage.calls:
                continue  # its prompts and replies are the whole of it: --json has them
        for what, d in (("prompt", r.prompts), ("reply", r.responses), ("output", r.outputs),
                        ("decision", r.decisions)):
            if d.same:
                continue
            out.append(f"  {what}:")
            out += diff_text(d)
    return out


def diff_text(d: TextDiff, indent: str = "    ") -> list[str]:
    """A diff's lines for a terminal: the first SHOWN_DIFF_LINES, each clipped."""
    out = [indent + _clip(line, LINE_WIDTH) for line in d.lines[:SHOWN_DIFF_LINES]]
    left = len(d.lines) - SHOWN_DIFF_LINES + d.cut
    if left > 0:
        out.append(f"{indent}… {left:,} more line(s) (--json has the first 400)")
    return out


def _where(row) -> str:
    side = row.left or row.right
    if row.left is None or row.right is None:
        return f"stage {side.seq}, {row.name} (only one run has it)"
    parts = [w for w, d in (("prompt", row.prompts), ("reply", row.responses),
                            ("output", row.outputs), ("decision", row.decisions)) if not d.same]
    return f"stage {side.seq}, {row.name} (its {', '.join(parts)} differ{'s' if len(parts) == 1 else ''})"


def columns_lines(columns: list[Column], first: int | None, runs: list[Run]) -> list[str]:
    """Runs side by side for a person: a row per stage of the first run (and the stages only
    others have), a column per run: the first run's tokens, then for each other run whether
    its stage is the same as the first's."""
    out = [f"{len(runs)} runs side by side, on the stages of run {runs[0].pk}:"]
    out += [f"  {_who(r)}" for r in runs]
    if first is None:
        out.append("The same at every stage.")
    else:
        at = next((s for s in columns[first].stages if s is not None), None)
        out.append(f"They part at {'stage ' + str(at.seq) + ', ' if at else ''}"
                   f"{columns[first].name}.")
    width = 18
    out += ["", f"  {'':3}{'stage':<{LABEL_WIDTH + 6}}"
                + "".join(f"  {'run ' + str(r.pk):>{width}}" for r in runs)]
    for i, c in enumerate(columns):
        base = c.stages[0]
        present = next((s for s in c.stages if s is not None), None)
        seq = f"{present.seq:>4}" if present else "    "
        cells = []
        for k, s in enumerate(c.stages):
            if s is None:
                cells.append("—")
            elif k == 0:
                cells.append(f"{s.tokens:,} tok")
            elif base is not None and stage_diff(base, s).same:
                cells.append("same")
            else:
                delta = s.tokens - (base.tokens if base else 0)
                cells.append(f"differs {delta:+,} tok" if delta and base else "differs")
        mark = ">> " if i == first else "   "
        out.append(f"  {mark}{seq}  {_clip(c.name, LABEL_WIDTH):<{LABEL_WIDTH}}"
                   + "".join(f"  {cell:>{width}}" for cell in cells))
    return out


# --- a replay's outcome ------------------------------------------------------------------------
@dataclass
class ReplayOutcome:
    replayed_calls: int          # served from the original's journal
    new_calls: int               # made to a provider
    same_end: bool               # ended as the original did: status and last state
    end: dict[str, Any] = field(default_factory=dict)
    diverged: dict[str, Any] | None = None

    @property
    def same(self) -> bool:
        return self.diverged is None and self.same_end

    def as_dict(self) -> dict[str, Any]:
        return {"calls": {"replayed": self.replayed_calls, "new": self.new_calls},
                "provider_calls": self.new_calls, "same_end_state": self.same_end,
                "end": self.end, "diverged": self.diverged, "same": self.same}


def _last(run: Run) -> Checkpoint | None:
    history = checkpoints.history(run)
    return history[-1] if history else None


def replay_outcome(original: Run, replay: Run) -> ReplayOutcome:
    """What a replay of ``original`` did: how many calls it was served and made, whether it
    ended in the same status with the same state at the same last stage, and where it
    diverged with the first message (or, at a gate, the first part of the state) that
    differs."""
    calls = ModelCall.objects.filter(run=replay)
    total = calls.count()
    replayed = calls.filter(replayed_from__isnull=False).count()
    a, b = _last(original), _last(replay)
    sa = checkpoints.state_at(Checkpoint.objects.get(pk=a.pk)) if a else {}
    sb = checkpoints.state_at(Checkpoint.objects.get(pk=b.pk)) if b else {}
    keys = sorted(k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k))
    end = {"original_status": original.status, "status": replay.status,
           "original_seq": a.seq if a else None, "seq": b.seq if b else None,
           "differing_keys": keys}
    same_end = (original.status == replay.status and a is not None and b is not None
                and a.seq == b.seq and not keys)
    diverged = (replay.fork or {}).get("diverged")
    if diverged is not None:
        diverged = _diverged(original, replay, dict(diverged), a)
    elif replay.status == Status.FAILED and original.status != Status.FAILED:
        diverged = {"seq": replay.stage_seq, "stage": "", "label": "", "why": replay.error,
                    "first": []}
    return ReplayOutcome(replayed, total - replayed, same_end, end, diverged)


def _diverged(original: Run, replay: Run, d: dict[str, Any],
              last: Checkpoint | None) -> dict[str, Any]:
    seq = d.get("seq")
    stage = d.get("stage") or ""
    gate = ""
    if isinstance(seq, int):
        cp = checkpoints.at(replay, seq)
        if cp is not None:
            gate = cp.gate
    d["label"] = stage_label(original.pattern, stage) if stage and not gate else \
        (gate_name(gate) if gate else "")
    if not d.get("first") and isinstance(seq, int):
        d["first"] = _first_state_difference(original, replay, seq)
    if d.get("missing") and last is not None and seq == last.seq \
            and original.status != Status.COMPLETED:
        d["why"] = (f"{d.get('why', '')}: the original stopped at this stage "
                    f"({original.get_status_display().lower()}) before making it")
    d.setdefault("first", [])
    return d


def _first_state_difference(original: Run, replay: Run, seq: int) -> list[str]:
    """At a gate a replay stops when what is decided differs: the first key of the state that
    differs between the two runs at that stage, as diff lines."""
    x, y = checkpoints.at(original, seq), checkpoints.at(replay, seq)
    if x is None or y is None:
        return []
    sx, sy = checkpoints.state_at(x), checkpoints.state_at(y)
    for key in sorted(set(sx) | set(sy)):
        if sx.get(key) != sy.get(key):
            return text_diff(as_text(sx.get(key)), as_text(sy.get(key)),
                             f"original {key}", f"replay {key}").lines[:120]
    return []


def replay_lines(original: Run, replay: Run, outcome: ReplayOutcome) -> list[str]:
    o = outcome
    out = [f"Replay of run {original.pk}: run {replay.pk} ({replay.get_absolute_url()}), "
           f"{replay.get_status_display().lower()}.",
           f"Provider calls: {o.new_calls} (replayed from the journal: {o.replayed_calls})."]
    if o.diverged is not None:
        d = o.diverged
        where = f"stage {d.get('seq')}" + (f", {d['label']}" if d.get("label") else "")
        if d.get("key"):
            where += f", call {d['key']!r}"
        out.append(f"Diverged at {where}: {d.get('why') or replay.error}.")
        if d.get("first"):
            out.append("The first difference:")
            out += diff_text(TextDiff(False, d["first"]), "  ")
    elif o.same_end:
        e = o.end
        out.append(f"Ended as the original did: {original.get_status_display().lower()}, "
                   f"with the same state at its last stage ({e['seq']}).")
    else:
        e = o.end
        what = []
        if e["original_status"] != e["status"]:
            what.append(f"{e['status']} where the original was {e['original_status']}")
        if e["original_seq"] != e["seq"]:
            what.append(f"its last stage is {e['seq']}, the original's {e['original_seq']}")
        if e["differing_keys"]:
            what.append(f"its state differs in {', '.join(e['differing_keys'][:8])}")
        out.append("Ended differently from the original: " + "; ".join(what) + ".")
    return out
