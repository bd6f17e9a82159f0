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
import sys
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from threading import RLock
from types import ModuleType

from ..llm import offline
from .base import Pattern

# Each pattern's key and the package (or module) whose ``PATTERN`` it is, in the order the
# pages list them. A package is imported when its pattern is first asked for: a command that
# runs one pattern (``manage.py review``) loads that one, a page that lists them all loads all.
PACKAGES: dict[str, str] = {
    "plan_execute": "agents_app.patterns.plan_execute",
    "plan_execute_review": "agents_app.patterns.plan_execute_review",
    "reflective": "agents_app.patterns.reflective",
    "debate": "agents_app.patterns.debate",
    "team_lead": "agents_app.patterns.team_lead",
    "rewoo": "agents_app.patterns.rewoo",
    "react": "agents_app.patterns.react",
    "vote": "agents_app.patterns.vote",
    "code_review": "reviews_app.pipeline.pattern",
    "apply_fixes": "reviews_app.fixes.apply_fixes",
}

_loaded: dict[str, Pattern] = {}
_extra: dict[str, Pattern] = {}  # set by a test for its length (``monkeypatch.setitem``)
_listeners: list[Callable[[Pattern], None]] = []
_lock = RLock()


def _load(key: str) -> Pattern:
    """The pattern under ``key``, its package imported and set up on first use (its offline
    replies taught to the built-in model, the patterns it builds on loaded first, every
    ``when_loaded`` callback run); KeyError for a key no package registers."""
    if key in _extra:
        return _extra[key]
    if key in _loaded:
        return _loaded[key]
    dotted = PACKAGES[key]
    with _lock:
        if key in _loaded:
            return _loaded[key]
        module = importlib.import_module(dotted)
        pattern: Pattern = module.PATTERN
        if pattern.name != key:
            raise ImportError(f"{dotted} registers {pattern.name!r}, listed as {key!r}")
        pattern.package = dotted
        if module.__file__ is None:
            raise ImportError(f"{dotted} is not a module of files")
        # A package's folder (its panel template, its files); a single module has none.
        pattern.directory = Path(module.__file__).parent if hasattr(module, "__path__") \
            else None
        pattern.source = Path(module.__file__)
        for base in getattr(pattern, "builds_on", ()):
            _load(base)
        _check_role_kinds(pattern)
        for schema, role, handler in pattern.offline_replies():
            offline.register(schema, handler, role=role)
        for listener in _listeners:
            listener(pattern)
        _loaded[key] = pattern
    return pattern


def _check_role_kinds(pattern: Pattern) -> None:
    """A role shared by patterns gets the same kind of model in each (its model setting is one
    per role), so a role's model can be read from whichever of them is loaded."""
    for other in _loaded.values():
        for role in set(pattern.roles) & set(other.roles):
            mine, theirs = (p.role_defaults.get(role, "default") for p in (pattern, other))
            if mine != theirs:
                raise ImportError(f"role {role!r} gets a {mine!r} model in {pattern.name!r} "
                                  f"but a {theirs!r} one in {other.name!r}")


def load_all() -> list[Pattern]:
    """Every registered pattern, each loaded (a worker or a server loads them at start)."""
    return [_load(key) for key in PATTERNS]


def when_loaded(callback: Callable[[Pattern], None]) -> None:
    """Call ``callback`` with each pattern as it loads, and now with those already loaded:
    the Django side registers each package's persistence and end-of-run hook this way."""
    with _lock:
        _listeners.append(callback)
        for pattern in list(_loaded.values()):
            callback(pattern)


class _Patterns(MutableMapping[str, Pattern]):
    """The registered patterns by key, in registry order. Listing the keys imports nothing;
    a pattern's package is imported when the pattern is first read."""

    def __getitem__(self, key: str) -> Pattern:
        if key not in _extra and key not in PACKAGES:
            raise KeyError(key)
        return _load(key)

    def __contains__(self, key: object) -> bool:
        return key in _extra or key in PACKAGES

    def __setitem__(self, key: str, pattern: Pattern) -> None:
        _extra[key] = pattern

    def __delitem__(self, key: str) -> None:
        if key not in _extra:
            raise KeyError(key)  # a registered pattern is removed from PACKAGES, not here
        del _extra[key]

    def __iter__(self) -> Iterator[str]:
        yield from PACKAGES
        yield from (key for key in _extra if key not in PACKAGES)

    def __len__(self) -> int:
        return len(PACKAGES.keys() | _extra.keys())


PATTERNS: MutableMapping[str, Pattern] = _Patterns()

offline.teach_all = load_all


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


def role_kind(role: str) -> str:
    """The kind of model ``role`` gets by default, read from a loaded pattern that has the role
    (the same in each: ``_check_role_kinds``): first those loaded, then those whose package is
    imported already (setting them up costs no import), then all; KeyError for a role no
    pattern has."""
    imported = [key for key, dotted in PACKAGES.items() if dotted in sys.modules]
    for load in ((), imported, PACKAGES):
        for key in load:
            _load(key)
        for pattern in [*_extra.values(), *_loaded.values()]:
            if role in pattern.roles:
                return pattern.role_defaults.get(role, "default")
    raise KeyError(role)
