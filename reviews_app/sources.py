"""Where a review's input comes from: a local git range or a GitHub pull request.

Both produce a :class:`Source`: a unified diff plus, where it can be read, the full new text
of each changed file (for "heavy mode"). Every input here is untrusted: the repository path,
the revision range and the pull request URL come from a web form, and the answers come from
git and from a remote server. So:

* local paths must resolve (symlinks included) inside one of the configured roots, and so must
  the repository's top level and git directory;
* revisions must match a strict pattern (no leading ``-``, no shell, argument lists only) and
  are turned into full SHAs before any other git command sees them;
* git runs with a timeout, no prompts, no system config, no external diff or textconv;
* every read is capped in bytes and files, and a too-large diff is cut at a file boundary and
  reported in ``meta`` (``truncated`` / ``truncated_files``);
* the GitHub token is sent in a header only and never appears in an error message.

This module has no Django imports: the caller passes the settings in.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from agents_app.patterns import safe_json
from agents_app.repos import roots as roots_mod

__all__ = ["SourceError", "Source", "allowed_repo", "git_range", "parse_pr_url", "github_pr"]


class SourceError(ValueError):
    """A problem with the review's source; the message is shown to the user as-is."""


@dataclass
class Source:
    kind: str  # "git" | "github"
    label: str
    diff_text: str
    contents: dict[str, str | None] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)


# --- shared helpers ------------------------------------------------------------------------------
_FILE_BOUNDARY = b"\ndiff --git "


def _count_files(diff: bytes) -> int:
    return diff.count(_FILE_BOUNDARY) + (1 if diff.startswith(b"diff --git ") else 0)


def _cut_diff(data: bytes, max_bytes: int, total_files: int) -> tuple[bytes, dict]:
    """Keep whole files only, at most ``max_bytes``; returns the kept bytes and meta to add."""
    if len(data) <= max_bytes:
        return data, {}
    # the last file boundary whose newline still fits: data[:cut + 1] is <= max_bytes long
    cut = data.rfind(_FILE_BOUNDARY, 0, max(max_bytes - 1 + len(_FILE_BOUNDARY), 0))
    kept = data[: cut + 1] if cut >= 0 else b""
    total = max(total_files, _count_files(data))
    dropped = max(total - _count_files(kept), 1)
    return kept, {"truncated": True, "truncated_files": dropped}


def _text_or_none(data: bytes) -> str | None:
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --- local git -----------------------------------------------------------------------------------
TURNED_OFF = roots_mod.TURNED_OFF
_REV = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/~^-]{0,199}")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_GIT_CONFIG = ["-c", "core.quotepath=off", "-c", "diff.external=", "-c", "core.fsmonitor=false",
               "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false"]
# Variables that would point git at another repository, index or object store.
_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                 "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
                 "GIT_CEILING_DIRECTORIES", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_CONFIG",
                 "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", GIT_OPTIONAL_LOCKS="0",
               GIT_LITERAL_PATHSPECS="1", LC_ALL="C")
    return env


def _git_cmd(cwd: Path, args: list[str]) -> list[str]:
    return ["git", "-C", str(cwd), *_GIT_CONFIG, *args]


def _first_line(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else "git failed without a message"


def _git(cwd: Path, args: list[str], *, timeout: float, stdin: bytes | None = None) -> bytes:
    """Run git (argument list, no shell) and return stdout; SourceError on failure."""
    try:
        proc = subprocess.run(  # noqa: S603 - fixed argv, no shell, revisions validated
            _git_cmd(cwd, args), input=stdin, capture_output=True, timeout=timeout,
            env=_git_env(), check=False)
    except subprocess.TimeoutExpired:
        raise SourceError(f"git took longer than {timeout:g}s in {cwd}; try a smaller range.") from None
    except OSError as exc:
        raise SourceError(f"Could not run git: {exc.strerror or exc}.") from None
    if proc.returncode != 0:
        raise SourceError(f"git failed in {cwd}: {_first_line(proc.stderr)}")
    return proc.stdout


def _git_capped(cwd: Path, args: list[str], *, timeout: float, limit: int) -> tuple[bytes, bool]:
    """Like :func:`_git` but stops reading stdout after ``limit`` bytes (returns truncated=True)."""
    try:
        proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell, revisions validated
            _git_cmd(cwd, args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=_git_env())
    except OSError as exc:
        raise SourceError(f"Could not run git: {exc.strerror or exc}.") from None
    timed_out = threading.Event()

    def _kill() -> None:
        timed_out.set()
        proc.kill()

    err = bytearray()

    def _drain_stderr() -> None:
        for chunk in iter(lambda: proc.stderr.read(8192), b""):
            if len(err) < 65536:
                err.extend(chunk)

    timer = threading.Timer(timeout, _kill)
    drainer = threading.Thread(target=_drain_stderr, daemon=True)
    timer.start()
    drainer.start()
    out = bytearray()
    truncated = False
    try:
        while True:
            chunk = proc.stdout.read1(65536)
            if not chunk:
                break
            out.extend(chunk)
            if len(out) > limit:
                truncated = True
                proc.kill()
                break
        proc.wait()
        drainer.join(timeout=5)
    finally:
        timer.cancel()
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if timed_out.is_set():
        raise SourceError(f"git took longer than {timeout:g}s in {cwd}; try a smaller range.")
    if not truncated and proc.returncode != 0:
        raise SourceError(f"git failed in {cwd}: {_first_line(bytes(err))}")
    return bytes(out), truncated


def allowed_repo(path: str, roots: list[str]) -> Path:
    """The top level of the git work tree at ``path``, if it lies inside one of ``roots``."""
    try:
        return roots_mod.allowed_repo(path, roots)
    except roots_mod.RepoRootError as exc:
        raise SourceError(str(exc)) from None


RANGE_USAGE = ("Give a range like main..feature or main...feature: the changes on feature since "
               "it left main, as a pull request shows them.")


def _parse_range(rng: str) -> tuple[str, str]:
    """(base, head) from ``BASE..HEAD`` or ``BASE...HEAD``; both mean the same here."""
    rng = (rng or "").strip()
    if not rng:
        raise SourceError(RANGE_USAGE)
    sides = rng.split("...") if "..." in rng else rng.split("..")
    if len(sides) == 1 and _REV.fullmatch(rng):
        raise SourceError(f"{rng!r} is a single revision, not a range. {RANGE_USAGE} For the "
                          f"last commit alone, give {rng}~1..{rng}.")
    if len(sides) != 2:
        raise SourceError(f"{rng!r} is not a range. {RANGE_USAGE}")
    for side in sides:
        if not _REV.fullmatch(side):
            shown = side if side else "(empty)"
            raise SourceError(f"{shown!r} is not an accepted revision in {rng!r}: use a branch, "
                              "tag or commit (letters, digits and . _ / ~ ^ -, not starting "
                              f"with - or .). {RANGE_USAGE}")
    return sides[0], sides[1]


def _resolve_rev(top: Path, rev: str, rng: str, timeout: float) -> str:
    try:
        # --end-of-options: whatever the pattern lets through is never read as an option
        out = _git(top, ["rev-parse", "--verify", "--quiet", "--end-of-options",
                         f"{rev}^{{commit}}"], timeout=timeout)
    except SourceError:
        raise SourceError(f"Unknown revision {rev!r} in {top.name} (range {rng}).") from None
    sha = out.decode("ascii", "replace").strip()
    if not _SHA.fullmatch(sha):
        raise SourceError(f"Unknown revision {rev!r} in {top.name} (range {rng}).")
    return sha


def _changed_paths(raw: bytes) -> list[tuple[str, str]]:
    """(status letter, new path) pairs from ``git diff --name-status -z``."""
    tokens = raw.split(b"\x00")
    out, i = [], 0
    while i < len(tokens) and tokens[i]:
        status = tokens[i].decode("ascii", "replace")
        n_paths = 2 if status[:1] in ("R", "C") else 1
        paths = tokens[i + 1: i + 1 + n_paths]
        i += 1 + n_paths
        if len(paths) != n_paths:
            break
        out.append((status[:1], paths[-1].decode("utf-8", "surrogateescape")))
    return out


def _read_blobs(top: Path, head: str, paths: list[str], *, max_file_bytes: int,
                timeout: float) -> dict[str, str | None]:
    """Text of ``head:path`` for each path (None when missing, binary, too big or not UTF-8).

    Two git processes whatever the number of files: ``cat-file --batch-check`` for the type and
    size, then ``cat-file --batch`` fed only the hex object ids of the blobs worth reading.
    """
    result: dict[str, str | None] = dict.fromkeys(paths)
    askable = [p for p in paths if "\n" not in p and "\r" not in p]
    if not askable:
        return result
    query = b"".join(f"{head}:{p}\n".encode("utf-8", "surrogateescape") for p in askable)
    checks = _git(top, ["cat-file", "--batch-check"], stdin=query, timeout=timeout)
    wanted: dict[str, list[str]] = {}
    for p, line in zip(askable, checks.decode("utf-8", "replace").splitlines(), strict=False):
        parts = line.split(" ")
        if len(parts) != 3 or parts[1] != "blob" or not _SHA.fullmatch(parts[0]):
            continue
        if not parts[2].isdigit() or int(parts[2]) > max_file_bytes:
            continue
        wanted.setdefault(parts[0], []).append(p)
    if not wanted:
        return result
    data = _git(top, ["cat-file", "--batch"], stdin="".join(f"{s}\n" for s in wanted).encode(),
                timeout=timeout)
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        header = data[pos:nl].decode("ascii", "replace").split(" ")
        pos = nl + 1
        if len(header) != 3 or not header[2].isdigit():
            continue  # "<id> missing"
        size = int(header[2])
        blob = data[pos: pos + size]
        pos += size + 1
        text = _text_or_none(blob)
        for p in wanted.get(header[0], []):
            result[p] = text
    return result


MAX_COMMITS_LISTED = 250  # commits recorded for the page; the count says how many there were


def _merge_base(top: Path, base: str, head: str, base_rev: str, head_rev: str, rng: str,
                timeout: float) -> str:
    """The commit ``head`` left ``base`` at (what a pull request diffs against)."""
    try:
        out = _git(top, ["merge-base", base, head], timeout=timeout)
    except SourceError as exc:
        if str(exc).startswith("git took longer"):
            raise
        raise SourceError(f"{base_rev} and {head_rev} have no commit in common in {top.name} "
                          f"(range {rng}), so there is no change of one against the "
                          "other to review.") from None
    sha = out.decode("ascii", "replace").strip().splitlines()[:1]
    if not sha or not _SHA.fullmatch(sha[0]):
        raise SourceError(f"{base_rev} and {head_rev} have no commit in common in {top.name} "
                          f"(range {rng}).")
    return sha[0]


def _commits(top: Path, merge_base: str, head: str, timeout: float) -> tuple[list[dict], int]:
    """The commits on ``head`` since ``merge_base``, oldest first (the newest
    MAX_COMMITS_LISTED of them), and how many there are."""
    count = _git(top, ["rev-list", "--count", f"{merge_base}..{head}"], timeout=timeout)
    total = int(count.strip() or 0)
    # --max-count picks the newest commits before --reverse puts them oldest first
    raw = _git(top, ["log", "--no-color", "--no-show-signature", "--reverse",
                     f"--max-count={MAX_COMMITS_LISTED}", "--format=%H%x00%an%x00%s%x00", f"{merge_base}..{head}"], timeout=timeout)
    fields = raw.decode("utf-8", "replace").split("\x00")
    commits = []
    for i in range(0, len(fields) - 3, 3):
        sha = fields[i].strip()
        if _SHA.fullmatch(sha):
            commits.append({"sha": sha, "short": sha[:7], "author": fields[i + 1][:200],
                            "subject": fields[i + 2][:300]})
    return commits, total


def git_range(repo: str, rng: str, *, roots: list[str], max_bytes: int = 5_000_000,
              max_files: int = 300, max_file_bytes: int = 500_000, timeout: float = 30) -> Source:
    """The changes on HEAD since it left BASE, like a pull request (``BASE..HEAD`` and
    ``BASE...HEAD`` alike): the diff from their merge base to HEAD, the new file contents and
    the commits included. Diffing the two tips instead would show BASE's newer commits
    reversed, as if the branch undid them."""
    top = allowed_repo(repo, roots)
    base_rev, head_rev = _parse_range(rng)
    rng = f"{base_rev}..{head_rev}"
    base = _resolve_rev(top, base_rev, rng, timeout)
    head = _resolve_rev(top, head_rev, rng, timeout)
    merge_base = _merge_base(top, base, head, base_rev, head_rev, rng, timeout)
    commits, total_commits = _commits(top, merge_base, head, timeout)
    if not total_commits:
        raise SourceError(f"{head_rev} has no commits that {base_rev} does not already have "
                          f"(range {rng} in {top.name}): nothing to review. Check the order: "
                          "BASE..HEAD, the branch with the changes last.")

    names = _git(top, ["diff", "--no-ext-diff", "--no-textconv", "--no-color", "--name-status",
                       "-z", "-M", merge_base, head], timeout=timeout)
    changed = _changed_paths(names)
    raw, _ = _git_capped(top, ["diff", "--no-ext-diff", "--no-textconv", "--no-color",
                               "--submodule=short", "--src-prefix=a/", "--dst-prefix=b/",
                               "-M", "--full-index", merge_base, head],
                         timeout=timeout, limit=max_bytes)
    kept, cut_meta = _cut_diff(raw, max_bytes, len(changed))

    contents: dict[str, str | None] = {}
    to_read: list[str] = []
    for status, path in changed:
        if status == "D":
            contents[path] = None
        elif len(to_read) < max_files:
            to_read.append(path)
    contents.update(_read_blobs(top, head, to_read, max_file_bytes=max_file_bytes,
                                timeout=timeout))

    meta = {"repo": str(top), "base": base, "merge_base": merge_base, "head": head,
            "range": rng, "changed_files": len(changed), "commits": commits,
            "commits_total": total_commits, **cut_meta}
    return Source(kind="git", label=f"{top.name} {merge_base[:7]}..{head[:7]}",
                  diff_text=kept.decode("utf-8", "replace"), contents=contents, meta=meta)


# --- GitHub --------------------------------------------------------------------------------------
PR_URL_HELP = "Give a pull request URL like https://github.com/owner/repo/pull/123."
GITHUB_SETUP_HELP = ("Set GITHUB_TOKEN to review GitHub pull requests (a fine-grained token with read "
            "access to pull requests and contents).")
_PR_URL = re.compile(
    r"https://(?:www\.)?github\.com/([A-Za-z0-9_.-]{1,100})/([A-Za-z0-9_.-]{1,100})"
    r"/pull/([1-9][0-9]{0,9})(?:/files)?/?(?:[?#][^\s]*)?", re.IGNORECASE)
_TOKEN = re.compile(r"[\x21-\x7e]{1,1000}")
_POOL = 8


def parse_pr_url(url: str) -> tuple[str, str, int]:
    """(owner, repo, number) from a github.com pull request URL."""
    url = (url or "").strip()
    m = _PR_URL.fullmatch(url) if len(url) <= 2000 else None
    if not m:
        raise SourceError(PR_URL_HELP)
    owner, repo, number = m.group(1), m.group(2), int(m.group(3))
    if set(owner) == {"."} or set(repo) == {"."}:  # "." / ".." would walk the API's path
        raise SourceError(PR_URL_HELP)
    return owner, repo, number


def _safe_path(path: object) -> bool:
    if not isinstance(path, str) or not path or len(path) > 4096:
        return False
    return all(seg not in ("", ".", "..") for seg in path.split("/")) and "\x00" not in path


class _GitHub:
    """A few GitHub REST calls with the error handling users need to see."""

    def __init__(self, api: str, token: str, owner: str, repo: str, number: int, timeout: float):
        self.api, self.token = api, token
        self.owner, self.repo, self.number = owner, repo, number
        self.base = (f"{api}/repos/{urllib.parse.quote(owner, safe='')}/"
                     f"{urllib.parse.quote(repo, safe='')}")
        self.client = httpx.Client(
            timeout=httpx.Timeout(timeout), follow_redirects=True, max_redirects=3,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
                     "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "quorum-review"})

    def close(self) -> None:
        self.client.close()

    def scrub(self, text: str) -> str:
        return text.replace(self.token, "***") if self.token else text

    def unreachable(self, exc: Exception) -> SourceError:
        detail = self.scrub(str(exc) or type(exc).__name__)[:200]
        return SourceError(f"Could not reach GitHub at {self.api}: {detail} (no network?)")

    def failure(self, resp: httpx.Response, what: str, body: bytes) -> SourceError:
        """The error for a non-2xx answer, given (the start of) its body."""
        status = resp.status_code
        message = ""
        try:
            data = safe_json.loads(body)
            if isinstance(data, dict) and isinstance(data.get("message"), str):
                message = self.scrub(data["message"])[:200]
        except ValueError:
            pass
        h = resp.headers
        limited = h.get("x-ratelimit-remaining") == "0" or "retry-after" in h or (
            "rate limit" in message.lower())
        if status == 401:
            return SourceError("GitHub rejected the token (401 Unauthorized): check that "
                               "GITHUB_TOKEN is valid and has not expired.")
        if status in (403, 429) and limited:
            when = "in a while"
            reset = h.get("x-ratelimit-reset", "")
            retry = h.get("retry-after", "")
            if reset.isdigit():
                at = dt.datetime.fromtimestamp(int(reset), tz=dt.UTC)
                when = f"after {at:%Y-%m-%d %H:%M:%S} UTC"
            elif retry.isdigit():
                when = f"in {int(retry)} seconds"
            return SourceError(f"GitHub's API rate limit was reached; try again {when}.")
        if status == 403:
            return SourceError(f"GitHub refused access to {what} (403): the token may lack read "
                               "access to pull requests and contents of "
                               f"{self.owner}/{self.repo}." + (f" GitHub said: {message}"
                                                               if message else ""))
        if status == 404:
            return SourceError(f"Pull request not found (or the token cannot see it): "
                               f"{self.owner}/{self.repo}#{self.number}.")
        if status == 406:
            return SourceError(f"GitHub will not produce {what}"
                               + (f": {message}" if message else ".")
                               + " Try a local git range instead.")
        return SourceError(f"GitHub answered {status} for {what}"
                           + (f": {message}" if message else "."))

    def get_json(self, url: str, what: str, params: dict | None = None):
        try:
            resp = self.client.get(url, params=params)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self.unreachable(exc) from None
        if resp.status_code != 200:
            raise self.failure(resp, what, resp.content[:65536])
        try:
            return resp.json()
        except ValueError:
            raise SourceError(f"GitHub sent something that is not JSON for {what}.") from None

    def get_capped(self, url: str, what: str, accept: str, limit: int,
                   *, missing_ok: bool = False) -> tuple[bytes | None, bool]:
        """(body, over_limit): reading stops just past ``limit`` bytes. With ``missing_ok``
        (file contents) a 404/422 gives (None, False) and a body announced as longer than
        ``limit`` is not read at all."""
        try:
            with self.client.stream("GET", url, headers={"Accept": accept}) as resp:
                if resp.status_code != 200:
                    if missing_ok and resp.status_code in (404, 422):
                        return None, False
                    body = bytearray()
                    for chunk in resp.iter_bytes():
                        body.extend(chunk)
                        if len(body) > 65536:
                            break
                    raise self.failure(resp, what, bytes(body[:65536]))
                length = resp.headers.get("content-length", "")
                if missing_ok and length.isdigit() and int(length) > limit:
                    return b"", True
                out = bytearray()
                for chunk in resp.iter_bytes():
                    out.extend(chunk)
                    if len(out) > limit:
                        return bytes(out), True
                return bytes(out), False
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self.unreachable(exc) from None


def _files(gh: _GitHub, max_files: int) -> list[dict]:
    files: list[dict] = []
    page = 1
    while len(files) < max_files and page <= 30:  # GitHub lists at most 3000 files
        batch = gh.get_json(f"{gh.base}/pulls/{gh.number}/files", "the pull request's files",
                            params={"per_page": 100, "page": page})
        if not isinstance(batch, list):
            raise SourceError("GitHub sent an unexpected answer for the pull request's files.")
        files.extend(f for f in batch if isinstance(f, dict))
        if len(batch) < 100:
            break
        page += 1
    return files[:max_files]


def github_pr(url: str, *, token: str | None, api_url: str = "https://api.github.com",
              max_bytes: int = 5_000_000, max_files: int = 300, max_file_bytes: int = 500_000,
              timeout: float = 20) -> Source:
    """The diff of a GitHub pull request with the new contents of its changed files."""
    owner, repo, number = parse_pr_url(url)
    if not token:
        raise SourceError(GITHUB_SETUP_HELP)
    if not _TOKEN.fullmatch(token):
        raise SourceError("GITHUB_TOKEN contains spaces or characters that cannot be sent in a "
                          "header; set it to the token alone.")
    api = (api_url or "https://api.github.com").strip().rstrip("/")
    gh = _GitHub(api, token, owner, repo, number, timeout)
    try:
        pr = gh.get_json(f"{gh.base}/pulls/{number}", "the pull request")
        try:
            title = str(pr["title"])[:300]
            head_sha, base_sha = str(pr["head"]["sha"]), str(pr["base"]["sha"])
            html_url = pr.get("html_url")
            if not (isinstance(html_url, str) and re.match(r"https?://[^\s\"'<>]+\Z", html_url)):
                html_url = f"https://github.com/{owner}/{repo}/pull/{number}"
            changed = pr.get("changed_files")
        except (KeyError, TypeError):
            raise SourceError("GitHub sent an unexpected answer for the pull request.") from None
        if not (_SHA.fullmatch(head_sha) and _SHA.fullmatch(base_sha)):
            raise SourceError("GitHub sent an unexpected answer for the pull request.")

        raw, _ = gh.get_capped(f"{gh.base}/pulls/{number}", "the pull request's diff",
                               "application/vnd.github.diff", max_bytes)
        kept, cut_meta = _cut_diff(raw or b"", max_bytes, changed if isinstance(changed, int) else 0)

        contents: dict[str, str | None] = {}
        to_fetch: list[str] = []
        skipped: list[str] = []
        for f in _files(gh, max_files):
            name = f.get("filename")
            if not _safe_path(name):
                if isinstance(name, str):
                    skipped.append(name[:300])
                    contents[name] = None
                continue
            if f.get("status") == "removed":
                contents[name] = None
            else:
                to_fetch.append(name)

        def fetch(path: str) -> str | None:
            body, too_big = gh.get_capped(
                f"{gh.base}/contents/{urllib.parse.quote(path, safe='/')}?ref={head_sha}",
                f"the contents of {path}", "application/vnd.github.raw", max_file_bytes,
                missing_ok=True)
            return None if body is None or too_big else _text_or_none(body)

        if to_fetch:
            with ThreadPoolExecutor(max_workers=min(_POOL, len(to_fetch))) as pool:
                for path, text in zip(to_fetch, pool.map(fetch, to_fetch), strict=True):
                    contents[path] = text
    finally:
        gh.close()

    meta = {"url": url.strip(), "owner": owner, "repo": repo, "number": number, "title": title,
            "head_sha": head_sha, "base_sha": base_sha, "html_url": html_url,
            "changed_files": changed if isinstance(changed, int) else None, **cut_meta}
    if skipped:
        meta["skipped_paths"] = skipped
    return Source(kind="github", label=f"{owner}/{repo}#{number}: {title}",
                  diff_text=kept.decode("utf-8", "replace"), contents=contents, meta=meta)
