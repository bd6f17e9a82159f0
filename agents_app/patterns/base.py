"""The contract between pattern logic and the engine that persists and schedules it.

A pattern is a state machine over named *stages*. The engine calls
``run_stage(stage, state, client)`` and gets back a ``StageResult``: the new state, the
next stage (or none when the run is over), an optional gate at which a person decides,
records to persist and events to show. A stage name is unique within a run (it carries
plan versions and indices), so it doubles as the key under which the engine journals the
stage's model calls: a stage executed again after a crash replays those calls instead of
paying for them twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, overload

from pydantic import BaseModel, ValidationError

from .options import NoOptions, PatternOptions

# --- the model client -------------------------------------------------------------------
Data = TypeVar("Data", bound=BaseModel | None, covariant=True)
Schema = TypeVar("Schema", bound=BaseModel)


@dataclass(frozen=True)
class Reply(Generic[Data]):
    """A model's answer: its raw text and, when a schema was asked for, the parsed object
    (``Reply[PlanDraft]``: ``data`` is a ``PlanDraft``; ``Reply[None]``: no schema)."""

    text: str
    data: Data


class ModelClient(Protocol):
    @overload
    def complete(self, role: str, messages: list[dict[str, str]], *, schema: None = None,
                 key: str | None = None) -> Reply[None]: ...

    @overload
    def complete(self, role: str, messages: list[dict[str, str]], *, schema: type[Schema],
                 key: str | None = None) -> Reply[Schema]: ...

    def complete(self, role: str, messages: list[dict[str, str]], *,
                 schema: type[BaseModel] | None = None,
                 key: str | None = None) -> Reply[BaseModel | None]:
        """Call the model routed to ``role``. ``key`` names the call within its stage."""


# --- errors the client raises -------------------------------------------------------------
class RunStopped(Exception):
    """Base for conditions that end a run between model calls."""

    status = "failed"


class Cancelled(RunStopped):
    status = "cancelled"


class BudgetExceeded(RunStopped):
    status = "budget_exceeded"


class TimeLimitExceeded(RunStopped):
    status = "failed"


class StageAbandoned(Exception):
    """The engine gave up this stage (another worker owns the run now). Pattern code that
    catches exceptions broadly, such as a reviewer that degrades on failure, re-raises it."""


class ModelError(Exception):
    """A model call failed for good (after retries). ``retryable`` tells what kind it was."""

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


class StructuredOutputError(ModelError):
    """The model's reply could not be read as the requested schema, even after a retry."""


# --- what a stage returns -----------------------------------------------------------------
@dataclass
class Event:
    kind: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Item:
    """A generic record of a pattern's work (a draft and its critique, an argument, a piece of
    evidence): ``kind`` and ``key`` name it uniquely within the run, ``data`` holds it. Written
    with the stage's commit, so a stage run again cannot double it."""

    kind: str
    key: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ItemEdited:
    """A fork's edit of an ``Item`` it has from its parent (copied up to the fork point): the
    row ``kind``/``key`` of the fork gets ``data`` (made when missing), or is removed when
    ``data`` is None. Only a fork's edit writes it; a stage writes ``Item``."""

    kind: str
    key: str
    data: dict[str, Any] | None = None


@dataclass
class Gate:
    """A point where the run waits for a person. ``kind`` names the decision asked for."""

    kind: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class StageResult:
    state: dict[str, Any]
    next_stage: str | None = None
    gate: Gate | None = None
    outcome: str | None = None  # "completed", "failed" or "cancelled" when the run ends here
    error: str = ""
    answer: str | None = None
    records: list[Any] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


@dataclass
class Decision:
    """A person's decision at a gate, as the pattern sees it."""

    action: str  # approve | reject
    feedback: str = ""
    edits: Any = None
    author: str = ""


class InvalidDecision(ValueError):
    """The decision cannot apply (an empty edited plan, say); the message is for the person."""


@dataclass
class ForkEdit:
    """What a fork may change at its start: ``schema`` (a pydantic model; the form is made
    from it), the ``value`` now (a dict valid against it), a ``label`` for the form, and
    ``apply(state, edited model, author) -> (state, records)``: the records (a new plan
    version, say) are the fork's own version of what was edited, persisted like a stage's."""

    schema: type[BaseModel]
    value: dict[str, Any]
    label: str
    apply: Callable[[dict[str, Any], Any, str], tuple[dict[str, Any], list[Any]]]


def validation_text(exc: ValidationError) -> str:
    """A pydantic error as one sentence for a person: each field and what is wrong."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "the edit"
        parts.append(f"{where}: {err.get('msg', 'not valid')}")
    return "The edit is not valid: " + "; ".join(parts) + "."


_NUMBER = re.compile(r"\{(\d)(\+?)\}")


def fill_stage(template: str | None, stage: str) -> str | None:
    """``template`` with the numbers of ``stage`` (``step:2:0``: a kind, then numbers) put in:
    ``{n}`` is the n-th number after the kind, ``{n+}`` that index counted from one. None
    when there is no template or the stage has fewer numbers than it needs."""
    args = [a for a in (stage or "").split(":")[1:] if a]
    if template is None or len(_NUMBER.findall(template)) > len(args):
        return None

    def number(m: re.Match[str]) -> str:
        value = args[int(m.group(1))]
        return str(int(value) + 1) if m.group(2) and value.isdigit() else value

    return _NUMBER.sub(number, template)


def parse_named_lines(text: str, *, key: str, line_form: str, name_re: re.Pattern[str],
                      name_rule: str, max_text: int, bounds: tuple[int, int],
                      count_message: str) -> list[dict[str, str]]:
    """Named participants from lines of ``name: text`` (debate positions, team members):
    ``[{"name": ..., key: ...}]``. InvalidDecision, naming the line, when one is not usable."""
    items: list[dict[str, str]] = []
    for n, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        name, sep, body = line.partition(":")
        name, body = name.strip(), body.strip()
        if not sep or not body:
            raise InvalidDecision(f"Line {n}: write {line_form}.")
        if not name_re.match(name):
            raise InvalidDecision(f"Line {n}: {name_rule}.")
        if len(body) > max_text:
            raise InvalidDecision(f"Line {n}: the {key} is longer than {max_text:,} characters.")
        if name.lower() in {i["name"].lower() for i in items}:
            raise InvalidDecision(f"Line {n}: “{name}” is named twice.")
        items.append({"name": name, key: body})
    if not bounds[0] <= len(items) <= bounds[1]:
        raise InvalidDecision(count_message)
    return items


OfflineReply = tuple[str | None, str | None, Callable[[list[dict[str, str]]], Any]]


class Pattern:
    """Base class. Subclasses define the stages and the decisions at their gates, and
    describe themselves to the web app, the command line and the offline model."""

    name: str = ""  # the key: stored on each run, used in URLs, flags and settings
    label: str = ""  # its name for people
    # Each kind of stage in words for the trace ("step" → "Step {1+} of plan v{0}": ``{n}`` is
    # the n-th number after the kind in the stage name, ``{n+}`` that index counted from one).
    stage_labels: dict[str, str] = {}
    # The timeline's sentence when a stage of each kind starts, and when the run stops at each
    # of its gates (same ``{n}`` numbers as ``stage_labels``).
    stage_lines: dict[str, str] = {}
    gate_lines: dict[str, str] = {}
    # What the run does after a person's decision, by run status ("executing": "The executor
    # is carrying out the plan's steps."): the run page's status line (agents_app/notices.py)
    # says it under the decision until the run's status changes. A status without a line
    # gets a plain one.
    status_lines: dict[str, str] = {}
    summary: str = ""  # one sentence: what it does (manage.py patterns)
    # One short sentence, "For …": what a person would choose it for. The start form shows it
    # under the pattern's name (a pattern started from a task has one; a test checks it).
    purpose: str = ""
    roles: tuple[str, ...] = ()
    # The kind of model a role gets unless configured: "default", "cheap" (a light task) or
    # "other-family" (a reviewer from another model family than the default, when there is one).
    role_defaults: dict[str, str] = {}
    options: type[PatternOptions] = NoOptions
    gates: tuple[str, ...] = ()
    # A run waiting at a gate has the status ``awaiting_<gate>``; its words for people, when
    # the gate is not one of the statuses the app already names.
    gate_labels: dict[str, str] = {}
    starts_from_task = True  # False: started from its own form (a code review needs a diff)
    page = "run_detail"  # URL name of the page that shows a run of this pattern
    # The run page: the partials of the package's ``panel.html``, in page order, and which of
    # them an event of each kind this pattern emits changes (for the live channel).
    panels: tuple[str, ...] = ("items-panel",)
    live_events: dict[str, tuple[str, ...]] = {}
    # Django-side hooks, as dotted paths the web app imports when it needs them: the function
    # that renders live updates of a page of its own, and one called when a run ends.
    live_renderer: str = ""
    on_terminal: str = ""
    # Called (dotted path) when a fork of a run of this pattern is made, in its transaction,
    # with (parent run, fork run, checkpoint): records of its own to copy (a code review's).
    on_fork: str = ""
    # Set by the registry when it loads the pattern.
    package: str = ""
    directory: Path | None = None
    source: Path | None = None

    def offline_replies(self) -> list[OfflineReply]:
        """What the offline model answers for this pattern's calls: (schema name or None,
        role or None, messages -> reply). Kept beside the prompts they answer."""
        return []

    @property
    def panel_template(self) -> str:
        """The template of this pattern's panel on the run page ("" when it has none)."""
        if self.directory is None or not (self.directory / "panel.html").is_file():
            return ""
        return f"{self.directory.name}/panel.html"

    def check_options(self, data: dict[str, Any], *, headless: bool = False) -> dict[str, Any]:
        """``data`` checked and completed with defaults (pydantic ValidationError if not)."""
        return self.options.model_validate(data, context={"headless": headless}).model_dump()

    def initial_state(self, task: str, options: dict[str, Any]) -> dict[str, Any]:
        return {"task": task, "options": dict(options)}

    def roles_used(self, options: dict[str, Any]) -> tuple[str, ...]:
        """The roles a run with ``options`` calls (all of them unless the options leave some
        out): the run's role → model map keeps these only, so its page names no other."""
        return self.roles

    def bind_run(self, state: dict[str, Any], run_id: int) -> dict[str, Any]:
        """The state once the run has its id (for names derived from it, like a branch)."""
        return state

    def first_stage(self, state: dict[str, Any]) -> str:
        raise NotImplementedError  # pragma: no cover - every pattern defines it

    def status_for(self, stage: str) -> str:
        """The run status shown while ``stage`` is pending or running."""
        return "running"

    def describe_stage(self, stage: str) -> str | None:
        """A sentence for the timeline when ``stage`` starts; None for the engine's default."""
        return fill_stage(self.stage_lines.get(stage.split(":", 1)[0]), stage)

    def gate_message(self, gate: str) -> str | None:
        """A sentence for the timeline when the run stops at ``gate``; None for the default."""
        return self.gate_lines.get(gate)

    def headless_hint(self, gate: str) -> str:
        """How to get past ``gate`` on the command line, if there is a way ("rerun with …")."""
        return ""

    def run_stage(self, stage: str, state: dict[str, Any], client: ModelClient) -> StageResult:
        raise NotImplementedError  # pragma: no cover

    def decide(self, gate: str, state: dict[str, Any], decision: Decision) -> StageResult:
        raise NotImplementedError  # pragma: no cover

    # --- forks (issue 33) ---------------------------------------------------------------------
    def fork_refusal(self, stage: str, gate: str, state: dict[str, Any]) -> str | None:
        """Why a run cannot be forked from this stage (or gate), in words; None when it can."""
        return None

    def replay_refusal(self, state: dict[str, Any]) -> str | None:
        """Why a run of this pattern cannot be replayed from its journal; None when it can."""
        return None

    def fork_edit(self, stage: str, gate: str, state: dict[str, Any]) -> ForkEdit | None:
        """What a person may edit when forking from this stage: the typed output of the stage
        before it (its schema, current value and a label), or None when nothing is."""
        return None

    def apply_fork_edit(self, stage: str, gate: str, state: dict[str, Any],
                        data: dict[str, Any], author: str = "") -> tuple[dict[str, Any],
                                                                        list[Any]]:
        """(state, records) with the edit applied; ``data`` is checked against ``fork_edit``'s
        schema here. Raises InvalidDecision with a message for the person."""
        edit = self.fork_edit(stage, gate, state)
        if edit is None:
            raise InvalidDecision("Nothing can be edited at this stage: fork it as it is.")
        try:
            value = edit.schema.model_validate(data)
        except ValidationError as exc:
            raise InvalidDecision(validation_text(exc)) from None
        return edit.apply(state, value, author)

    def decided_on(self, gate: str, state: dict[str, Any]) -> Any:
        """What a person decides on at ``gate`` (``state`` is the run's there): a fork's gate
        policy reuses an earlier decision only when this is byte-identical, so leave out what
        differs between two runs of the same input (timings, names made from the run's id).
        None: a decision there rests on more than the state and is never reused."""
        return state

    def fork_state(self, state: dict[str, Any], run_id: int) -> dict[str, Any]:
        """A fork's state once it has its id (names derived from it, like a branch)."""
        return self.bind_run(state, run_id)
