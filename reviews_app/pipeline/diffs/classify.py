"""What kind of file a path is: its language (Pygments, by file name only) and whether it is
generated or vendored (by name, or by a marker at the top of the new file)."""

from __future__ import annotations

import functools

from pygments.lexers import find_lexer_class_for_filename

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
        lexer = find_lexer_class_for_filename(basename)
    except Exception:             # a broken Pygments plugin must not break the review
        return "", "text"
    if lexer is None:
        return "", "text"
    return lexer.name, (lexer.aliases[0] if lexer.aliases else "text")


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
