"""The parser's limits, its result and its one exception, and the texts it shows the user
(errors, and the details of coverage entries)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 1_000_000        # diff text (UTF-8 bytes) of the reviewed files; cut point
    max_files: int = 300              # files reviewed; the rest get over_file_limit
    max_lines_per_file: int = 2000    # changed (+/-) lines kept per file; beyond -> clipped
    heavy_max_lines: int = 1500       # heavy mode only when content has <= this many lines


class DiffError(ValueError):
    """The diff cannot be reviewed; the message is shown to the user as it is."""


@dataclass
class Prepared:
    files: list[dict] = field(default_factory=list)
    coverage: list[dict] = field(default_factory=list)
    total_files: int = 0


EMPTY_MESSAGE = ("The diff is empty. Paste the output of `git diff` or upload a .diff/.patch "
                 "file.")
NOT_A_DIFF_MESSAGE = ("This does not look like a unified diff: no file headers (`--- a/…`, "
                      "`+++ b/…`) or hunks (`@@ … @@`) were found.")
NO_HEADERS_MESSAGE = ("This diff has hunks (`@@ … @@`) but no file headers (`--- a/…`, "
                      "`+++ b/…`), so the changed files cannot be named. Paste the complete "
                      "output of `git diff`, including the header lines of each file.")

# The parser only hands the file on; once the reviewers have run, the pattern replaces this
# entry with what really examined the file (pipeline/coverage.py).
MODEL_ONLY_DETAIL = ("Not Python: left to the analyzers that read its language and to the "
                     "models; the coverage says which examined it once they have run.")
BINARY_DETAIL = "Binary file: there is no text to review."
DELETED_DETAIL = "File deleted: nothing new to review."
GENERATED_NAME_DETAIL = ("Generated or vendored file (lock file, minified file, source map, or "
                         "under node_modules/, vendor/ or dist/): not reviewed.")


def cut_detail(reason: str, limits: Limits) -> str:
    if reason == "over_file_limit":
        return (f"Not reviewed: the review stops after {limits.max_files} files; this file "
                "comes later in the diff.")
    return (f"Not reviewed: the files before it already use the review's budget of "
            f"{limits.max_bytes:,} bytes of diff text.")


def coverage_entry(path: str, reason: str, detail: str, reviewed: bool = False) -> dict:
    return {"path": path, "reason": reason, "detail": detail, "reviewed": reviewed}
