"""The WebSocket's same-origin check.

Browsers send cookies on a WebSocket handshake to any page that asks, and the same-origin
policy does not apply to WebSockets, so the ``Origin`` header is the only thing that tells a
page of this site from a page of another site (or of another port of this host, which shares
its cookies). The check mirrors Django's CSRF origin check: the origin must be this site's
own — the scheme of the request (https behind a proxy that says so through
``SECURE_PROXY_SSL_HEADER``), its ``Host`` (one of ``ALLOWED_HOSTS``) and port — or one of
``CSRF_TRUSTED_ORIGINS``. Scheme, host and port all count, default ports included
(Channels' ``AllowedHostsOriginValidator`` compares the host name only)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
CLOSE_FOREIGN_ORIGIN = 4403


def _origin(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) with the scheme's default port filled in; None if malformed."""
    scheme = scheme.lower()
    if scheme not in DEFAULT_PORTS or not netloc or "@" in netloc:
        return None
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def request_scheme(scope) -> str:
    """``https`` or ``http``, as ``request.is_secure()`` would say for this handshake."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, secure_value = proxy
        value = _header(scope, name.removeprefix("HTTP_").replace("_", "-").lower().encode())
        if value is not None:
            return "https" if value.split(",")[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme", "ws") in ("wss", "https") else "http"


def site_origin(scope) -> tuple[str, str, int] | None:
    """This site's origin as the handshake addresses it; None if its Host is not allowed."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    if not domain or not validate_host(domain, allowed):
        return None
    return _origin(request_scheme(scope), host)


def trusted(origin: tuple[str, str, int], pattern: str) -> bool:
    """Whether a CSRF_TRUSTED_ORIGINS entry (``https://example.com``, ``https://*.example.com``,
    with or without a port) admits ``origin``."""
    parts = urlsplit(pattern)
    wildcard = parts.netloc.startswith("*.")
    wanted = _origin(parts.scheme, parts.netloc[2:] if wildcard else parts.netloc)
    if wanted is None or wanted[0] != origin[0] or wanted[2] != origin[2]:
        return False
    if wildcard:  # as Django's CSRF check: the domain itself or any subdomain
        return is_same_domain(origin[1], "." + wanted[1])
    return wanted[1] == origin[1]


def origin_allowed(scope) -> bool:
    value = _header(scope, b"origin")
    if value is None:
        return False  # every browser sends Origin on a WebSocket handshake
    try:
        parts = urlsplit(value) if "://" in value else None
    except ValueError:  # e.g. an unclosed "[" in the host
        return False
    origin = _origin(parts.scheme, parts.netloc) if parts and not parts.path.strip("/") else None
    if origin is None:  # "null" (sandboxed frames, file: pages) or garbage
        return False
    if origin == site_origin(scope):
        return True
    return any(trusted(origin, p) for p in settings.CSRF_TRUSTED_ORIGINS)


class SameOriginValidator:
    """ASGI middleware: a WebSocket handshake from another origin is closed (4403) before the
    session is read or the consumer runs."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            message = await receive()
            if message["type"] == "websocket.connect":
                await send({"type": "websocket.close", "code": CLOSE_FOREIGN_ORIGIN})
            return None
        return await self.application(scope, receive, send)
