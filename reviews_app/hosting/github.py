"""GitHub (REST v3, github.com or GitHub Enterprise) as a ``HostClient``.

Also the one place that knows GitHub's pull request API for the URL-based review source
(``reviews_app.sources.github``): the raw JSON of a pull request and its diff media type.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .base import (
    ChangedFile,
    HostComment,
    HostError,
    HostReview,
    PullInfo,
    RepoRef,
    ReviewPost,
    StatusReport,
)
from .http import Api, quote, web_url

EVENTS = {"approve": "APPROVE", "request_changes": "REQUEST_CHANGES", "comment": "COMMENT"}
# A commit status has four states; a check run says more (GitHub Apps only).
COMMIT_STATES = {"queued": "pending", "in_progress": "pending", "success": "success",
                 "failure": "failure", "cancelled": "error", "error": "error"}
CONCLUSIONS = {"success": "success", "failure": "failure", "cancelled": "cancelled",
               "error": "failure"}
MAX_OUTPUT = 65_535      # a check run's output.summary, at most
MAX_DESCRIPTION = 140    # a commit status's description, at most
_STATUSES = {"added", "removed", "modified", "renamed", "copied"}


def split_repository(repository: str, provider: str) -> tuple[str, str]:
    parts = (repository or "").strip().strip("/").split("/")
    if len(parts) != 2 or any(p in ("", ".", "..") for p in parts):
        raise HostError(f"A {provider} repository is written owner/name "
                        f"(got {repository[:100]!r}).")
    return parts[0], parts[1]


def changed_file(d: dict) -> ChangedFile | None:
    """A ChangedFile from GitHub's (or Forgejo's) file object; None when it has no name."""
    path = d.get("filename")
    if not isinstance(path, str) or not path:
        return None
    status = d.get("status") if d.get("status") in _STATUSES else "modified"
    if d.get("status") == "changed":
        status = "modified"
    patch = d.get("patch") if isinstance(d.get("patch"), str) else None
    adds, dels = _int(d.get("additions")), _int(d.get("deletions"))
    prev = d.get("previous_filename")
    return ChangedFile(
        path=path, status=status,  # type: ignore[arg-type]
        previous_path=prev if isinstance(prev, str) and prev else None,
        patch=patch or None, additions=adds, deletions=dels,
        # GitHub leaves the patch out of binary files and of very large ones; a file with
        # changed lines but no patch is large, one without either may be binary (or empty):
        # fetch.pull_input reads its content to tell.
        binary=patch is None and adds == dels == 0 and status not in ("renamed", "removed"))


def _int(v: object) -> int:
    return v if isinstance(v, int) and v >= 0 else 0


def user_name(d: object) -> str:
    return str(d.get("login") or d.get("username") or "")[:100] if isinstance(d, dict) else ""


def pull_info(d: Any, number: int, host: str) -> PullInfo:
    """A pull request object as GitHub (and Forgejo, which copies its shape) sends it."""
    try:
        head, base = d["head"], d["base"]
        state = "merged" if d.get("merged") or d.get("merged_at") else (
            "open" if d.get("state") == "open" else "closed")
        return PullInfo(
            number=int(d.get("number") or number), title=str(d.get("title") or "")[:300],
            url=str(d.get("html_url") or ""), author=user_name(d.get("user")),
            state=state, base_ref=str(base.get("ref") or ""),  # type: ignore[arg-type]
            base_sha=str(base["sha"]), head_ref=str(head.get("ref") or ""),
            head_sha=str(head["sha"]), draft=bool(d.get("draft")))
    except (KeyError, TypeError, AttributeError, ValueError):
        raise HostError(f"{host} sent an unexpected answer for the pull request.") from None


def review_list(api: Api, url: str, params: dict) -> list[HostReview]:
    """A pull request's reviews (GitHub, and Forgejo alike)."""
    return [HostReview(id=str(d.get("id")), body=str(d.get("body") or ""),
                       author=user_name(d.get("user")), state=str(d.get("state") or ""),
                       commit_sha=str(d.get("commit_id") or ""))
            for d in api.pages(url, "the pull request's reviews", params=params)]


def login_of(api: Api) -> str:
    """The token's account ("GET /user": GitHub, Forgejo and GitLab alike)."""
    d = api.get("/user", "the token's account")
    login = user_name(d)
    if not login:
        raise HostError(f"{api.name} did not say which account the token belongs to.")
    return login


def conversation(api: Api, url: str, params: dict) -> list[HostComment]:
    """A pull request's conversation comments, every page (GitHub, and Forgejo alike)."""
    return [HostComment(id=str(d.get("id")), body=str(d.get("body") or ""),
                        author=user_name(d.get("user")))
            for d in api.pages(url, "the pull request's comments", params=params)]


class GitHubClient:
    name = "GitHub"

    def __init__(self, repo: RepoRef):
        self.repo = repo
        self.owner, self.repo_name = split_repository(repo.repository, "GitHub")
        self.api = Api(repo, name="GitHub", auth={"Authorization": f"Bearer {repo.token}"},
                       headers={"Accept": "application/vnd.github+json",
                                "X-GitHub-Api-Version": "2022-11-28"})
        self.base = f"/repos/{quote(self.owner)}/{quote(self.repo_name)}"

    def close(self) -> None:
        self.api.close()

    # --- reading -----------------------------------------------------------------------------
    def pull_json(self, number: int) -> dict:
        data = self.api.get(f"{self.base}/pulls/{int(number)}", "the pull request")
        if not isinstance(data, dict):
            raise HostError("GitHub sent an unexpected answer for the pull request.")
        return data

    def pull(self, number: int) -> PullInfo:
        return pull_info(self.pull_json(number), number, "GitHub")

    def pull_diff(self, number: int, *, max_bytes: int) -> tuple[bytes, bool]:
        """The pull request as one git diff (GitHub's diff media type): (bytes, over the cap);
        over the cap, the first ``max_bytes`` bytes."""
        _resp, body = self.api.call(
            "GET", f"{self.base}/pulls/{int(number)}", "the pull request's diff",
            accept="application/vnd.github.diff", limit=max_bytes, cut=True)
        return body, len(body) > max_bytes

    def pull_files(self, number: int, *, limit: int | None = None) -> list[ChangedFile]:
        files = []
        for d in self.api.pages(f"{self.base}/pulls/{int(number)}/files",
                                "the pull request's files",
                                params={"per_page": 100, "page": 1}, limit=limit):
            f = changed_file(d)
            if f is not None:
                files.append(f)
        return files

    def compare(self, base_sha: str, head_sha: str) -> list[ChangedFile]:
        files: dict[str, ChangedFile] = {}
        for d in self.api.pages(f"{self.base}/compare/{quote(base_sha)}...{quote(head_sha)}",
                                "the comparison of two commits",
                                params={"per_page": 100, "page": 1}, key="files"):
            f = changed_file(d)
            if f is not None:
                files.setdefault(f.path, f)
        return list(files.values())

    def file_bytes(self, ref: str, path: str, *, max_bytes: int) -> bytes | None:
        return self.api.file(f"{self.base}/contents/{'/'.join(quote(s) for s in path.split('/'))}",
                             path, ref, max_bytes=max_bytes, accept="application/vnd.github.raw")

    def comments(self, number: int) -> list[HostComment]:
        return conversation(self.api, f"{self.base}/issues/{int(number)}/comments",
                            {"per_page": 100, "page": 1})

    def review_comments(self, number: int) -> list[HostComment]:
        out = []
        for d in self.api.pages(f"{self.base}/pulls/{int(number)}/comments",
                                "the pull request's review comments",
                                params={"per_page": 100, "page": 1}):
            line = d.get("line") if isinstance(d.get("line"), int) else d.get("original_line")
            out.append(HostComment(id=str(d.get("id")), body=str(d.get("body") or ""),
                                   path=str(d.get("path") or "") or None,
                                   line=line if isinstance(line, int) else None,
                                   author=user_name(d.get("user"))))
        return out

    def whoami(self) -> str:
        if self.repo.app:  # an installation token has no user: the App writes as its bot
            if not self.repo.bot_login:
                raise HostError("The GitHub App's name is not known yet.")
            return self.repo.bot_login
        return login_of(self.api)

    def reviews(self, number: int) -> list[HostReview]:
        return review_list(self.api, f"{self.base}/pulls/{int(number)}/reviews",
                           {"per_page": 100, "page": 1})

    # --- writing -----------------------------------------------------------------------------
    def report_status(self, sha: str, report: StatusReport) -> str:
        if self.repo.app:
            return self._check_run(sha, report)
        body = {"state": COMMIT_STATES[report.state], "context": report.name,
                "description": (report.description or report.title)[:MAX_DESCRIPTION]}
        if web_url(report.target_url):
            body["target_url"] = report.target_url
        self.api.json("POST", f"{self.base}/statuses/{quote(sha)}", "the commit status",
                      json_body=body)
        return ""

    def _check_run(self, sha: str, report: StatusReport) -> str:
        """Create or update Quorum's check run on ``sha``. One per commit: a run whose id is
        not known (a create the provider saved but answered with an error) is looked up by
        name before another is created."""
        body: dict[str, Any] = {"name": report.name, "output": {
            "title": report.title[:200], "summary": (report.summary or report.description
                                                     or report.title)[:MAX_OUTPUT]}}
        if web_url(report.target_url):
            body["details_url"] = report.target_url
        if report.state in ("queued", "in_progress"):
            body["status"] = report.state
        else:
            body.update(status="completed", conclusion=CONCLUSIONS[report.state],
                        completed_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        run_id = report.check_run_id or self._find_check_run(sha, report.name)
        if run_id:
            try:
                self.api.json("PATCH", f"{self.base}/check-runs/{quote(run_id)}",
                              "the check run's update", json_body=body)
                return run_id
            except HostError as exc:
                if exc.status != 404:
                    raise
        d = self.api.json("POST", f"{self.base}/check-runs", "a new check run",
                          json_body={**body, "head_sha": sha})
        return _id(d, "GitHub")

    def _find_check_run(self, sha: str, name: str) -> str:
        d = self.api.get(f"{self.base}/commits/{quote(sha)}/check-runs",
                         "the commit's check runs", params={"check_name": name, "filter": "all"})
        runs = d.get("check_runs") if isinstance(d, dict) else None
        for run in runs if isinstance(runs, list) else ():
            if isinstance(run, dict) and run.get("name") == name and run.get("id"):
                return str(run["id"])
        return ""

    def create_comment(self, number: int, body: str) -> str:
        d = self.api.json("POST", f"{self.base}/issues/{int(number)}/comments",
                          "a new comment", json_body={"body": body})
        return _id(d, "GitHub")

    def update_comment(self, number: int, comment_id: str, body: str) -> None:
        self.api.json("PATCH", f"{self.base}/issues/comments/{quote(comment_id)}",
                      "the comment's update", json_body={"body": body})

    def post_review(self, number: int, review: ReviewPost) -> str:
        comments = []
        for c in review.comments:
            item = {"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body}
            if c.start_line is not None and c.start_line < c.line:
                item.update(start_line=c.start_line, start_side="RIGHT")
            comments.append(item)
        d = self.api.json("POST", f"{self.base}/pulls/{int(number)}/reviews", "the review",
                          json_body={"commit_id": review.commit_sha, "body": review.body,
                                     "event": EVENTS[review.event], "comments": comments})
        return _id(d, "GitHub")


def _id(d: object, name: str) -> str:
    if not isinstance(d, dict) or d.get("id") in (None, ""):
        raise HostError(f"{name} sent an unexpected answer: no id for what was posted.")
    return str(d["id"])
