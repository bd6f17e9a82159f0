"""A fake code host for tests: a real HTTP server on 127.0.0.1 (random port, threads in this
process) speaking the subset of GitHub (REST v3), GitLab (v4) and Forgejo/Gitea (v1) that
Quorum's provider clients call, over one in-memory set of repositories, recording every
request and everything posted.

Start and stop::

    from tests.fake_hosts import FakeHosts

    with FakeHosts(token="t0ken") as hosts:          # or hosts.start() ... hosts.stop()
        hosts.add_repo("octo/demo")
        pr = hosts.open_pull(7, base={"app.py": "x = 1\\n"}, head={"app.py": "x = 2\\n"})
        ref = hosts.repo_ref("github")               # RepoRef(api_url, "octo/demo", token)
        client = reviews_app.hosting.client_for(ref)  # "gitlab" / "forgejo" work the same
        ...
        hosts.push(7, {"app.py": "x = 3\\n"})        # new commits: the head moves
        assert pr.reviews[0]["event"] == "APPROVE"

URLs: ``hosts.url`` is the server; ``hosts.api_url(provider)`` the API base for a
``RepoRef``: GitHub at the root, GitLab under ``/api/v4``, Forgejo under ``/api/v1``.
The three dialects read and write the same repositories and pull requests.

Scripting (``repo=`` defaults to the first repository added):

* ``token``: the token every request must carry (GitHub/Forgejo ``Authorization: token X`` or
  ``Bearer X``; GitLab ``PRIVATE-TOKEN: X``), else 401; None accepts anything.
* ``add_repo(name) -> Repo`` (``.commits`` {sha: {path: str | bytes}}, ``.branches``,
  ``.pulls`` {number: Pull}).
* ``commit(files, *, repo, parent, sha, branch) -> sha``: a commit whose tree is ``parent``'s
  updated with ``files`` (None deletes a path).
* ``open_pull(number, *, base, head, repo, title, author, base_ref, head_ref, base_sha,
  head_sha, renames={new: old}, draft) -> Pull``: base commit with ``base``; head commit =
  base updated with ``head``.
* ``push(number, files, sha=None, *, repo) -> new head sha``: new commits on the pull request
  (also a new GitLab diff version).
* ``pull(number, repo=None) -> Pull``; set ``pull.state`` ("open" / "closed" / "merged"),
  ``pull.draft``, ``pull.title`` freely.
* ``max_per_page`` (default 100) caps ``per_page``/``limit``: set it to 2 and every list
  has several pages (GitHub/Forgejo ``Link: rel="next"``, GitLab ``X-Next-Page`` + Link).
* ``patch_limit`` (default 20 000 characters): a larger patch is left out of GitHub's file
  list (no ``patch``) and collapsed in GitLab's (``collapsed: true``, empty ``diff``).
  Binary contents (bytes with NUL or not UTF-8): no patch (GitHub), "Binary files … differ"
  (GitLab, Forgejo's ``.diff``).
* ``validate_lines`` (default True): an inline comment on a line the diff does not show is
  refused like the provider does (GitHub/Forgejo 422, GitLab 400).

Failure knobs (the first matching knob answers; ``route`` is a substring of the unquoted
path without the ``/api/vN`` prefix, e.g. ``"/pulls/7/reviews"``, ``"/notes"``, ``""`` = all):

* ``fail(route, status, *, times=None, method=None, headers=None, body=None) -> Knob``:
  ``times=None`` always, ``times=N`` fail N times then succeed (``knob.hits`` counts).
* ``rate_limit(route, *, status=403|429, retry_after="30" | HTTP date, reset=epoch,
  times=None)``: with ``x-ratelimit-remaining: 0`` (+ ``x-ratelimit-reset`` and
  ``RateLimit-Reset`` when ``reset`` is given, ``Retry-After`` when ``retry_after`` is).
* ``clear_failures()``.

What happened:

* ``requests``: every request as a ``Request`` (``method``, ``path`` as sent with the query,
  ``route`` unquoted without query or prefix, ``query`` dict, lower-cased ``headers``,
  ``body`` (parsed JSON), ``provider``); ``routes(method=None)``; ``writes()`` (non-GET).
* On each ``Pull``: ``comments`` (conversation comments / GitLab notes: {id, body, author}),
  ``review_comments`` (inline: {id, body, path, line, side, start_line, commit_id,
  review_id}; GitLab: {id, body, position}), ``reviews`` (every review as posted:
  {id, provider, event, state, body, commit_id, comments: [as sent]}; GitLab: one entry per
  discussion posted), ``approvals`` (GitLab approve: [{id, action, sha}]).

``FakeGitHub`` is the older GitHub-only entry point (``require_token``, ``add_pr``, ``fail`` /
``fail_on`` / ``rate_limit_reset``) on the same server, used by the GitHub URL source tests.
"""

from __future__ import annotations

import time

from .server import FakeHosts, Knob
from .state import Answer, Pull, Repo, Request, fake_sha, hunks, make_diff

Recorded = Request

__all__ = ["FakeGitHub", "FakeHosts", "Knob", "Pull", "Recorded", "Repo", "Request",
           "fake_sha", "hunks", "make_diff"]


class FakeGitHub(FakeHosts):
    """GitHub only, scripted per pull request: ``add_pr(owner, repo, number, files=…,
    base_files=…, diff=…, statuses=…)``; ``fail`` = "rate_limit" (403 with x-ratelimit-*
    headers, reset at ``rate_limit_reset``), "not_found" or a status, limited to routes
    containing ``fail_on`` when set."""

    def __init__(self, *, require_token: str | None = "test-token"):
        super().__init__(token=require_token)
        self.fail_mode: str | int | None = None
        self.fail_on: str | None = None
        self.rate_limit_reset = int(time.time()) + 900

    @property
    def require_token(self) -> str | None:
        return self.token

    @require_token.setter
    def require_token(self, value: str | None) -> None:
        self.token = value

    # ``fail`` is a setting here (FakeHosts.fail is a method): keep both spellings working
    def __setattr__(self, name, value):
        if name == "fail":
            name = "fail_mode"
        super().__setattr__(name, value)

    def legacy_failure(self, req: Request) -> Answer | None:
        mode = self.fail_mode
        if mode is None or (self.fail_on is not None and self.fail_on not in req.route):
            return None
        if mode == "rate_limit":
            return Answer(403, {"message": "API rate limit exceeded for user."},
                          {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0",
                           "x-ratelimit-reset": str(self.rate_limit_reset)})
        if mode == "not_found":
            return Answer(404, {"message": "Not Found"})
        return Answer(int(mode), {"message": f"Failure {mode}"})

    def add_pr(self, owner: str, repo: str, number: int, *, title: str = "A change",
               files: dict, base_files: dict | None = None, diff: str | None = None,
               statuses: dict[str, str] | None = None) -> dict:
        pull = self.open_pull(number, repo=f"{owner}/{repo}", base=dict(base_files or {}),
                              head=dict(files), title=title)
        pull.diff = diff
        pull.statuses = dict(statuses or {})
        return {"title": title, "head_sha": pull.head_sha, "base_sha": pull.base_sha,
                "diff": diff if diff is not None else make_diff(base_files or {}, files),
                "files": dict(files)}

    def pr_url(self, owner: str, repo: str, number: int) -> str:
        return f"https://github.com/{owner}/{repo}/pull/{number}"
