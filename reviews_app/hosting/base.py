"""What Quorum needs from a code host (GitHub, GitLab, Forgejo/Gitea), as one small interface.

Plain Python, no Django: the Django side (webhooks, the pull-request flow, publishing) talks
to a ``HostClient``; each provider module implements it over the provider's REST API, and
the tests drive the same code against a fake provider server speaking those APIs.

Every text a client raises or returns is free of the token. Line numbers are new-file
(head) line numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

ReviewEvent = Literal["approve", "request_changes", "comment"]
FileStatus = Literal["added", "modified", "removed", "renamed", "copied"]


class HostError(Exception):
    """A provider call failed. ``str()`` is a plain sentence safe to show (no token);
    ``status`` is the HTTP status (None when the host was unreachable); ``retry_after`` is
    the seconds the provider asked to wait (rate limits), else None; ``retryable`` says
    whether trying again later can help (5xx, rate limits, network), not for 401/404/422."""

    def __init__(self, message: str, *, status: int | None = None,
                 retry_after: float | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.retryable = retryable


RETRY_FLOOR = 1.0      # seconds: a Retry-After of 0 is not a busy loop
RETRY_CAP = 3600.0     # seconds: a reset time an hour away is waited for, no longer

def retry_wait(attempt: int, retry_after: float | None, base: float) -> float:
    """Seconds before the next try: what the provider asked for (``Retry-After``, or a rate
    limit's reset time) within a small floor and a cap, else ``base`` doubled per attempt
    (``attempt`` 0 is the first retry), capped."""
    if retry_after is not None and retry_after >= 0:
        return min(max(float(retry_after), RETRY_FLOOR), RETRY_CAP)
    return min(float(base) * 2 ** max(attempt, 0), RETRY_CAP)



@dataclass(frozen=True)
class RepoRef:
    """Where a repository lives and how to reach it. The token is never in ``repr``."""

    provider: Literal["github", "gitlab", "forgejo"]
    api_url: str            # e.g. https://api.github.com, https://gitlab.com/api/v4
    repository: str         # "owner/name"; GitLab: the full project path
    token: str = field(default="", repr=False)
    timeout: float = 20.0
    # A GitHub App installation token: the account is the App's bot (``<slug>[bot]``, which
    # "GET /user" does not answer for such a token), and check runs can be written.
    app: bool = False
    bot_login: str = ""


@dataclass
class PullInfo:
    number: int
    title: str
    url: str
    author: str
    state: Literal["open", "closed", "merged"]
    base_ref: str
    base_sha: str
    head_ref: str
    head_sha: str
    draft: bool = False


@dataclass
class ChangedFile:
    """One file of a pull request (or of a comparison of two commits)."""

    path: str
    status: FileStatus
    previous_path: str | None = None
    # The unified-diff hunks ("@@ ... @@" onwards, no file headers) or None when the provider
    # left them out (too large, binary, or clipped: see ``patch_clipped``).
    patch: str | None = None
    patch_clipped: bool = False
    binary: bool = False
    additions: int = 0
    deletions: int = 0


@dataclass
class HostComment:
    """A comment on the pull request: a conversation comment (``path`` None) or an inline
    one. ``body`` is the provider's text, including Quorum's hidden markers."""

    id: str
    body: str
    path: str | None = None
    line: int | None = None
    author: str = ""


@dataclass
class InlineComment:
    path: str
    line: int               # the last line the comment is about (new file)
    body: str
    start_line: int | None = None  # for a range; None for one line


@dataclass
class ReviewPost:
    """One review on the pull request: its body, the verdict as the review state where the
    provider has one, and inline comments, all pinned to ``commit_sha``."""

    commit_sha: str
    body: str
    event: ReviewEvent
    comments: list[InlineComment] = field(default_factory=list)


@dataclass
class HostReview:
    """A review on the pull request (GitHub, Forgejo; GitLab has none): read back before
    posting one, so that a write the provider saved but answered with an error (a "ghost
    write") is not posted twice."""

    id: str
    body: str
    author: str = ""
    state: str = ""
    commit_sha: str = ""


StatusState = Literal["queued", "in_progress", "success", "failure", "cancelled", "error"]


@dataclass
class StatusReport:
    """What Quorum reports on a commit, for branch protection to require by its ``name``.
    ``state``: queued and in_progress are pending; the others are final. ``check_run_id``
    is the GitHub check run written before, when there is one."""

    state: StatusState
    title: str
    description: str = ""
    summary: str = ""
    target_url: str = ""
    name: str = "Quorum"
    check_run_id: str = ""


class HostClient(Protocol):
    """The calls Quorum makes. Implementations paginate every list in full."""

    repo: RepoRef

    def pull(self, number: int) -> PullInfo: ...

    def pull_files(self, number: int) -> list[ChangedFile]: ...

    def compare(self, base_sha: str, head_sha: str) -> list[ChangedFile]:
        """Files changed from ``base_sha`` to ``head_sha`` (an incremental round)."""
        ...

    def file_bytes(self, ref: str, path: str, *, max_bytes: int) -> bytes | None:
        """The file at ``ref`` (a sha or branch), None when it does not exist there. Raises
        HostError when it is larger than ``max_bytes``."""
        ...

    def comments(self, number: int) -> list[HostComment]:
        """The pull request's conversation comments."""
        ...

    def review_comments(self, number: int) -> list[HostComment]:
        """The pull request's inline (diff) comments."""
        ...

    def create_comment(self, number: int, body: str) -> str:
        """Post a conversation comment; returns its id."""
        ...

    def update_comment(self, number: int, comment_id: str, body: str) -> None: ...

    def post_review(self, number: int, review: ReviewPost) -> str:
        """Post the review (state + inline comments) in as few calls as the provider allows;
        returns the review's id (or the id of its first note where there is no review)."""
        ...

    def whoami(self) -> str:
        """The login of the account the token belongs to (its comments are Quorum's)."""
        ...

    def reviews(self, number: int) -> list[HostReview]:
        """The pull request's reviews (an empty list where the provider has none)."""
        ...

    def report_status(self, sha: str, report: StatusReport) -> str:
        """Set Quorum's status on commit ``sha``; returns the check run's id where one was
        written (GitHub Apps), else an empty string."""
        ...

    def close(self) -> None: ...


# Hidden markers in posted text: the summary comment carries SUMMARY_MARKER, each inline
# comment FINGERPRINT_MARKER with the finding's fingerprint, so Quorum recognises its own
# comments on a re-run even if its database is behind.
SUMMARY_MARKER = "<!-- quorum:summary -->"
FINGERPRINT_MARKER = "<!-- quorum:fingerprint={} -->"
# A posted review carries the publication it belongs to, so a retry finds it.
REVIEW_MARKER = "<!-- quorum:review={} -->"
