"""What ``manage.py fork``, ``replay`` and ``compare`` share (issue 33): a run named on the
command line (its owner's only: another person's run is "no run N", as its pages answer 404),
a stage named by its number or as the trace and the comparison name it, an edit read from a
JSON file and checked by the pattern before anything is saved, gate policies, and running a
fork in this process until it waits or ends. Every refusal is one line with exit status 2
(``agents_app/cli.py``)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import IO, Any

from django.contrib.auth import get_user_model

from .. import engine
from ..cli import bad_input, command_owner
from ..models import RUNNABLE, Run
from ..patterns import PATTERNS
from ..patterns.base import InvalidDecision, Pattern
from ..patterns.gate_input import MAX_JSON_DEPTH, controls_in, json_depth
from ..teams.access import visible
from ..trace import stage_label
from . import checkpoints
from .create import GATE_POLICIES, is_end
from .stages import gate_label, gate_name

MAX_EDIT_BYTES = 1_000_000
MAX_ROW_ID = 2**63 - 1  # the largest primary key a database holds; a longer number is no run
LISTED = 12  # stages a refusal lists before "… N more"


def shown(text: str, limit: int = 40) -> str:
    """What a person typed, quoted on one line (control characters escaped), clipped."""
    return repr(text[:limit]) + ("…" if len(text) > limit else "")


def one_line(text: str) -> str:
    return " ".join((text or "").split())


# --- who and which run ------------------------------------------------------------------------
def command_user(username: str | None):
    """The command's user by run_pattern's rule (``--user``, else the first superuser, else
    the ``cli`` user), without making the ``cli`` user: a command that only reads or forks
    runs has no run of a user that does not exist. None when there is nobody."""
    if username:
        return command_owner(username)
    User = get_user_model()
    return (User.objects.filter(is_superuser=True).order_by("pk").first()
            or User.objects.filter(username="cli").first())


def run_id(text: str) -> int:
    """A run's number as typed (``12`` or ``#12``)."""
    digits = text.strip().removeprefix("#")
    if not re.fullmatch(r"[0-9]{1,30}", digits):
        raise bad_input(f"A run is given by its number (as in /runs/12/), not {shown(text)}.")
    return int(digits)


def owned_run(text: str, user) -> Run:
    """The run ``text`` names, if it is ``user``'s; "No run N." otherwise, whether it does not
    exist or is another person's (the pages answer both with the same 404)."""
    pk = run_id(text)
    run = visible(Run.objects, user).filter(pk=pk).first() \
        if user is not None and pk <= MAX_ROW_ID else None
    if run is None:
        raise bad_input(f"No run {pk if pk <= MAX_ROW_ID else shown(text)}.")
    return run


def pattern_of(run: Run) -> Pattern:
    pattern = PATTERNS.get(run.pattern)
    if pattern is None:
        raise bad_input(f"Run {run.pk} is of a pattern this version does not have "
                        f"({shown(run.pattern)}).")
    return pattern


# --- stages ------------------------------------------------------------------------------------
@dataclass
class StageName:
    seq: int
    name: str   # as the comparison names it: the engine's stage ("plan:1") or "gate:<gate>"
    label: str  # in words, as the trace shows it


def stage_names(run: Run) -> list[StageName]:
    """Every stage of ``run`` a fork can start from (its inherited ones first), in order."""
    out = []
    for cp in checkpoints.history(run):
        if is_end(cp):
            continue
        if cp.gate:
            out.append(StageName(cp.seq, gate_name(cp.gate), gate_label(cp.gate)))
        else:
            out.append(StageName(cp.seq, cp.stage, stage_label(run.pattern, cp.stage)))
    return out


def listing(names: list[StageName]) -> str:
    head = ", ".join(f"{s.seq} {s.name}" for s in names[:LISTED])
    return head + (f", … {len(names) - LISTED} more" if len(names) > LISTED else "")


def resolve_stage(run: Run, text: str, option: str = "--from") -> int:
    """The seq of the stage ``text`` names: its number, its name (``plan:1``,
    ``gate:plan_approval``) or its label ("Step 2 of plan v1", any case)."""
    names = stage_names(run)
    if not names:
        raise bad_input(f"{option}: run {run.pk} has no recorded stages to fork from (it was "
                        "made before forks existed).")
    wanted = text.strip()
    if re.fullmatch(r"[0-9]{1,30}", wanted):
        seq = int(wanted)
        if any(s.seq == seq for s in names):
            return seq
        ended = run.is_terminal and seq == run.stage_seq
        if ended:
            raise bad_input(f"{option}: stage {seq} is where run {run.pk} ended: no stage runs "
                            f"from there. Its stages are {names[0].seq} to {names[-1].seq}.")
        raise bad_input(f"{option}: run {run.pk} has no stage {wanted[:30]}; its stages are "
                        f"{names[0].seq} to {names[-1].seq}.")
    folded = wanted.casefold()
    found = [s for s in names if wanted and folded in (s.name.casefold(), s.label.casefold())]
    if len(found) == 1:
        return found[0].seq
    if found:
        raise bad_input(f"{option}: {shown(wanted)} is stages "
                        f"{', '.join(str(s.seq) for s in found)} of run {run.pk}: give its "
                        "number.")
    raise bad_input(f"{option}: run {run.pk} has no stage {shown(wanted)}; give a number or a "
                    f"name: {listing(names)}.")


# --- the edit ----------------------------------------------------------------------------------
def read_edit(path: str, stdin: IO[Any]) -> dict[str, Any]:
    """The JSON object in ``path`` (``-``: standard input), refused with one line when it is
    missing, unreadable, too large, not UTF-8 JSON, or holds what no edit can (NUL and other
    control characters, NaN, nesting past 32 levels)."""
    where = "standard input" if path == "-" else shown(path, 200)
    if path == "-":
        buffer = getattr(stdin, "buffer", None)
        raw = buffer.read(MAX_EDIT_BYTES + 1) if buffer is not None else \
            stdin.read(MAX_EDIT_BYTES + 1)
        data = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw
    else:
        if not path.strip() or "\0" in path:
            raise bad_input("--edit takes a file name, or - for standard input.")
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_EDIT_BYTES + 1)
        except FileNotFoundError:
            raise bad_input(f"--edit: no file {where}.") from None
        except IsADirectoryError:
            raise bad_input(f"--edit: {where} is a folder, not a file.") from None
        except OSError as exc:
            raise bad_input(f"--edit: {where} cannot be read ({exc.strerror}).") from None
    if len(data) > MAX_EDIT_BYTES:
        raise bad_input(f"--edit: {where} is over {MAX_EDIT_BYTES:,} bytes; an edit is far "
                        "smaller.")
    if not data.strip():
        raise bad_input(f'--edit: {where} is empty; give a JSON object, like {{"steps": '
                        '["…", "…"]}.')
    if b"\0" in data:
        raise bad_input(f"--edit: {where} holds NUL bytes: it is not a JSON text.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise bad_input(f"--edit: {where} is not UTF-8 text.") from None
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise bad_input(f"--edit: {where} is not JSON ({exc.msg} at line {exc.lineno}, "
                        f"column {exc.colno}).") from None
    except RecursionError:
        raise bad_input(f"--edit: {where} is nested more than {MAX_JSON_DEPTH} levels "
                        "deep.") from None
    except ValueError as exc:
        raise bad_input(f"--edit: {where} is not JSON an edit can hold ({one_line(str(exc))})."
                        ) from None
    if not isinstance(value, dict):
        raise bad_input(f'--edit takes a JSON object, like {{"steps": ["…", "…"]}}; '
                        f"{where} holds {type(value).__name__ if value is not None else 'null'}.")
    if not value:
        raise bad_input(f"--edit: the object in {where} is empty: nothing to edit.")
    if json_depth(value) > MAX_JSON_DEPTH:
        raise bad_input(f"--edit: {where} is nested more than {MAX_JSON_DEPTH} levels deep.")
    if found := controls_in(value):
        raise bad_input(f"--edit: the edit contains invisible control characters "
                        f"({', '.join(found[:3])}) that cannot be kept; remove them.")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON can hold")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is too large a number")
    return value


def check_edit(run: Run, seq: int, data: dict[str, Any], author: str) -> None:
    """``data`` as an edit of ``run`` at stage ``seq``, checked by the pattern as the web
    form's edit is (``apply_fork_edit``, whose result is dropped: nothing is saved here), after
    the names of its fields."""
    pattern = pattern_of(run)
    cp = checkpoints.at(run, seq)
    if cp is None:
        raise bad_input(f"--from: run {run.pk} has no stage {seq}.")
    state = checkpoints.state_at(cp)
    edit = pattern.fork_edit(cp.stage, cp.gate, state)
    if edit is None:
        editable = [s for s in stage_names(run) if _editable(pattern, run, s.seq)]
        where = (f"; it can be at {listing(editable)}" if editable else
                 f"; no stage of this {pattern.label} run has one")
        raise bad_input(f"--edit: nothing can be edited at stage {seq} of run {run.pk}{where}.")
    fields = list(edit.schema.model_fields)
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise bad_input(f"--edit: the edit at stage {seq} takes {', '.join(fields)}; not "
                        f"{', '.join(shown(k, 30) for k in unknown[:3])}.")
    try:
        pattern.apply_fork_edit(cp.stage, cp.gate, state, data, author)
    except InvalidDecision as exc:
        raise bad_input(f"--edit: {one_line(str(exc))}") from None


def _editable(pattern: Pattern, run: Run, seq: int) -> bool:
    cp = checkpoints.at(run, seq)
    return cp is not None and pattern.fork_edit(cp.stage, cp.gate,
                                                checkpoints.state_at(cp)) is not None


# --- gates and models --------------------------------------------------------------------------
def gate_policies(pattern: Pattern, every: str | None, specs: list[str]) -> dict[str, str]:
    """``--gates POLICY`` (every gate of the pattern) or ``--gate GATE=POLICY`` options."""
    if every is not None:
        if not pattern.gates:
            raise bad_input(f"--gates: a {pattern.label} run has no gates.")
        return dict.fromkeys(pattern.gates, every)
    out: dict[str, str] = {}
    for spec in specs:
        gate, sep, policy = spec.partition("=")
        gate, policy = gate.strip(), policy.strip()
        if not sep or not gate:
            raise bad_input("--gate takes GATE=POLICY, e.g. --gate plan_approval=reuse.")
        if gate not in pattern.gates:
            raise bad_input(f"--gate: a {pattern.label} run has no gate {shown(gate)}; "
                            + (f"its gates are {', '.join(pattern.gates)}." if pattern.gates
                               else "it has none."))
        if policy not in GATE_POLICIES:
            raise bad_input(f"--gate {gate}: the policy is one of {', '.join(GATE_POLICIES)}, "
                            f"not {shown(policy)}.")
        if out.get(gate, policy) != policy:
            raise bad_input(f"--gate {gate} is given twice, with {out[gate]} and {policy}.")
        out[gate] = policy
    return out


# --- running it here ---------------------------------------------------------------------------
def drive(run_id: int) -> Run:
    """Run a run in this process until it waits for a person or ends. A fork's gate policy may
    decide a gate as the stage before commits (the run is then ready again): go on with it."""
    run = engine.run_inline(run_id)
    for _ in range(1000):
        run = Run.objects.get(pk=run_id)
        if run.status not in RUNNABLE:
            break
        run = engine.run_inline(run_id)
    return run
