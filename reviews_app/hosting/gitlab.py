"""GitLab (REST v4, gitlab.com or self-hosted) as a ``HostClient``.

A project is addressed by its URL-encoded full path (``/projects/group%2Fsub%2Fname``).
GitLab has no review object: ``post_review`` writes each inline comment as a discussion
with a position on the new file and approves (or takes an approval back) through the
approval endpoints. It writes no top-level note: the merge request has exactly one, the
summary, edited in place, and the verdict is said there.

Commit statuses follow GitLab's state machine: a status is created pending or running, goes
from pending to running, and only from running to success, failed or canceled; posting the
state it is in already is refused ("Cannot transition status via :run from :running").
"""

from __future__ import annotations

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
from .github import login_of
from .http import Api, quote, web_url

STATUS_STATES = {"queued": "pending", "in_progress": "running", "success": "success",
                 "failure": "failed", "cancelled": "canceled", "error": "failed"}
FINAL = ("success", "failed", "canceled")
_STATES = {"opened": "open", "locked": "open", "closed": "closed", "merged": "merged"}


def _count(patch: str, sign: str) -> int:
    return sum(1 for row in patch.splitlines()
               if row.startswith(sign) and not row.startswith(sign * 3 + " "))


def changed_file(d: dict) -> ChangedFile | None:
    """A ChangedFile from GitLab's diff object (merge request diffs, compare)."""
    path = d.get("new_path") or d.get("old_path")
    if not isinstance(path, str) or not path:
        return None
    status = ("added" if d.get("new_file") else "removed" if d.get("deleted_file")
              else "renamed" if d.get("renamed_file") else "modified")
    diff = d.get("diff") if isinstance(d.get("diff"), str) else ""
    binary = diff.startswith("Binary files ") or diff.startswith("Binary file ")
    clipped = bool(d.get("too_large") or d.get("collapsed"))
    patch = None if binary or clipped or not diff.strip() else diff
    old = d.get("old_path")
    return ChangedFile(
        path=path, status=status,  # type: ignore[arg-type]
        previous_path=old if status == "renamed" and isinstance(old, str) else None,
        patch=patch, patch_clipped=clipped and not binary, binary=binary,
        additions=_count(patch or "", "+"), deletions=_count(patch or "", "-"))


def _user(d: object) -> str:
    return str(d.get("username") or "")[:100] if isinstance(d, dict) else ""


class GitLabClient:
    name = "GitLab"

    def __init__(self, repo: RepoRef):
        self.repo = repo
        project = (repo.repository or "").strip().strip("/")
        if not project or any(p in ("", ".", "..") for p in project.split("/")):
            raise HostError(f"A GitLab project is written group/name (got {project[:100]!r}).")
        self.api = Api(repo, name="GitLab", auth={"PRIVATE-TOKEN": repo.token},
                       headers={"Accept": "application/json"})
        self.base = f"/projects/{quote(project)}"

    def close(self) -> None:
        self.api.close()

    def _mr(self, number: int) -> str:
        return f"{self.base}/merge_requests/{int(number)}"

    # --- reading -----------------------------------------------------------------------------
    def pull(self, number: int) -> PullInfo:
        d = self.api.get(self._mr(number), "the merge request")
        try:
            refs = d.get("diff_refs") or {}
            head_sha = str(refs.get("head_sha") or d["sha"])
            return PullInfo(
                number=int(d.get("iid") or number), title=str(d.get("title") or "")[:300],
                url=str(d.get("web_url") or ""), author=_user(d.get("author")),
                state=_STATES.get(d.get("state"), "closed"),  # type: ignore[arg-type]
                base_ref=str(d.get("target_branch") or ""),
                base_sha=str(refs.get("base_sha") or ""),
                head_ref=str(d.get("source_branch") or ""), head_sha=head_sha,
                draft=bool(d.get("draft") or d.get("work_in_progress")))
        except (KeyError, TypeError, AttributeError, ValueError):
            raise HostError("GitLab sent an unexpected answer for the merge request.") from None

    def pull_files(self, number: int) -> list[ChangedFile]:
        files = [changed_file(d) for d in self.api.pages(
            f"{self._mr(number)}/diffs", "the merge request's files",
            params={"per_page": 100, "page": 1})]
        return [f for f in files if f is not None]

    def compare(self, base_sha: str, head_sha: str) -> list[ChangedFile]:
        d = self.api.get(f"{self.base}/repository/compare", "the comparison of two commits",
                         params={"from": base_sha, "to": head_sha})
        diffs = d.get("diffs") if isinstance(d, dict) else None
        if not isinstance(diffs, list):
            raise HostError("GitLab sent an unexpected answer for the comparison.")
        files = [changed_file(x) for x in diffs if isinstance(x, dict)]
        return [f for f in files if f is not None]

    def file_bytes(self, ref: str, path: str, *, max_bytes: int) -> bytes | None:
        return self.api.file(f"{self.base}/repository/files/{quote(path)}/raw", path, ref,
                             max_bytes=max_bytes)

    def _notes(self, number: int):
        return self.api.pages(f"{self._mr(number)}/notes", "the merge request's notes",
                              params={"per_page": 100, "page": 1, "sort": "asc",
                                      "order_by": "created_at"})

    def comments(self, number: int) -> list[HostComment]:
        return [HostComment(id=str(n.get("id")), body=str(n.get("body") or ""),
                            author=_user(n.get("author")))
                for n in self._notes(number)
                if not n.get("system") and n.get("type") != "DiffNote"]

    def review_comments(self, number: int) -> list[HostComment]:
        out = []
        for n in self._notes(number):
            if n.get("system") or n.get("type") != "DiffNote":
                continue
            pos = n.get("position") if isinstance(n.get("position"), dict) else {}
            line = pos.get("new_line")
            out.append(HostComment(id=str(n.get("id")), body=str(n.get("body") or ""),
                                   path=str(pos.get("new_path") or "") or None,
                                   line=line if isinstance(line, int) else None,
                                   author=_user(n.get("author"))))
        return out

    def whoami(self) -> str:
        return login_of(self.api)

    def reviews(self, number: int) -> list[HostReview]:
        return []  # no review objects on GitLab: discussions and approvals

    # --- writing -----------------------------------------------------------------------------
    def report_status(self, sha: str, report: StatusReport) -> str:
        state = STATUS_STATES[report.state]
        if state in FINAL:
            self._status(sha, "running", report)  # success etc. only from running
        self._status(sha, state, report)
        return ""

    def _status(self, sha: str, state: str, report: StatusReport) -> None:
        body = {"state": state, "name": report.name,
                "description": (report.description or report.title)[:255]}
        if web_url(report.target_url):
            body["target_url"] = report.target_url
        try:
            self.api.json("POST", f"{self.base}/statuses/{quote(sha)}", "the commit status",
                          json_body=body)
        except HostError as exc:
            # Already in that state (or past it, for a retried "running"): nothing to do.
            if exc.status != 400 or "transition" not in str(exc).lower() or state in FINAL:
                raise

    def create_comment(self, number: int, body: str) -> str:
        d = self.api.json("POST", f"{self._mr(number)}/notes", "a new note",
                          json_body={"body": body})
        if not isinstance(d, dict) or d.get("id") in (None, ""):
            raise HostError("GitLab sent an unexpected answer: no id for the new note.")
        return str(d["id"])

    def update_comment(self, number: int, comment_id: str, body: str) -> None:
        self.api.json("PUT", f"{self._mr(number)}/notes/{quote(comment_id)}",
                      "the note's update", json_body={"body": body})

    def _refs(self, number: int, commit_sha: str) -> dict:
        """base/start/head shas of the merge request's diff version at ``commit_sha``."""
        for v in self.api.pages(f"{self._mr(number)}/versions", "the merge request's versions",
                                params={"per_page": 100, "page": 1}):
            if v.get("head_commit_sha") == commit_sha:
                return {"base_sha": v.get("base_commit_sha"),
                        "start_sha": v.get("start_commit_sha"), "head_sha": commit_sha}
        info = self.pull(number)
        return {"base_sha": info.base_sha, "start_sha": info.base_sha,
                "head_sha": commit_sha or info.head_sha}

    def post_review(self, number: int, review: ReviewPost) -> str:
        """The inline comments as discussions and the verdict as an approval (or none); no
        top-level note (the summary says the verdict). Returns the first discussion's id, or
        an id naming the merge request and commit when there was no comment to post."""
        first = f"mr{int(number)}@{review.commit_sha[:12]}"
        if review.comments:
            refs = self._refs(number, review.commit_sha)
            for i, c in enumerate(review.comments):
                position = {"position_type": "text", **refs, "new_path": c.path,
                            "old_path": c.path, "new_line": c.line}
                d = self.api.json("POST", f"{self._mr(number)}/discussions",
                                  f"an inline comment on {self.api.scrub(c.path)[:200]}",
                                  json_body={"body": c.body, "position": position})
                if i == 0 and isinstance(d, dict) and d.get("id"):
                    first = str(d["id"])[:64]
        if review.event == "approve":
            try:
                self.api.json("POST", f"{self._mr(number)}/approve", "the approval",
                              json_body={"sha": review.commit_sha})
            except HostError as exc:
                if exc.status != 401:   # GitLab answers 401 when it is approved already
                    raise
        elif review.event == "request_changes":  # no such state on GitLab: no approval
            try:
                self.api.json("POST", f"{self._mr(number)}/unapprove", "taking back approval")
            except HostError as exc:
                if exc.status != 404:   # 404: there was no approval to take back
                    raise
        return first
