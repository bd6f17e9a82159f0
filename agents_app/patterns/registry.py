"""The patterns Quorum offers: one line each.

Each line names a package (or module) whose ``PATTERN`` is the pattern: its options, roles,
prompts, offline replies, stage wording, run-page panel and live event kinds all live there.
The start form, the dashboard, the run page, the live channel, ``manage.py run_pattern``, the
role-model settings and the README's pattern table iterate this list; none of them names a
pattern. To add one, write its package (docs/ARCHITECTURE.md, "Adding a pattern") and add its
line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from threading import Lock
from types import ModuleType

from .base import Pattern

PACKAGES: tuple[str, ...] = (
    "agents_app.patterns.plan_execute",
    "agents_app.patterns.plan_execute_review",
    "agents_app.patterns.reflective",
    "agents_app.patterns.debate",
    "agents_app.patterns.team_lead",
    "agents_app.patterns.rewoo",
    "agents_app.patterns.react",
    "agents_app.patterns.vote",
    "reviews_app.pipeline.pattern",
    "reviews_app.pipeline.apply_fixes",
)

_loaded: dict[str, Pattern] = {}
_lock = Lock()


def _load() -> dict[str, Pattern]:
    if _loaded:
        return _loaded
    with _lock:
        if not _loaded:
            from ..llm import offline

            found: dict[str, Pattern] = {}
            for dotted in PACKAGES:
                module = importlib.import_module(dotted)
                pattern: Pattern = module.PATTERN
                if pattern.name in found:
                    raise ImportError(f"two patterns are called {pattern.name!r}")
                pattern.package = dotted
                if module.__file__ is None:
                    raise ImportError(f"{dotted} is not a module of files")
                # A package's folder (its panel template, its files); a single module has none.
                pattern.directory = Path(module.__file__).parent if hasattr(module, "__path__") \
                    else None
                pattern.source = Path(module.__file__)
                for schema, role, handler in pattern.offline_replies():
                    offline.register(schema, handler, role=role)
                found[pattern.name] = pattern
            _loaded.update(found)
    return _loaded


class _Patterns(MutableMapping[str, Pattern]):
    """The registered patterns by key, in registry order; loaded on first use. (Tests may set
    a throwaway pattern for the length of one test, with ``monkeypatch.setitem``.)"""

    def __getitem__(self, key: str) -> Pattern:
        return _load()[key]

    def __setitem__(self, key: str, pattern: Pattern) -> None:
        _load()[key] = pattern

    def __delitem__(self, key: str) -> None:
        del _load()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(_load())

    def __len__(self) -> int:
        return len(_load())


PATTERNS: MutableMapping[str, Pattern] = _Patterns()


def part_of(pattern: Pattern, name: str) -> ModuleType | None:
    """The package's optional part ``name`` (``panel``, ``urls``, ``persist``, ``command``), or
    None when it has none. An import error inside that part is raised, not hidden."""
    dotted = f"{pattern.package}.{name}"
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError as exc:
        if exc.name != dotted:
            raise
        return None


def get_pattern(name: str) -> Pattern:
    return PATTERNS[name]


def task_patterns() -> list[Pattern]:
    """The patterns started from a task on the dashboard's form (the others have pages of
    their own: a change needs a repository, a review a diff)."""
    return [p for p in PATTERNS.values() if p.starts_from_task]


def pattern_label(name: str) -> str:
    """A pattern's name in words for people (``plan_execute`` → "Plan and execute"); a key
    no pattern registers is shown with spaces, never as an error."""
    pattern = PATTERNS.get(name or "")
    return pattern.label if pattern and pattern.label else (name or "").replace("_", " ")


def role_defaults() -> dict[str, str]:
    """Every role of every pattern with the kind of model it gets by default ("default",
    "cheap" or "other-family"), for the settings that route roles to models."""
    roles: dict[str, str] = {}
    for pattern in PATTERNS.values():
        for role in pattern.roles:
            roles.setdefault(role, pattern.role_defaults.get(role, "default"))
    return roles
