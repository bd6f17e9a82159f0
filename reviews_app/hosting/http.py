"""The HTTP plumbing the provider clients share: one ``httpx.Client`` per provider client, the
token in a header only, every answer capped in size, redirects followed only on the same host,
errors turned into ``HostError`` with a plain message that never holds the token, and the
pagination of GitHub/Forgejo (``Link: <…>; rel="next"``) and GitLab (``X-Next-Page``).

Nothing here retries: a ``HostError`` says whether a retry can help (``retryable``) and how long
the provider asked to wait (``retry_after``); the caller (publishing) owns the backoff.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import urllib.parse
from collections.abc import Iterator

import httpx

from common import netguard, turns
from common.retry_after import retry_after_of  # noqa: F401 - its callers import it here

from .base import HostError, RepoRef

MAX_ANSWER_BYTES = 20_000_000   # a JSON answer or a diff; file contents have their own cap
MAX_PAGES = 200                 # 200 pages of 100: far beyond any provider's own file limits
ERROR_BODY_BYTES = 65_536
_TOKEN_OK = re.compile(r"[\x21-\x7e]{1,1000}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_LINK_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


class TooLarge(HostError):
    """An answer (a file, a diff) is larger than the cap the caller gave."""


def quote(segment: str) -> str:
    """One URL path segment from untrusted text: everything but unreserved characters
    escaped, ``/`` included."""
    return urllib.parse.quote(str(segment), safe="")


_WEB_URL = re.compile(r"https?://[^\s\x00-\x1f\x7f]{1,2000}")


def web_url(url: str) -> bool:
    """Whether ``url`` is an http(s) address fit to send as a status's link."""
    return isinstance(url, str) and bool(_WEB_URL.fullmatch(url))


def safe_repo_path(path: str) -> bool:
    """A file path that may go into a URL: relative, no ``.``/``..``/empty segments, no
    control characters (a ``..`` would walk the API's own path once the URL is normalised)."""
    if not isinstance(path, str) or not path or len(path) > 4096 or _CONTROL.search(path):
        return False
    return all(seg not in ("", ".", "..") for seg in path.split("/"))


def _loopback(host: str) -> bool:
    import ipaddress

    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Api:
    """The HTTP side of one provider client. ``name`` is the provider as users know it."""

    def __init__(self, repo: RepoRef, *, name: str, auth: dict[str, str],
                 headers: dict[str, str] | None = None,
                 max_answer_bytes: int = MAX_ANSWER_BYTES):
        self.repo, self.name = repo, name
        self.base = (repo.api_url or "").strip().rstrip("/")
        self.max_answer_bytes = max_answer_bytes
        self._secrets = [s for s in {repo.token, *auth.values()} if s]
        if repo.token and not _TOKEN_OK.fullmatch(repo.token):
            raise HostError(f"The {name} token contains spaces or characters that cannot be sent "
                            "in a header; set it to the token alone.")
        parsed = urllib.parse.urlsplit(self.base)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise HostError(f"The {name} API URL must start with http:// or https://.")
        self.origin = (parsed.scheme, parsed.hostname, parsed.port)
        sent = {"User-Agent": "quorum-review", **(headers or {})}
        if repo.token:
            sent.update(auth)
        self.client = httpx.Client(timeout=httpx.Timeout(repo.timeout), headers=sent,
                                   follow_redirects=False)

    def close(self) -> None:
        self.client.close()

    # --- text that is safe to show ---------------------------------------------------------
    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return _CONTROL.sub(" ", text)

    def _said(self, body: bytes) -> str:
        """What the provider said in an error answer, short and scrubbed."""
        try:
            data = json.loads(body.decode("utf-8", "replace"))
        except ValueError:
            return ""
        parts: list[str] = []
        if isinstance(data, dict):
            for key in ("message", "error", "error_description"):
                value = data.get(key)
                if isinstance(value, str):
                    parts.append(value)
                elif isinstance(value, dict | list):
                    parts.append(json.dumps(value)[:200])
            errors = data.get("errors")
            if isinstance(errors, list):
                for e in errors[:3]:
                    msg = e.get("message") if isinstance(e, dict) else e
                    if isinstance(msg, str):
                        parts.append(msg)
        return self.scrub("; ".join(parts))[:300]

    def failure(self, resp: httpx.Response, what: str, body: bytes) -> HostError:
        status, h = resp.status_code, resp.headers
        said = self._said(body)
        tail = f" {self.name} said: {said}" if said else ""
        wait = retry_after_of(h)
        limited = status == 429 or (status == 403 and (
            h.get("x-ratelimit-remaining") == "0" or "retry-after" in h
            or "rate limit" in said.lower()))
        if limited:
            when = "in a while"
            reset = h.get("x-ratelimit-reset", "")
            if reset.isdigit() and int(reset) > 1_000_000_000 and "retry-after" not in h:
                at = dt.datetime.fromtimestamp(int(reset), tz=dt.UTC)
                when = f"after {at:%Y-%m-%d %H:%M:%S} UTC"
            elif wait is not None:
                when = f"in {int(wait)} seconds"
            return HostError(f"{self.name}'s API rate limit was reached; try again {when}.",
                             status=status, retry_after=wait, retryable=True)
        if status == 401:
            return HostError(f"{self.name} rejected the token (401 Unauthorized): check that it "
                             "is valid and has not expired.", status=status)
        if status == 403:
            return HostError(f"{self.name} refused access to {what} (403): the token may lack "
                             f"the permissions this needs on {self.repo.repository}.{tail}",
                             status=status)
        if status == 404:
            return HostError(f"{self.name} could not find {what} (404), or the token cannot "
                             "see it.", status=status)
        if status in (400, 409, 422):
            return HostError(f"{self.name} refused {what} ({status}).{tail}", status=status)
        retryable = status >= 500 or status == 408
        return HostError(f"{self.name} answered {status} for {what}"
                         + (f": {said}" if said else "."), status=status,
                         retry_after=wait if retryable else None, retryable=retryable)

    def unreachable(self, exc: Exception) -> HostError:
        detail = self.scrub(str(exc) or type(exc).__name__)[:200]
        return HostError(f"Could not reach {self.name} at {self.base}: {detail} (no network?)",
                         retryable=True)

    # --- requests ----------------------------------------------------------------------------
    def url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else self.base + path

    def _same_origin(self, url: str) -> bool:
        p = urllib.parse.urlsplit(url)
        return (p.scheme, p.hostname, p.port) == self.origin

    def call(self, method: str, path: str, what: str, *, params=None, json_body=None,
             accept: str | None = None, limit: int | None = None,
             missing_ok: bool = False, cut: bool = False) -> tuple[httpx.Response | None, bytes]:
        """One request; returns (response, body). The body is read up to ``limit`` bytes
        (default: the answer cap) and ``TooLarge`` is raised past it, or with ``cut`` the
        first ``limit + 1`` bytes are returned (longer than ``limit``: it was cut). With
        ``missing_ok`` a 404 gives (None, b""). A wait on the host: a worker's other runs go
        on meanwhile (common/turns.py). Never inside a database transaction (common/netguard.py)."""
        netguard.before_network(f"A {self.name} request ({what})")
        if not netguard.ALLOW_REMOTE_HOSTS and not _loopback(self.origin[1]):
            raise HostError(f"Requests to {self.name} are blocked here "
                            "(QUORUM_ALLOW_PROVIDER_REQUESTS is false): only loopback hosts "
                            "are called.")
        with turns.waiting():
            return self._call(method, path, what, params=params, json_body=json_body,
                              accept=accept, limit=limit, missing_ok=missing_ok, cut=cut)

    def _call(self, method: str, path: str, what: str, *, params, json_body, accept,
              limit: int | None, missing_ok: bool, cut: bool
              ) -> tuple[httpx.Response | None, bytes]:
        limit = self.max_answer_bytes if limit is None else limit
        url = self.url(path)
        headers = {"Accept": accept} if accept else None
        for _hop in range(4):
            if not self._same_origin(url):
                raise HostError(f"{self.name} sent {what} to another host; it was not followed.")
            try:
                with self.client.stream(method, url, params=params, json=json_body,
                                        headers=headers) as resp:
                    if resp.status_code in (301, 302, 303, 307, 308) and method == "GET":
                        location = resp.headers.get("location", "")
                        url, params = str(httpx.URL(url).join(location)), None
                        continue
                    if missing_ok and resp.status_code == 404:
                        return None, b""
                    if not 200 <= resp.status_code < 300:
                        raise self.failure(resp, what, self._read(resp, ERROR_BODY_BYTES)[0])
                    length = resp.headers.get("content-length", "")
                    if not cut and length.isdigit() and int(length) > limit:
                        raise TooLarge(f"{what} is larger than {limit:,} bytes; it was not read.")
                    body, over = self._read(resp, limit)
                    if over and not cut:
                        raise TooLarge(f"{what} is larger than {limit:,} bytes; it was not read.")
                    return resp, body
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise self.unreachable(exc) from None
        raise HostError(f"{self.name} redirected {what} too many times.")

    @staticmethod
    def _read(resp: httpx.Response, limit: int) -> tuple[bytes, bool]:
        out = bytearray()
        for chunk in resp.iter_bytes():
            out.extend(chunk)
            if len(out) > limit:
                return bytes(out[:limit + 1]), True
        return bytes(out), False

    def file(self, url: str, path: str, ref: str, *, max_bytes: int,
             accept: str = "*/*") -> bytes | None:
        """The repository file ``path`` (at ``url``) at ``ref``; None when it does not exist
        there. Refuses an unsafe path before any request; raises TooLarge past ``max_bytes``."""
        if not safe_repo_path(path):
            raise HostError("The file name is not a safe repository path; it was not fetched.")
        resp, body = self.call("GET", url, f"the contents of {self.scrub(path)[:200]}",
                               params={"ref": ref}, accept=accept, limit=max_bytes,
                               missing_ok=True)
        return None if resp is None else body

    def json(self, method: str, path: str, what: str, *, params=None, json_body=None):
        resp, body = self.call(method, path, what, params=params, json_body=json_body)
        if not body.strip():
            return None
        try:
            return json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise HostError(f"{self.name} sent something that is not JSON for {what}.") from None

    def get(self, path: str, what: str, *, params=None):
        return self.json("GET", path, what, params=params)

    def pages(self, path: str, what: str, *, params: dict | None = None,
              limit: int | None = None, key: str | None = None) -> Iterator[dict]:
        """Every item of a paginated list (``key``: the list inside an object answer)."""
        url: str | None = path
        params = dict(params or {})
        seen = 0
        for _page in range(MAX_PAGES):
            resp, body = self.call("GET", url, what, params=params)
            try:
                data = json.loads(body.decode("utf-8")) if body.strip() else []
            except (ValueError, UnicodeDecodeError):
                raise HostError(f"{self.name} sent something that is not JSON for {what}.") \
                    from None
            if key is not None and isinstance(data, dict):
                data = data.get(key) or []
            if not isinstance(data, list):
                raise HostError(f"{self.name} sent an unexpected answer for {what}.")
            for item in data:
                if isinstance(item, dict):
                    yield item
                    seen += 1
                    if limit is not None and seen >= limit:
                        return
            url, params = self._next(resp, url, params)
            if url is None:
                return
        raise HostError(f"{what} has more than {MAX_PAGES} pages; the rest was not read.")

    def _next(self, resp, url: str, params: dict | None) -> tuple[str | None, dict | None]:
        m = _LINK_NEXT.search(resp.headers.get("link", ""))
        if m:
            nxt = str(httpx.URL(self.url(url)).join(m.group(1)))
            if not self._same_origin(nxt):
                raise HostError(f"{self.name} sent a next page on another host; not followed.")
            return nxt, None
        page = resp.headers.get("x-next-page", "").strip()
        if page.isdigit():
            return url, {**(params or {}), "page": page}
        return None, params
