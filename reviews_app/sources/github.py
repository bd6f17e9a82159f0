"""A GitHub pull request as a review source: its diff and the new text of its changed files,
through the REST API with the user's token (sent in a header only, never shown)."""

from __future__ import annotations

import datetime as dt
import re
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import httpx

from agents_app.patterns import safe_json

from . import SHA, Source, SourceError, cut_diff, text_or_none

__all__ = ["github_pr", "parse_pr_url"]

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
        if not (SHA.fullmatch(head_sha) and SHA.fullmatch(base_sha)):
            raise SourceError("GitHub sent an unexpected answer for the pull request.")

        raw, _ = gh.get_capped(f"{gh.base}/pulls/{number}", "the pull request's diff",
                               "application/vnd.github.diff", max_bytes)
        kept, cut_meta = cut_diff(raw or b"", max_bytes, changed if isinstance(changed, int) else 0)

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
            return None if body is None or too_big else text_or_none(body)

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
