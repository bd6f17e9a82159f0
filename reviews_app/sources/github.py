"""A GitHub pull request as a review source: its diff and the new text of its changed files,
through the REST API with the user's token (sent in a header only, never shown). The HTTP
side is the GitHub host client (``reviews_app.hosting.github``), the one GitHub client of
the code base; this module turns its errors into what a person starting a review needs."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

from common import turns
from reviews_app.hosting.base import HostError, RepoRef
from reviews_app.hosting.github import GitHubClient
from reviews_app.hosting.http import TooLarge, safe_repo_path

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


def _error(exc: HostError, owner: str, repo: str, number: int) -> SourceError:
    """The user's sentence for a failed GitHub call (the client's own is already plain and
    free of the token; these say what to do about it here)."""
    if exc.status == 401:
        return SourceError("GitHub rejected the token (401 Unauthorized): check that "
                           "GITHUB_TOKEN is valid and has not expired.")
    if exc.status == 404:
        return SourceError(f"Pull request not found (or the token cannot see it): "
                           f"{owner}/{repo}#{number}.")
    if exc.status == 406:
        return SourceError(f"{exc} Try a local git range instead.")
    return SourceError(str(exc))


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
    try:
        gh = GitHubClient(RepoRef("github", api, f"{owner}/{repo}", token=token,
                                  timeout=timeout))
    except HostError as exc:
        raise SourceError(str(exc)) from None
    try:
        pr = gh.pull_json(number)
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

        raw, _ = gh.pull_diff(number, max_bytes=max_bytes)
        kept, cut_meta = cut_diff(raw, max_bytes, changed if isinstance(changed, int) else 0)

        contents: dict[str, str | None] = {}
        to_fetch: list[str] = []
        skipped: list[str] = []
        for f in gh.pull_files(number, limit=max_files):
            if not safe_repo_path(f.path) or f.path.startswith("/"):
                skipped.append(f.path[:300])
                contents[f.path] = None
            elif f.status == "removed":
                contents[f.path] = None
            else:
                to_fetch.append(f.path)

        def fetch(path: str) -> str | None:
            try:
                body = gh.file_bytes(head_sha, path, max_bytes=max_file_bytes)
            except TooLarge:
                return None
            except HostError as exc:
                if exc.status == 422:
                    return None
                raise
            return None if body is None else text_or_none(body)

        if to_fetch:
            with turns.waiting(), ThreadPoolExecutor(max_workers=min(_POOL, len(to_fetch))) as pool:
                for path, text in zip(to_fetch, pool.map(fetch, to_fetch), strict=True):
                    contents[path] = text
    except HostError as exc:
        raise _error(exc, owner, repo, number) from None
    finally:
        gh.close()

    meta = {"url": url.strip(), "owner": owner, "repo": repo, "number": number, "title": title,
            "head_sha": head_sha, "base_sha": base_sha, "html_url": html_url,
            "changed_files": changed if isinstance(changed, int) else None, **cut_meta}
    if skipped:
        meta["skipped_paths"] = skipped
    return Source(kind="github", label=f"{owner}/{repo}#{number}: {title}",
                  diff_text=kept.decode("utf-8", "replace"), contents=contents, meta=meta)
