"""A GitHub App's own calls: who the App is, and installation tokens.

Plain Python, no Django. The App authenticates as itself with a JSON Web Token signed with
its private key (RS256, issued a minute in the past and valid for nine minutes: GitHub takes
at most ten, and clocks drift), and mints for each installation a token that acts on the
installed repositories for an hour. Installation events arrive at the App's webhook; this
module reads them too (``installation_event``).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field

import jwt

from .base import HostError, RepoRef
from .http import Api, quote

JWT_BACK = 60       # seconds: iat this far in the past, against clock drift
JWT_LIFE = 540      # seconds: GitHub refuses a JWT valid for more than ten minutes
MAX_REPOS = 5000


def app_jwt(app_id: str, private_key: str, now: float | None = None) -> str:
    """The JWT the App authenticates with. Raises HostError (never with the key in it) when
    the key is not an RSA private key in PEM."""
    now = time.time() if now is None else now
    try:
        return jwt.encode({"iat": int(now) - JWT_BACK, "exp": int(now) + JWT_LIFE,
                           "iss": str(app_id)}, private_key, algorithm="RS256")
    except (ValueError, TypeError, jwt.PyJWTError):
        raise HostError("The GitHub App's private key could not be used: give the .pem file "
                        "GitHub generated for the App (an RSA private key).") from None


@dataclass
class AppInfo:
    id: str
    slug: str
    name: str


@dataclass
class InstallationToken:
    token: str = field(repr=False)
    expires_at: dt.datetime


class AppClient:
    """The App's calls, authenticated with a fresh JWT."""

    def __init__(self, api_url: str, app_id: str, private_key: str, *, timeout: float = 20.0):
        token = app_jwt(app_id, private_key)
        ref = RepoRef("github", api_url, "app/app", token=token, timeout=timeout)
        self.api = Api(ref, name="GitHub", auth={"Authorization": f"Bearer {token}"},
                       headers={"Accept": "application/vnd.github+json",
                                "X-GitHub-Api-Version": "2022-11-28"})

    def close(self) -> None:
        self.api.close()

    def app(self) -> AppInfo:
        d = self.api.get("/app", "the GitHub App")
        if not isinstance(d, dict) or not d.get("slug"):
            raise HostError("GitHub sent an unexpected answer for the GitHub App.")
        return AppInfo(id=str(d.get("id") or ""), slug=str(d["slug"])[:100],
                       name=str(d.get("name") or "")[:150])

    def installation_token(self, installation_id: int) -> InstallationToken:
        d = self.api.json("POST", f"/app/installations/{quote(str(int(installation_id)))}"
                                  "/access_tokens", "an installation token")
        if not isinstance(d, dict) or not isinstance(d.get("token"), str) or not d["token"]:
            raise HostError("GitHub sent an unexpected answer for the installation token.")
        try:
            expires = dt.datetime.fromisoformat(str(d.get("expires_at")).replace("Z", "+00:00"))
        except ValueError:
            expires = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=30)
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=dt.UTC)
        return InstallationToken(token=d["token"], expires_at=expires)


# --- installation events ----------------------------------------------------------------------
@dataclass
class InstallationChange:
    """What an ``installation`` or ``installation_repositories`` event says: the
    installation, its account, whether it is (still) active, and repositories added or
    removed (``full`` = the list is the installation's whole list)."""

    installation_id: int
    account: str
    app_slug: str
    active: bool
    added: list[str]
    removed: list[str]
    action: str


def _names(items: object) -> list[str]:
    out = []
    for r in items if isinstance(items, list) else []:
        name = r.get("full_name") if isinstance(r, dict) else None
        if isinstance(name, str) and 0 < len(name) <= 200 and name.count("/") == 1:
            out.append(name)
    return out[:MAX_REPOS]


def installation_event(event: str, payload: dict) -> InstallationChange | None:
    """The change an installation event makes, or None for an event that is not one (or an
    action Quorum does not act on). Raises ValueError for a payload not shaped as one."""
    if event not in ("installation", "installation_repositories"):
        return None
    inst = payload.get("installation")
    action = payload.get("action")
    if not isinstance(inst, dict) or not isinstance(inst.get("id"), int) \
            or isinstance(inst.get("id"), bool) or not isinstance(action, str):
        raise ValueError("The payload has no installation id or action.")
    account = inst.get("account") if isinstance(inst.get("account"), dict) else {}
    login = str(account.get("login") or "")[:150]
    slug = str(inst.get("app_slug") or "")[:100]
    if event == "installation":
        if action in ("created", "new_permissions_accepted", "unsuspend"):
            return InstallationChange(inst["id"], login, slug, True,
                                      _names(payload.get("repositories")), [], action)
        if action in ("deleted", "suspend"):
            return InstallationChange(inst["id"], login, slug, False, [],
                                      _names(payload.get("repositories")), action)
        return None
    if action not in ("added", "removed"):
        return None
    return InstallationChange(inst["id"], login, slug, True,
                              _names(payload.get("repositories_added")),
                              _names(payload.get("repositories_removed")), action)
