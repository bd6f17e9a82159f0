"""Forgejo / Gitea (REST v1) as a ``HostClient``.

Forgejo's file list has no patches, so ``pull_files`` also reads the pull request's diff
(``/pulls/{n}.diff``) and gives each file its hunks; a diff larger than the cap leaves the
patches out and ``fetch.pull_input`` rebuilds them from the files' contents. Reviews carry
their state (APPROVED / REQUEST_CHANGES / COMMENT) and inline comments by new line number.
"""

from __future__ import annotations

import re

from reviews_app.pipeline.diffs.paths import raw_name

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
from .github import (
    changed_file,
    conversation,
    login_of,
    pull_info,
    review_list,
    split_repository,
    user_name,
)
from .http import Api, quote, web_url

EVENTS = {"approve": "APPROVED", "request_changes": "REQUEST_CHANGES", "comment": "COMMENT"}
STATUS_STATES = {"queued": "pending", "in_progress": "pending", "success": "success",
                 "failure": "failure", "cancelled": "error", "error": "error"}
DIFF_CAP = 10_000_000
_BINARY = re.compile(r"Binary files (?:\S+|\"[^\"]*\") and (\S+|\"[^\"]*\") differ")


def split_diff(text: str) -> dict[str, tuple[str | None, bool]]:
    """{new path (old path when deleted): (hunks or None, binary)} from a git diff."""
    out: dict[str, tuple[str | None, bool]] = {}
    for chunk in re.split(r"(?m)^(?=diff --git )", text):
        if not chunk.startswith("diff --git "):
            continue
        head, sep, rest = chunk.partition("\n@@")
        patch = "@@" + rest if sep else None
        old = new = None
        binary = False
        for row in head.splitlines()[1:]:
            if row.startswith("--- "):
                old = raw_name(row[4:], strip_prefix=True)
            elif row.startswith("+++ "):
                new = raw_name(row[4:], strip_prefix=True)
            elif row.startswith("rename to "):
                new = raw_name(row[10:], strip_prefix=False)
            elif m := _BINARY.match(row):
                binary = True
                new = raw_name(m.group(1), strip_prefix=True)
        if new is None and old is None:
            s = head.splitlines()[0][len("diff --git "):]
            n = (len(s) - 5) // 2
            if n > 0 and s[:2] == "a/" and s[2 + n:2 + n + 3] == " b/" and s[2:2 + n] == s[5 + n:]:
                new = s[2:2 + n]
        path = new or old
        if path:
            out[path] = (patch, binary)
    return out


class ForgejoClient:
    name = "Forgejo"

    def __init__(self, repo: RepoRef):
        self.repo = repo
        self.owner, self.repo_name = split_repository(repo.repository, "Forgejo")
        self.api = Api(repo, name="Forgejo", auth={"Authorization": f"token {repo.token}"},
                       headers={"Accept": "application/json"})
        self.base = f"/repos/{quote(self.owner)}/{quote(self.repo_name)}"

    def close(self) -> None:
        self.api.close()

    def _pr(self, number: int) -> str:
        return f"{self.base}/pulls/{int(number)}"

    # --- reading -----------------------------------------------------------------------------
    def pull(self, number: int) -> PullInfo:
        return pull_info(self.api.get(self._pr(number), "the pull request"), number, "Forgejo")

    def pull_files(self, number: int) -> list[ChangedFile]:
        files = [changed_file(d) for d in self.api.pages(
            f"{self._pr(number)}/files", "the pull request's files",
            params={"limit": 50, "page": 1})]
        _resp, body = self.api.call("GET", f"{self.base}/pulls/{int(number)}.diff",
                                    "the pull request's diff", accept="text/plain",
                                    limit=DIFF_CAP, cut=True)
        whole = len(body) <= DIFF_CAP
        patches = split_diff(body.decode("utf-8", "replace")) if whole else {}
        out = []
        for f in files:
            if f is None:
                continue
            patch, binary = patches.get(f.path, (None, False))
            f.patch, f.binary = patch, binary
            f.patch_clipped = not whole
            out.append(f)
        return out

    def compare(self, base_sha: str, head_sha: str) -> list[ChangedFile]:
        """The files changed (no patches: ``fetch`` rebuilds them from the contents).
        Older Forgejo/Gitea versions list files only per commit: their union is taken."""
        d = self.api.get(f"{self.base}/compare/{quote(base_sha)}...{quote(head_sha)}",
                         "the comparison of two commits")
        if not isinstance(d, dict):
            raise HostError("Forgejo sent an unexpected answer for the comparison.")
        items = d.get("files")
        if not isinstance(items, list):
            items = [f for c in d.get("commits") or [] if isinstance(c, dict)
                     for f in c.get("files") or []]
        seen: dict[str, ChangedFile] = {}
        for item in items:
            f = changed_file(item) if isinstance(item, dict) else None
            if f is not None:
                f.patch, f.binary = None, False
                seen[f.path] = f   # the last commit's status wins (added then modified...)
        return list(seen.values())

    def file_bytes(self, ref: str, path: str, *, max_bytes: int) -> bytes | None:
        return self.api.file(f"{self.base}/raw/{'/'.join(quote(s) for s in path.split('/'))}",
                             path, ref, max_bytes=max_bytes)

    def comments(self, number: int) -> list[HostComment]:
        return conversation(self.api, f"{self.base}/issues/{int(number)}/comments",
                            {"limit": 50, "page": 1})

    def review_comments(self, number: int) -> list[HostComment]:
        out = []
        for r in self.api.pages(f"{self._pr(number)}/reviews", "the pull request's reviews",
                                params={"limit": 50, "page": 1}):
            for d in self.api.pages(f"{self._pr(number)}/reviews/{quote(str(r.get('id')))}"
                                    "/comments", "a review's comments"):
                line = d.get("position") or d.get("original_position")
                out.append(HostComment(id=str(d.get("id")), body=str(d.get("body") or ""),
                                       path=str(d.get("path") or "") or None,
                                       line=line if isinstance(line, int) and line else None,
                                       author=user_name(d.get("user"))))
        return out

    def whoami(self) -> str:
        return login_of(self.api)

    def reviews(self, number: int) -> list[HostReview]:
        return review_list(self.api, f"{self._pr(number)}/reviews", {"limit": 50, "page": 1})

    # --- writing -----------------------------------------------------------------------------
    def report_status(self, sha: str, report: StatusReport) -> str:
        body = {"state": STATUS_STATES[report.state], "context": report.name,
                "description": (report.description or report.title)[:255]}
        if web_url(report.target_url):
            body["target_url"] = report.target_url
        self.api.json("POST", f"{self.base}/statuses/{quote(sha)}", "the commit status",
                      json_body=body)
        return ""

    def create_comment(self, number: int, body: str) -> str:
        d = self.api.json("POST", f"{self.base}/issues/{int(number)}/comments",
                          "a new comment", json_body={"body": body})
        if not isinstance(d, dict) or d.get("id") in (None, ""):
            raise HostError("Forgejo sent an unexpected answer: no id for the new comment.")
        return str(d["id"])

    def update_comment(self, number: int, comment_id: str, body: str) -> None:
        self.api.json("PATCH", f"{self.base}/issues/comments/{quote(comment_id)}",
                      "the comment's update", json_body={"body": body})

    def post_review(self, number: int, review: ReviewPost) -> str:
        comments = [{"path": c.path, "body": c.body, "new_position": c.line}
                    for c in review.comments]
        d = self.api.json("POST", f"{self._pr(number)}/reviews", "the review",
                          json_body={"commit_id": review.commit_sha, "body": review.body,
                                     "event": EVENTS[review.event], "comments": comments})
        if not isinstance(d, dict) or d.get("id") in (None, ""):
            raise HostError("Forgejo sent an unexpected answer: no id for the review.")
        return str(d["id"])
