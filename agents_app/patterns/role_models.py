"""Which model each role gets: ``QUORUM_MODEL_<ROLE>`` when set, else the model of the kind
the role's pattern asks for ("default", "cheap" or "other-family"). The settings hold one
``RoleModels``; it reads a role's kind from the registry when the role is first looked up, so
loading the settings imports no pattern package."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

from . import registry

ENV_PREFIX = "QUORUM_MODEL_"


def overrides_from(environ: Mapping[str, str]) -> dict[str, str]:
    """The roles given a model of their own in the environment (``QUORUM_MODEL_PLANNER`` →
    ``planner``); empty values are not a setting."""
    return {name[len(ENV_PREFIX):].lower(): value.strip() for name, value in environ.items()
            if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX) and value.strip()}


class RoleModels(Mapping[str, str]):
    """Role → model name. Looking up one role loads at most the patterns needed to know its
    kind; listing them all (``keys``, ``values``, ``items``) loads every pattern."""

    def __init__(self, by_kind: Mapping[str, str], overrides: Mapping[str, str] | None = None):
        self.by_kind = dict(by_kind)
        self.overrides = dict(overrides_from(os.environ) if overrides is None else overrides)

    def __getitem__(self, role: str) -> str:
        if role in self.overrides:
            return self.overrides[role]
        return self.by_kind[registry.role_kind(role)]

    def __iter__(self) -> Iterator[str]:
        return iter(registry.role_defaults())

    def __len__(self) -> int:
        return len(registry.role_defaults())

    def possible(self) -> set[str]:
        """Every model some role could get, known without loading a pattern: each kind's
        model and each override (a superset of ``values()``)."""
        return set(self.by_kind.values()) | set(self.overrides.values())

    def __repr__(self) -> str:
        return f"RoleModels(by_kind={self.by_kind!r}, overrides={self.overrides!r})"
