"""What kind of file a path is: its language (Pygments, by file name only) and whether it is
generated or vendored (by name, or by a marker at the top of the new file)."""

from __future__ import annotations

import fnmatch
import functools
import re

from pygments.lexers import find_lexer_class
from pygments.lexers._mapping import LEXERS

LOCK_FILES = frozenset({
    "package-lock.json", "yarn.lock", "poetry.lock", "Pipfile.lock", "uv.lock", "Cargo.lock",
    "go.sum", "composer.lock", "pnpm-lock.yaml", "npm-shrinkwrap.json",
})
GENERATED_SUFFIXES = (".min.js", ".min.css", ".map")
GENERATED_DIRS = frozenset({"node_modules", "vendor", "dist"})
GENERATED_MARKERS = ("@generated", "DO NOT EDIT")
GENERATED_HEAD_LINES = 5          # the marker must sit in the first lines of the new file


@functools.lru_cache(maxsize=4096)
def language_of(basename: str) -> tuple[str, str]:
    # The lexer's class names the language: making a lexer (compiling its token regexes)
    # costs more than the lookup.
    try:
        lexer = lexer_class_for(basename)
    except Exception:             # a broken lexer module must not break the review
        return "", "text"
    if lexer is None:
        return "", "text"
    return lexer.name, (lexer.aliases[0] if lexer.aliases else "text")


def lexer_class_for(basename: str):
    """Pygments' ``find_lexer_class_for_filename`` (no code given) over its built-in lexers,
    without its first-call cost: it compiles a regular expression for each of ~930 file name
    patterns and reads every installed package's entry points for plugin lexers, 70 ms of a
    0.7 s ``manage.py review``. Here the patterns that are a plain name or ``*`` and a plain
    suffix (all but a dozen) are compared as strings, the rest go through fnmatch as before,
    and the candidates are ranked as Pygments ranks them. Plugin lexers are not consulted:
    a file's language does not depend on what else is installed beside Quorum."""
    exact, suffixes, others = _patterns()
    found = list(exact.get(basename, ()))
    found += [e for suffix, entries in suffixes.items() if basename.endswith(suffix)
              for e in entries]
    found += [(name, glob) for name, glob in others if _glob(glob).match(basename)]
    matches = [(find_lexer_class(name), glob) for name, glob in found]
    if not matches:
        return None

    def rating(match):
        cls, glob = match
        return cls.priority + (0.5 if "*" not in glob else 0), cls.__name__

    return max(matches, key=rating)[0]


@functools.cache
def _patterns():
    exact: dict[str, list] = {}
    suffixes: dict[str, list] = {}
    others = []
    for _module, name, _aliases, globs, _mimetypes in LEXERS.values():
        for glob in globs:
            if not any(c in glob for c in "*?["):
                exact.setdefault(glob, []).append((name, glob))
            elif glob.startswith("*") and not any(c in glob[1:] for c in "*?["):
                suffixes.setdefault(glob[1:], []).append((name, glob))
            else:
                others.append((name, glob))
    return exact, suffixes, others


@functools.cache
def _glob(glob: str) -> re.Pattern:
    return re.compile(fnmatch.translate(glob))


def generated_by_name(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (name in LOCK_FILES or name.lower().endswith(GENERATED_SUFFIXES)
            or any(part in GENERATED_DIRS for part in parts[:-1]))


def generated_by_content(hunks: list[dict], content: str | None) -> bool:
    if content is not None:
        head = content.split("\n", GENERATED_HEAD_LINES)[:GENERATED_HEAD_LINES]
    else:
        head = [ln["text"] for hunk in hunks for ln in hunk["lines"]
                if ln["new"] is not None and ln["new"] <= GENERATED_HEAD_LINES]
    return any(marker in text for text in head for marker in GENERATED_MARKERS)
