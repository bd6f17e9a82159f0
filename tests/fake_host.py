"""A scripted code host in process: the ``HostClient`` interface over dicts, recording every
call, for unit tests of the Django side (webhook flow, incremental review, publishing). The
provider clients themselves are tested over HTTP against the fake provider server.

    host = FakeHost()
    host.set_pull(7, base={"app.py": "x = 1\\n"}, head={"app.py": "x = 2\\n"})
    host.fail_next("post_review", HostError("boom", status=502, retryable=True))
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field

from common import netguard
from reviews_app.hosting.base import (
    ChangedFile,
    HostComment,
    HostError,
    HostReview,
    PullInfo,
    RepoRef,
    ReviewPost,
    StatusReport,
)
from reviews_app.hosting.http import TooLarge


def hunks(old: str | None, new: str | None) -> str:
    lines = list(difflib.unified_diff((old or "").splitlines(keepends=True),
                                      (new or "").splitlines(keepends=True), n=3))
    return "".join(lines[2:])  # no ---/+++ headers: providers give the hunks only


@dataclass
class FakeHost:
    repo: RepoRef = field(default_factory=lambda: RepoRef("github", "https://host.invalid",
                                                          "octo/demo", token="t0ken"))
    pulls: dict[int, PullInfo] = field(default_factory=dict)
    trees: dict[str, dict[str, str]] = field(default_factory=dict)  # sha -> {path: text}
    posted_comments: list[HostComment] = field(default_factory=list)
    posted_reviews: list[tuple[int, ReviewPost]] = field(default_factory=list)
    inline: list[HostComment] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    failures: dict[str, list[Exception]] = field(default_factory=dict)
    bot: str = "quorum-bot"                  # the account the token writes as
    statuses: list[tuple[str, StatusReport]] = field(default_factory=list)
    review_ids: list[str] = field(default_factory=list)
    status_tasks: list[tuple[int, float | None]] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1001))

    # --- scripting ----------------------------------------------------------------------------
    def set_pull(self, number: int, *, base: dict[str, str], head: dict[str, str],
                 base_sha: str = "b" * 40, head_sha: str = "h" * 40, title: str = "A change",
                 state: str = "open", author: str = "alice") -> PullInfo:
        self.trees[base_sha], self.trees[head_sha] = dict(base), dict(head)
        self.trees.setdefault("main", dict(base))
        info = PullInfo(number=number, title=title, url=f"https://host.invalid/pull/{number}",
                        author=author, state=state, base_ref="main", base_sha=base_sha,  # type: ignore[arg-type]
                        head_ref="feature", head_sha=head_sha)
        self.pulls[number] = info
        return info

    def push(self, number: int, head: dict[str, str], head_sha: str) -> None:
        """New commits on the pull request: its head moves to ``head_sha``."""
        self.trees[head_sha] = dict(head)
        self.pulls[number].head_sha = head_sha

    def fail_next(self, call: str, exc: Exception) -> None:
        self.failures.setdefault(call, []).append(exc)

    def _call(self, name: str) -> None:
        netguard.before_network(f"A FakeHost call ({name})")  # it stands for the network
        self.calls.append(name)
        if self.failures.get(name):
            raise self.failures[name].pop(0)

    # --- HostClient ---------------------------------------------------------------------------
    def pull(self, number: int) -> PullInfo:
        self._call("pull")
        if number not in self.pulls:
            raise HostError(f"Pull request #{number} not found.", status=404)
        return self.pulls[number]

    def _diff(self, old: dict[str, str], new: dict[str, str]) -> list[ChangedFile]:
        out = []
        for path in sorted(set(old) | set(new)):
            a, b = old.get(path), new.get(path)
            if a == b:
                continue
            status = "added" if a is None else "removed" if b is None else "modified"
            out.append(ChangedFile(path=path, status=status, patch=hunks(a, b)))  # type: ignore[arg-type]
        return out

    def pull_files(self, number: int) -> list[ChangedFile]:
        self._call("pull_files")
        p = self.pull(number)
        return self._diff(self.trees[p.base_sha], self.trees[p.head_sha])

    def compare(self, base_sha: str, head_sha: str) -> list[ChangedFile]:
        self._call("compare")
        return self._diff(self.trees[base_sha], self.trees[head_sha])

    def file_bytes(self, ref: str, path: str, *, max_bytes: int) -> bytes | None:
        self._call("file_bytes")
        text = self.trees.get(ref, {}).get(path)
        if text is None:
            return None
        data = text.encode()
        if len(data) > max_bytes:
            raise TooLarge(f"{path} is larger than {max_bytes} bytes.")
        return data

    def comments(self, number: int) -> list[HostComment]:
        self._call("comments")
        return list(self.posted_comments)

    def review_comments(self, number: int) -> list[HostComment]:
        self._call("review_comments")
        return list(self.inline)

    def whoami(self) -> str:
        self._call("whoami")
        return self.bot

    def reviews(self, number: int) -> list[HostReview]:
        self._call("reviews")
        return [HostReview(id=rid, body=r.body, author=self.bot, commit_sha=r.commit_sha)
                for rid, (_n, r) in zip(self.review_ids, self.posted_reviews, strict=True)]

    def report_status(self, sha: str, report: StatusReport) -> str:
        self._call("report_status")
        self.statuses.append((sha, report))
        return ""

    def status_of(self, sha: str) -> str:
        """The last state reported on ``sha`` ('' when none)."""
        return next((r.state for s, r in reversed(self.statuses) if s == sha), "")

    def create_comment(self, number: int, body: str) -> str:
        self._call("create_comment")
        c = HostComment(id=str(next(self._ids)), body=body, author=self.bot)
        self.posted_comments.append(c)
        return c.id

    def update_comment(self, number: int, comment_id: str, body: str) -> None:
        self._call("update_comment")
        for c in self.posted_comments:
            if c.id == comment_id:
                c.body = body
                return
        raise HostError("Comment not found.", status=404)

    def post_review(self, number: int, review: ReviewPost) -> str:
        self._call("post_review")
        self.posted_reviews.append((number, review))
        for c in review.comments:
            self.inline.append(HostComment(id=str(next(self._ids)), body=c.body, path=c.path,
                                           line=c.line, author=self.bot))
        rid = str(next(self._ids))
        self.review_ids.append(rid)
        return rid

    def close(self) -> None:
        self.calls.append("close")
