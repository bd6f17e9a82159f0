"""The fake provider server: a real ``ThreadingHTTPServer`` on 127.0.0.1 (random port), the
scripting API the tests use, the token check, the failure knobs and the request log."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from reviews_app.hosting.base import RepoRef

from . import apps, forgejo, github, gitlab
from .state import Answer, Content, Pull, Repo, Request, fake_sha

PREFIX = {"github": "", "gitlab": "/api/v4", "forgejo": "/api/v1"}
DIALECTS = {"github": github.handle, "gitlab": gitlab.handle, "forgejo": forgejo.handle}


@dataclass
class Knob:
    """A scripted failure: requests whose unquoted route contains ``route`` (and whose method
    is ``method``, when set) get ``status``; ``times`` None = always, else that many times.
    A ``ghost`` knob lets the request do its work first and then answers ``status`` (a write
    the provider saved but reported as failed); a ``delay`` waits that many seconds before
    the request is served (and then serves it)."""

    route: str
    status: int
    method: str | None = None
    times: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: object = None
    hits: int = 0
    ghost: bool = False
    delay: float = 0.0

    def matches(self, req: Request) -> bool:
        return (self.route in req.route and (self.method is None or self.method == req.method)
                and (self.times is None or self.hits < self.times))


class FakeHosts:
    """See the package docstring for the API."""

    def __init__(self, *, token: str | None = "test-token"):
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.requests: list[Request] = []
        self.knobs: list[Knob] = []
        self.max_per_page = 100       # caps every per_page/limit: set to 2 to force pages
        self.patch_limit = 20_000     # larger patches are left out (GitHub) or collapsed
        self.validate_lines = True    # inline comments must sit on lines of the diff
        self.bot_login = "quorum-bot"  # the account the token belongs to ("GET /user")
        self.apps: dict[str, dict] = {}          # GitHub Apps: app id -> {slug, name, key}
        self.installations: dict[int, dict] = {}  # installation id -> {app, repos, account}
        self.app_tokens: dict[str, dict] = {}    # minted token -> {installation, login, exp}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.lock = threading.RLock()

    # --- lifecycle -----------------------------------------------------------------------
    def start(self):
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True, name="fake-hosts")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def api_url(self, provider: str) -> str:
        return self.url + PREFIX[provider]

    def repo_ref(self, provider: str, repository: str | None = None, *,
                 token: str | None = None, timeout: float = 5.0) -> RepoRef:
        name = repository or self._repo(None).name
        return RepoRef(provider, self.api_url(provider), name,  # type: ignore[arg-type]
                       token=self.token or "" if token is None else token, timeout=timeout)

    # --- scripting: repositories, commits, pull requests --------------------------------
    def add_repo(self, name: str) -> Repo:
        with self.lock:
            return self.repos.setdefault(name, Repo(name))

    def _repo(self, name: str | None) -> Repo:
        if name is None:
            if not self.repos:
                raise KeyError("no repository: call add_repo first")
            return next(iter(self.repos.values()))
        return self.repos[name]

    def commit(self, files: dict[str, Content | None], *, repo: str | None = None,
               parent: str | None = None, sha: str | None = None,
               branch: str | None = None) -> str:
        """A commit whose tree is ``parent``'s updated with ``files`` (None deletes)."""
        with self.lock:
            r = self._repo(repo)
            tree = dict(r.commits[parent]) if parent else {}
            for path, content in files.items():
                if content is None:
                    tree.pop(path, None)
                else:
                    tree[path] = content
            sha = sha or fake_sha(r.name, parent, sorted(tree.items()), len(r.commits))
            r.commits[sha] = tree
            if branch:
                r.branches[branch] = sha
            return sha

    def open_pull(self, number: int, *, base: dict[str, Content], head: dict[str, Content | None],
                  repo: str | None = None, title: str = "A change", author: str = "alice",
                  base_ref: str = "main", head_ref: str = "feature", base_sha: str | None = None,
                  head_sha: str | None = None, renames: dict[str, str] | None = None,
                  draft: bool = False) -> Pull:
        """A pull request from a base commit with ``base`` to a head commit: ``base`` updated
        with ``head`` (None deletes a file)."""
        r = self.add_repo(repo) if repo else self._repo(None)
        b = self.commit(base, repo=r.name, sha=base_sha, branch=base_ref)
        h = self.commit(head, repo=r.name, parent=b, sha=head_sha, branch=head_ref)
        with self.lock:
            p = Pull(number=number, title=title, author=author, base_ref=base_ref,
                     head_ref=head_ref, base_sha=b, head_sha=h, draft=draft,
                     renames=dict(renames or {}))
            p.versions.append({"base": b, "start": b, "head": h})
            r.pulls[number] = p
            return p

    def push(self, number: int, files: dict[str, Content | None], sha: str | None = None, *,
             repo: str | None = None) -> str:
        """New commits on the pull request: its head moves to a commit with ``files``
        changed (None deletes); returns the new head sha."""
        r = self._repo(repo)
        p = r.pulls[number]
        new = self.commit(files, repo=r.name, parent=p.head_sha, sha=sha, branch=p.head_ref)
        with self.lock:
            p.head_sha = new
            p.versions.append({"base": p.base_sha, "start": p.base_sha, "head": new})
        return new

    def pull(self, number: int, repo: str | None = None) -> Pull:
        return self._repo(repo).pulls[number]

    # --- failure knobs -------------------------------------------------------------------
    def fail(self, route: str = "", status: int = 500, *, times: int | None = None,
             method: str | None = None, headers: dict[str, str] | None = None,
             body: object = None) -> Knob:
        knob = Knob(route, status, method, times, dict(headers or {}),
                    body if body is not None else {"message": f"Failure {status}"})
        with self.lock:
            self.knobs.append(knob)
        return knob

    def ghost(self, route: str, status: int = 502, *, method: str = "POST",
              times: int | None = 1) -> Knob:
        """The request is carried out, then answered ``status``: a ghost write."""
        knob = Knob(route, status, method, times, {}, {"message": "Bad Gateway"}, ghost=True)
        with self.lock:
            self.knobs.append(knob)
        return knob

    def slow(self, route: str, seconds: float, *, method: str | None = None,
             times: int | None = None) -> Knob:
        """Requests to ``route`` wait ``seconds`` before they are served."""
        knob = Knob(route, 200, method, times, delay=seconds)
        with self.lock:
            self.knobs.append(knob)
        return knob

    def rate_limit(self, route: str = "", *, status: int = 403, retry_after: str | None = None,
                   reset: int | None = None, times: int | None = None) -> Knob:
        """403 (GitHub's primary/secondary limit) or 429 with Retry-After and/or
        x-ratelimit-* headers (``reset``: epoch seconds)."""
        headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0"}
        if reset is not None:
            headers["x-ratelimit-reset"] = str(reset)
            headers["RateLimit-Reset"] = str(reset)
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        return self.fail(route, status, times=times, headers=headers,
                         body={"message": "API rate limit exceeded for user."})

    def clear_failures(self) -> None:
        with self.lock:
            self.knobs.clear()

    # --- reading the log -----------------------------------------------------------------
    def routes(self, method: str | None = None) -> list[str]:
        with self.lock:
            return [r.route for r in self.requests if method in (None, r.method)]

    def writes(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method != "GET"]

    def legacy_failure(self, req: Request) -> Answer | None:
        return None   # FakeGitHub's older knobs

    # --- the token check (per dialect) and who the caller is -----------------------------
    def _bearer(self, req: Request) -> str:
        auth = req.headers.get("authorization", "")
        for prefix in ("Bearer ", "token "):
            if auth.startswith(prefix):
                return auth[len(prefix):]
        return req.headers.get("private-token", "")

    def installation_of(self, req: Request) -> dict | None:
        """The installation a GitHub App installation token (still valid) stands for."""
        got = self.app_tokens.get(self._bearer(req))
        return got if got and got["exp"] > time.time() else None

    def login_for(self, req: Request) -> str:
        """The account a request acts as: the token's user, or the App's bot."""
        inst = self.installation_of(req) if req.provider == "github" else None
        return inst["login"] if inst else self.bot_login

    def authorised(self, req: Request) -> bool:
        if req.provider == "github" and self.installation_of(req) is not None:
            return True
        if self.token is None:
            return True
        auth = req.headers.get("authorization", "")
        ok = {f"Bearer {self.token}", f"token {self.token}"}
        if req.provider == "gitlab":
            return req.headers.get("private-token") == self.token or auth == f"Bearer {self.token}"
        return auth in ok

    # --- GitHub Apps ---------------------------------------------------------------------------
    def add_app(self, app_id: str, slug: str, public_pem: str, name: str = "Quorum") -> None:
        """A registered GitHub App: JWTs signed with its key (RS256) authenticate as it."""
        with self.lock:
            self.apps[str(app_id)] = {"slug": slug, "name": name, "key": public_pem}

    def install(self, installation_id: int, app_id: str, repos: list[str],
                account: str = "octo") -> None:
        with self.lock:
            self.installations[installation_id] = {"app": str(app_id), "repos": list(repos),
                                                   "account": account}

    # --- branch protection ---------------------------------------------------------------------
    def required_green(self, number: int, name: str = "Quorum", repo: str | None = None) -> bool:
        """Whether branch protection requiring the status (or check) ``name`` lets the pull
        request merge: its latest report on the head commit is a success."""
        r = self._repo(repo)
        head = r.pulls[number].head_sha
        with self.lock:
            runs = [c for c in r.check_runs if c["head_sha"] == head and c["name"] == name]
            if runs:
                return runs[-1]["status"] == "completed" and runs[-1]["conclusion"] == "success"
            posted = [x for x in r.statuses.get(head, []) if x["context"] == name]
        return bool(posted) and posted[-1]["state"] == "success"

    def status_states(self, sha: str, name: str = "Quorum", repo: str | None = None) -> list[str]:
        """Every state reported on ``sha`` for ``name``, in order (check runs: status, or
        "completed:<conclusion>")."""
        r = self._repo(repo)
        with self.lock:
            out = [x["state"] for x in r.statuses.get(sha, []) if x["context"] == name]
            for c in r.check_runs:
                if c["head_sha"] == sha and c["name"] == name:
                    out += [h for h in c["history"]]
        return out


def _unauthorised(provider: str) -> Answer:
    if provider == "gitlab":
        return Answer(401, {"message": "401 Unauthorized"})
    return Answer(401, {"message": "Bad credentials",
                        "documentation_url": "https://docs.github.com/rest"})


class _Handler(BaseHTTPRequestHandler):
    owner: FakeHosts
    server_version = "FakeHosts/1.0"
    protocol_version = "HTTP/1.1"   # keep-alive; every answer has a Content-Length
    wbufsize = 1 << 16              # one write per answer

    def log_message(self, *args) -> None:
        pass

    def _serve(self) -> None:
        fake = self.owner
        split = urllib.parse.urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        length = int(headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        route = urllib.parse.unquote(split.path)
        provider = next((p for p in ("gitlab", "forgejo") if route.startswith(PREFIX[p] + "/")),
                        "github")
        path = self.path[len(PREFIX[provider]):]
        req = Request(self.command, path, route[len(PREFIX[provider]):],
                      dict(urllib.parse.parse_qsl(split.query)), headers, body, provider,
                      fake.url + PREFIX[provider])
        with fake.lock:
            fake.requests.append(req)
        answer = self._answer(fake, req)
        data = answer.data()
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in answer.headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _answer(self, fake: FakeHosts, req: Request) -> Answer:
        if req.provider == "github" and (req.route == "/app" or req.route.startswith("/app/")):
            return apps.handle(fake, req)
        if not fake.authorised(req):
            return _unauthorised(req.provider)
        legacy = fake.legacy_failure(req)
        if legacy is not None:
            return legacy
        with fake.lock:
            knob = next((k for k in fake.knobs if k.matches(req)), None)
            if knob is not None:
                knob.hits += 1
        if knob is not None and knob.delay:
            time.sleep(knob.delay)
        elif knob is not None and not knob.ghost:
            return Answer(knob.status, knob.body, dict(knob.headers))
        try:
            with fake.lock:
                answer = DIALECTS[req.provider](fake, req)
        except KeyError:
            return Answer(404, {"message": "404 Not Found" if req.provider == "gitlab"
                                else "Not Found"})
        if knob is not None and knob.ghost and 200 <= answer.status < 300:
            return Answer(knob.status, knob.body, dict(knob.headers))  # done, yet "failed"
        return answer

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815 - http.server


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
