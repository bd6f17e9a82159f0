"""What an experiment is, as data (issue 34): the grid — patterns with their options, model
assignments, repetitions — its evaluators, its gate policies, its budget and its baseline.
The launch form, ``manage.py experiment run SPEC.toml`` and the saved experiment all go
through ``GridSpec``, so a rule lives in one place. Plain pydantic: no Django here; what needs
the app (is the pattern known, is the model) is checked by ``service.check_spec``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

GatePolicy = Literal["approve", "reject", "wait"]
MAX_CELLS = 60
MAX_REPETITIONS = 50
MAX_RUNS = 5000


class SpecError(ValueError):
    """A specification that cannot run, with the reason in words."""


class PatternEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=40)
    options: dict[str, Any] = Field(default_factory=dict)
    label: str = Field(default="", max_length=80)


class Assignment(BaseModel):
    """A model per role, for every pattern of the grid: ``"*"`` names the model of every role
    not named otherwise (so one assignment fits patterns with different roles)."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(default="", max_length=80)
    models: dict[str, str] = Field(min_length=1)

    @field_validator("models")
    @classmethod
    def _filled(cls, value: dict[str, str]) -> dict[str, str]:
        for role, model in value.items():
            if not role.strip() or not str(model).strip():
                raise ValueError("every role needs a model name")
            if len(model) > 200:
                raise ValueError(f"the model name for {role!r} is longer than 200 characters")
        return {role.strip(): model.strip() for role, model in value.items()}

    def for_roles(self, roles: tuple[str, ...] | list[str]) -> dict[str, str]:
        """The model of each of ``roles``; a role neither named nor covered by "*" is left out
        (the caller says which)."""
        default = self.models.get("*")
        out = {}
        for role in roles:
            model = self.models.get(role, default)
            if model:
                out[role] = model
        return out

    def name(self) -> str:
        if self.label:
            return self.label
        return ", ".join(f"{r}={m}" if r != "*" else m for r, m in self.models.items())


class PairwiseSpec(BaseModel):
    """Two cells' outputs judged against each other once the grid has ended: for each task
    and repetition, the judge sees both orders (numbers as the results page shows them)."""

    model_config = ConfigDict(extra="forbid")

    rubric: str = Field(min_length=1, max_length=4000)
    cells: tuple[int, int]
    model: str = Field(default="offline/default", min_length=1, max_length=200)

    @field_validator("cells")
    @classmethod
    def _two(cls, value: tuple[int, int]) -> tuple[int, int]:
        if value[0] == value[1] or min(value) < 1:
            raise ValueError("two different cell numbers, counted from 1")
        return value


class GridSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00]*$")
    patterns: list[PatternEntry] = Field(min_length=1, max_length=MAX_CELLS)
    assignments: list[Assignment] = Field(min_length=1, max_length=MAX_CELLS)
    repetitions: int = Field(default=1, ge=1, le=MAX_REPETITIONS)
    evaluators: list[dict[str, Any]] = Field(default_factory=list)
    gates: dict[str, GatePolicy] = Field(default_factory=dict)
    reject_note: str = Field(default="Rejected by the experiment's gate policy.",
                             max_length=2000)
    budget_usd: Decimal | None = Field(default=None, ge=0, max_digits=10, decimal_places=4)
    concurrency: int = Field(default=8, ge=1, le=200)
    baseline: int | None = Field(default=None, ge=1)
    # Cells of one pattern and options that differ only in later roles' models share the
    # stages before the first call of a differing role: those cells' runs are forks.
    share_stages: bool = True
    pairwise: PairwiseSpec | None = None

    @property
    def cells(self) -> int:
        return len(self.patterns) * len(self.assignments)

    def check_size(self, tasks: int, cells: int | None = None) -> None:
        """``cells``: the cells left once identical ones are left out (all, when not given)."""
        n = self.cells if cells is None else cells
        if n > MAX_CELLS:
            raise SpecError(f"The grid has {n} cells; at most {MAX_CELLS}.")
        total = n * tasks * self.repetitions
        if total > MAX_RUNS:
            raise SpecError(f"The grid makes {total:,} runs ({n} cells × {tasks} tasks "
                            f"× {self.repetitions} repetitions); at most {MAX_RUNS:,}.")


def parse_spec(data: dict[str, Any]) -> GridSpec:
    """``data`` as a ``GridSpec``, or ``SpecError`` naming the first field that is wrong."""
    try:
        return GridSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        message = str(err.get("msg", "")).removeprefix("Value error, ")
        raise SpecError(f"{where}: {message}" if where else message) from None
