"""A fake GitHub REST API on loopback, for tests that fetch pull requests.

Usage::

    from tests.fake_github import FakeGitHub

    with FakeGitHub(require_token="t0ken") as gh:
        gh.add_pr("octo", "demo", 7, title="Fix it",
                  base_files={"a.py": "x = 1\\n"}, files={"a.py": "x = 2\\n"})
        src = github.github_pr("https://github.com/octo/demo/pull/7", token="t0ken",
                               api_url=gh.url)
        assert gh.requests[0].headers["authorization"] == "Bearer t0ken"

Or configure ``gh.prs[(owner, repo, number)]`` directly with a dict of
``title``, ``head_sha``, ``base_sha``, ``diff`` (text) and ``files``
(``{path: new text | bytes | None}``, None meaning the file was removed); optional
``statuses`` (``{path: "added" | "renamed" | ...}``) overrides the listed status.

Endpoints (all GET, JSON unless said otherwise):

* ``/repos/{o}/{r}/pulls/{n}``: the PR object; with ``Accept: application/vnd.github.diff``
  the diff as text/plain instead.
* ``/repos/{o}/{r}/pulls/{n}/files?per_page=&page=``: paginated like GitHub (default 30,
  at most 100 per page).
* ``/repos/{o}/{r}/contents/{path}?ref={sha}``: the file at the PR's head sha; raw bytes with
  ``Accept: application/vnd.github.raw``, else GitHub's base64 JSON object.

Failure knobs: ``require_token`` (401 unless ``Authorization: Bearer <it>``; None to accept
anything), ``fail`` = ``"rate_limit"`` (403 with ``x-ratelimit-*`` headers), ``"not_found"``
(404) or an int status, limited to routes containing ``fail_on`` when that is set.
``requests`` records every request as a :class:`Recorded` (method, path with query, route
without query, query dict, lower-cased headers). Works with or without ``with``: call
``start()`` / ``stop()``.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Recorded:
    method: str
    path: str  # as sent, with the query string
    route: str  # unquoted, without the query string
    query: dict[str, str]
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names


def fake_sha(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()  # noqa: S324 - test ids only


def make_diff(base_files: dict[str, str], files: dict[str, str | bytes | None]) -> str:
    """A git-style unified diff turning ``base_files`` into ``files`` (None = removed)."""
    out = []
    for path in sorted(set(base_files) | set(files)):
        old, new = base_files.get(path), files.get(path, base_files.get(path))
        if old == new:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        if isinstance(new, bytes) or isinstance(old, bytes):
            out.append(f"Binary files a/{path} and b/{path} differ\n")
            continue
        if old is None:
            out.append("new file mode 100644\n")
        elif new is None:
            out.append("deleted file mode 100644\n")
        a = f"a/{path}" if old is not None else "/dev/null"
        b = f"b/{path}" if new is not None else "/dev/null"
        out.extend(difflib.unified_diff((old or "").splitlines(keepends=True),
                                        (new or "").splitlines(keepends=True), a, b))
    return "".join(out)


class FakeGitHub:
    def __init__(self, *, require_token: str | None = "test-token"):
        self.prs: dict[tuple[str, str, int], dict] = {}
        self.requests: list[Recorded] = []
        self.require_token = require_token
        self.fail: str | int | None = None
        self.fail_on: str | None = None
        self.rate_limit_reset = int(time.time()) + 900
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True, name="fake-github")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "FakeGitHub is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # --- configuration ---------------------------------------------------------------------------
    def add_pr(self, owner: str, repo: str, number: int, *, title: str = "A change",
               files: dict[str, str | bytes | None], base_files: dict[str, str] | None = None,
               diff: str | None = None, **extra) -> dict:
        """Register a PR; the diff is generated from ``base_files`` -> ``files`` unless given."""
        pr = {"title": title, "head_sha": fake_sha(owner, repo, number, "head"),
              "base_sha": fake_sha(owner, repo, number, "base"),
              "diff": diff if diff is not None else make_diff(base_files or {}, files),
              "files": dict(files), **extra}
        self.prs[(owner, repo, number)] = pr
        return pr

    def pr_url(self, owner: str, repo: str, number: int) -> str:
        """The github.com URL a user would paste for this PR."""
        return f"https://github.com/{owner}/{repo}/pull/{number}"

    def routes(self) -> list[str]:
        with self._lock:
            return [r.route for r in self.requests]


class _Handler(BaseHTTPRequestHandler):
    owner: FakeGitHub
    server_version = "FakeGitHub/1.0"
    protocol_version = "HTTP/1.1"  # keep-alive; every answer has a Content-Length
    wbufsize = 1 << 16  # one write per answer (no Nagle/delayed-ACK stalls on keep-alive)

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes | str | object, *, ctype: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        if isinstance(body, str):
            data = body.encode("utf-8")
        elif isinstance(body, bytes):
            data = body
        else:
            data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        fake = self.owner
        split = urllib.parse.urlsplit(self.path)
        route = urllib.parse.unquote(split.path)
        query = dict(urllib.parse.parse_qsl(split.query))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with fake._lock:
            fake.requests.append(Recorded("GET", self.path, route, query, headers))

        if fake.require_token is not None and \
                headers.get("authorization") != f"Bearer {fake.require_token}":
            return self._send(401, {"message": "Bad credentials",
                                    "documentation_url": "https://docs.github.com/rest"})
        if fake.fail is not None and (fake.fail_on is None or fake.fail_on in route):
            if fake.fail == "rate_limit":
                return self._send(403, {"message": "API rate limit exceeded for user."},
                                  headers={"x-ratelimit-limit": "5000",
                                           "x-ratelimit-remaining": "0",
                                           "x-ratelimit-reset": str(fake.rate_limit_reset)})
            if fake.fail == "not_found":
                return self._send(404, {"message": "Not Found"})
            return self._send(int(fake.fail), {"message": f"Failure {fake.fail}"})

        parts = split.path.split("/")  # quoted: a path's own %2F stays in one part
        accept = headers.get("accept", "")
        if len(parts) >= 6 and parts[1] == "repos" and parts[4] == "pulls":
            o, r = urllib.parse.unquote(parts[2]), urllib.parse.unquote(parts[3])
            pr = fake.prs.get((o, r, int(parts[5]))) if parts[5].isdigit() else None
            if pr is None:
                return self._send(404, {"message": "Not Found"})
            if len(parts) == 6:
                return self._pull(o, r, int(parts[5]), pr, accept)
            if len(parts) == 7 and parts[6] == "files":
                return self._files(pr, query)
        if len(parts) >= 6 and parts[1] == "repos" and parts[4] == "contents":
            o, r = urllib.parse.unquote(parts[2]), urllib.parse.unquote(parts[3])
            path = urllib.parse.unquote("/".join(parts[5:]))
            return self._contents(o, r, path, query.get("ref"), accept)
        return self._send(404, {"message": "Not Found"})

    def _pull(self, o: str, r: str, n: int, pr: dict, accept: str) -> None:
        if "application/vnd.github.diff" in accept:
            return self._send(200, pr["diff"], ctype="text/plain; charset=utf-8")
        return self._send(200, {
            "number": n, "title": pr["title"], "state": "open",
            "html_url": f"https://github.com/{o}/{r}/pull/{n}",
            "head": {"sha": pr["head_sha"], "ref": "feature"},
            "base": {"sha": pr["base_sha"], "ref": "main"},
            "changed_files": len(pr["files"])})

    def _files(self, pr: dict, query: dict[str, str]) -> None:
        try:
            per_page = max(1, min(100, int(query.get("per_page", "30"))))
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            return self._send(422, {"message": "Validation Failed"})
        statuses = pr.get("statuses", {})
        items = [{"filename": p, "sha": fake_sha(p, c),
                  "status": statuses.get(p, "removed" if c is None else "modified")}
                 for p, c in pr["files"].items()]
        return self._send(200, items[(page - 1) * per_page: page * per_page])

    def _contents(self, o: str, r: str, path: str, ref: str | None, accept: str) -> None:
        for (po, pr_, _n), pr in self.owner.prs.items():
            if (po, pr_) == (o, r) and pr["head_sha"] == ref and pr["files"].get(path) is not None:
                content = pr["files"][path]
                data = content if isinstance(content, bytes) else content.encode("utf-8")
                if "application/vnd.github.raw" in accept:
                    return self._send(200, data, ctype="application/vnd.github.raw")
                return self._send(200, {"type": "file", "path": path, "encoding": "base64",
                                        "size": len(data),
                                        "content": base64.b64encode(data).decode()})
        return self._send(404, {"message": "Not Found"})
