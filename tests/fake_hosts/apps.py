"""GitHub Apps in the fake GitHub: the App authenticates with a JWT signed with its private
key (RS256; GitHub refuses one valid for more than ten minutes, or issued in the future), as
``GET /app`` and ``POST /app/installations/{id}/access_tokens``; the tokens it mints act on
the installation's repositories for an hour, as the App's bot ``<slug>[bot]``, and cannot
ask ``GET /user`` who they are."""

from __future__ import annotations

import secrets
import time

import jwt

from .state import Answer, Request

TOKEN_LIFE = 3600
_BAD_JWT = Answer(401, {"message": "A JSON web token could not be decoded",
                        "documentation_url": "https://docs.github.com/rest"})


def _app_of(fake, req: Request) -> dict | None:
    """The App whose valid JWT authenticates the request, or None."""
    auth = req.headers.get("authorization", "")
    if not auth.startswith("Bearer "):
        return None
    token = auth[len("Bearer "):]
    try:
        unverified = jwt.decode(token, options={"verify_signature": False})
        app = fake.apps.get(str(unverified.get("iss")))
        if app is None:
            return None
        claims = jwt.decode(token, app["key"], algorithms=["RS256"],
                            options={"require": ["exp", "iat", "iss"]}, leeway=30)
    except jwt.PyJWTError:
        return None
    if claims["exp"] - claims["iat"] > 660 or claims["iat"] > time.time() + 30:
        return None
    return {**app, "id": str(claims["iss"])}


def handle(fake, req: Request) -> Answer:
    app = _app_of(fake, req)
    if app is None:
        return _BAD_JWT
    parts = req.parts
    if parts == ["app"] and req.method == "GET":
        return Answer(200, {"id": int(app["id"]), "slug": app["slug"], "name": app["name"],
                            "owner": {"login": "octo"}})
    if len(parts) == 4 and parts[:2] == ["app", "installations"] and \
            parts[3] == "access_tokens" and req.method == "POST":
        inst = fake.installations.get(int(parts[2])) if parts[2].isdigit() else None
        if inst is None or inst["app"] != app["id"]:
            return Answer(404, {"message": "Not Found"})
        token = "ghs_" + secrets.token_hex(18)
        exp = time.time() + TOKEN_LIFE
        with fake.lock:
            fake.app_tokens[token] = {"installation": int(parts[2]), "exp": exp,
                                      "login": f"{app['slug']}[bot]", "repos": inst["repos"]}
        return Answer(201, {"token": token, "expires_at": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(exp)), "repository_selection": "selected",
            "permissions": {"pull_requests": "write", "checks": "write", "contents": "read"}})
    return Answer(404, {"message": "Not Found"})
