"""The fake provider's data: repositories of commits, pull requests and what was posted on
them, plus the pieces every dialect shares (diffs between two commits, pagination, answers)."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import urllib.parse
from dataclasses import dataclass, field

Content = str | bytes


def fake_sha(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()  # noqa: S324 - test ids only


def is_binary(c: Content | None) -> bool:
    if isinstance(c, bytes):
        if b"\x00" in c:
            return True
        try:
            c.decode("utf-8")
        except UnicodeDecodeError:
            return True
    return False


def text_of(c: Content | None) -> str:
    if c is None:
        return ""
    return c.decode("utf-8") if isinstance(c, bytes) else c


def hunks(old: Content | None, new: Content | None) -> str:
    """The hunks ("@@" onwards) turning ``old`` into ``new``, like a provider's ``patch``."""
    lines = list(difflib.unified_diff(text_of(old).splitlines(keepends=True),
                                      text_of(new).splitlines(keepends=True), n=3))
    out = "".join(lines[2:])
    return out if out.endswith("\n") or not out else out + "\n"


def make_diff(base_files: dict[str, Content], files: dict[str, Content | None]) -> str:
    """A git-style unified diff turning ``base_files`` into ``files`` (None = removed)."""
    out = []
    for path in sorted(set(base_files) | set(files)):
        old, new = base_files.get(path), files.get(path, base_files.get(path))
        if old == new:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        if is_binary(new) or is_binary(old):
            out.append(f"Binary files a/{path} and b/{path} differ\n")
            continue
        if old is None:
            out.append("new file mode 100644\n")
        elif new is None:
            out.append("deleted file mode 100644\n")
        a = f"a/{path}" if old is not None else "/dev/null"
        b = f"b/{path}" if new is not None else "/dev/null"
        out.extend(difflib.unified_diff(text_of(old).splitlines(keepends=True),
                                        text_of(new).splitlines(keepends=True), a, b))
    return "".join(out)


@dataclass
class Change:
    """One changed file between two commits, as the dialects describe it."""

    path: str
    status: str                 # added / removed / modified / renamed
    old_path: str | None
    patch: str                  # hunks; "" for binary files
    binary: bool
    additions: int
    deletions: int


def changes(old: dict[str, Content], new: dict[str, Content],
            renames: dict[str, str] | None = None) -> list[Change]:
    renames = {n: o for n, o in (renames or {}).items() if o in old and o not in new and n in new}
    out = []
    for path in sorted(set(old) | set(new)):
        if path in renames.values():
            continue
        before = old.get(renames.get(path, path))
        after = new.get(path)
        if before == after and path not in renames:
            continue
        status = ("renamed" if path in renames else "added" if before is None
                  else "removed" if after is None else "modified")
        binary = is_binary(before) or is_binary(after)
        patch = "" if binary else hunks(before, after)
        lines = patch.splitlines()
        out.append(Change(path=path, status=status, old_path=renames.get(path), patch=patch,
                          binary=binary,
                          additions=sum(1 for x in lines if x.startswith("+")),
                          deletions=sum(1 for x in lines if x.startswith("-"))))
    return out


def render(found: list[Change]) -> str:
    """``changes()`` as one git diff (renames included), like a provider's ``.diff``."""
    out = []
    for c in found:
        old = c.old_path or c.path
        out.append(f"diff --git a/{old} b/{c.path}\n")
        if c.status == "renamed":
            out.append(f"similarity index 90%\nrename from {old}\nrename to {c.path}\n")
        elif c.status in ("added", "removed"):
            out.append(f"{'new' if c.status == 'added' else 'deleted'} file mode 100644\n")
        if c.binary:
            out.append(f"Binary files a/{old} and b/{c.path} differ\n")
        elif c.patch:
            a = "/dev/null" if c.status == "added" else f"a/{old}"
            b = "/dev/null" if c.status == "removed" else f"b/{c.path}"
            out.append(f"--- {a}\n+++ {b}\n{c.patch}")
    return "".join(out)


def new_lines(patch: str) -> set[int]:
    """New-file line numbers a patch shows (added or context): where a comment may go."""
    out: set[int] = set()
    line = 0
    for row in patch.splitlines():
        if row.startswith("@@"):
            try:
                line = int(row.split("+", 1)[1].split(",")[0].split(" ")[0])
            except (IndexError, ValueError):
                line = 0
            continue
        if row.startswith("+") or row.startswith(" "):
            out.add(line)
            line += 1
    return out


@dataclass
class Pull:
    number: int
    title: str
    author: str
    base_ref: str
    head_ref: str
    base_sha: str
    head_sha: str
    state: str = "open"         # open / closed / merged
    draft: bool = False
    renames: dict[str, str] = field(default_factory=dict)   # new path -> old path
    diff: str | None = None      # GitHub's diff media type answer, when set explicitly
    statuses: dict[str, str] = field(default_factory=dict)  # listed status overrides
    versions: list[dict] = field(default_factory=list)       # GitLab diff versions
    comments: list[dict] = field(default_factory=list)       # conversation comments
    review_comments: list[dict] = field(default_factory=list)  # inline comments
    reviews: list[dict] = field(default_factory=list)        # every review posted
    approvals: list[dict] = field(default_factory=list)      # GitLab approve / unapprove


@dataclass
class Repo:
    name: str                   # "owner/name" (GitLab: the full project path)
    commits: dict[str, dict[str, Content]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    pulls: dict[int, Pull] = field(default_factory=dict)
    # Commit statuses, every one posted, per sha: {state, context (GitLab: name), description,
    # target_url, author}; GitLab's keep its state machine's current state.
    statuses: dict[str, list[dict]] = field(default_factory=dict)
    # GitHub check runs: {id, name, head_sha, status, conclusion, output, author}
    check_runs: list[dict] = field(default_factory=list)


_IDS = itertools.count(5001)


def next_id() -> int:
    return next(_IDS)


@dataclass
class Answer:
    status: int
    body: object = None                       # JSON-able, str or bytes
    headers: dict[str, str] = field(default_factory=dict)
    ctype: str = "application/json"

    def data(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return b"" if self.body is None and self.status == 204 else json.dumps(self.body).encode()


@dataclass
class Request:
    method: str
    path: str                                 # as sent, with the query string
    route: str                                # unquoted, without the query string
    query: dict[str, str]
    headers: dict[str, str] = field(default_factory=dict)   # lower-cased names
    body: object = None                       # the JSON body of POST/PUT/PATCH, if any
    provider: str = ""
    base_url: str = ""

    @property
    def parts(self) -> list[str]:
        """The path's segments, each unquoted on its own (a quoted ``/`` stays inside)."""
        raw = urllib.parse.urlsplit(self.path).path
        return [urllib.parse.unquote(p) for p in raw.split("/")[1:]]


def paginate(req: Request, items: list, *, size_key: str, default: int, max_size: int,
             gitlab: bool = False) -> Answer:
    """One page of ``items`` with the provider's pagination headers."""
    try:
        size = max(1, min(max_size, int(req.query.get(size_key, default))))
        page = max(1, int(req.query.get("page", "1")))
    except ValueError:
        return Answer(400 if gitlab else 422, {"message": "Validation Failed"})
    chunk = items[(page - 1) * size: page * size]
    last = max(1, -(-len(items) // size))
    headers = {}
    links = []
    split = urllib.parse.urlsplit(req.base_url + req.path)
    query = dict(req.query)
    for rel, n in (("next", page + 1), ("last", last)):
        if rel == "next" and page >= last:
            continue
        query.update({"page": str(n), size_key: str(size)})
        links.append(f'<{urllib.parse.urlunsplit(split._replace(query=urllib.parse.urlencode(query)))}>; rel="{rel}"')
    if links:
        headers["Link"] = ", ".join(links)
    if gitlab:
        headers.update({"X-Page": str(page), "X-Per-Page": str(size), "X-Total": str(len(items)),
                        "X-Total-Pages": str(last),
                        "X-Next-Page": str(page + 1) if page < last else ""})
    else:
        headers["X-Total-Count"] = str(len(items))
    return Answer(200, chunk, headers)
