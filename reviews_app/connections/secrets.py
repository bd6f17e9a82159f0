"""A connection's token and webhook secret (and a GitHub App's private key and secret), for
the code that calls the provider or checks a delivery's signature. Each is read from the
environment variable the row names, or unsealed from the database. A missing variable or an
unreadable sealed value raises ``SecretUnavailable`` with a sentence that names the row and
what to do — never the secret.

A connection made by a GitHub App installation has no token of its own: ``repo_ref`` mints
(and caches, sealed) an installation token with the App's key — a network call, so never
inside a transaction.
"""

from __future__ import annotations

import os

from common import sealed
from reviews_app.hosting.base import RepoRef

__all__ = ["ENV_PREFIX", "SecretUnavailable", "describe", "repo_ref", "secret_of", "token_of",
           "value_of"]

# A connection may name only variables with this prefix: nobody can make Quorum send
# SECRET_KEY, a model provider's key or a database password to a server of their choosing.
ENV_PREFIX = "QUORUM_CONN_"


class SecretUnavailable(ValueError):
    """The token or webhook secret of a connection cannot be had right now (a ValueError:
    the pull-request flow catches that as "the connection cannot be used")."""


def value_of(label: str, what: str, env_name: str, sealed_value: str) -> str:
    """A secret of the row called ``label`` ("connection 3", "GitHub App 2"): from the
    variable ``env_name``, else unsealed from ``sealed_value``."""
    if env_name:
        if not env_name.startswith(ENV_PREFIX):
            raise SecretUnavailable(f"The {what} of {label} names an environment variable "
                                    f"without the {ENV_PREFIX} prefix.")
        value = os.environ.get(env_name, "")
        if not value:
            raise SecretUnavailable(f"The environment variable {env_name} (the {what} of "
                                    f"{label}) is not set in this process.")
        return value
    if sealed_value:
        try:
            return sealed.unseal(sealed_value)
        except sealed.UnsealError:
            raise SecretUnavailable(f"The stored {what} of {label} cannot be read with the "
                                    "current key (QUORUM_SECRETS_KEY or SECRET_KEY changed?): "
                                    f"enter it again on its page.") from None
    raise SecretUnavailable(f"{label[0].upper()}{label[1:]} has no {what}.")


def token_of(conn) -> str:
    return value_of(f"connection {conn.pk}", "token", conn.token_env, conn.token_sealed)


def secret_of(conn) -> str:
    return value_of(f"connection {conn.pk}", "webhook secret", conn.secret_env,
                    conn.secret_sealed)


def repo_ref(conn) -> RepoRef:
    """Where the connection's repository lives, with its token (raises SecretUnavailable;
    an installation's token may also raise a retryable HostError)."""
    if conn.installation_id is not None:
        from . import github_app

        inst = conn.installation
        return RepoRef(provider=conn.provider, api_url=conn.api_url.rstrip("/"),
                       repository=conn.repository, token=github_app.installation_token(inst),
                       app=True, bot_login=inst.app.bot_login)
    return RepoRef(provider=conn.provider, api_url=conn.api_url.rstrip("/"),
                   repository=conn.repository, token=token_of(conn))


def describe(conn, what: str) -> dict:
    """For the connection's page: where the token ("token") or secret ("secret") comes from,
    its hint, and a problem sentence if it cannot be had. Never the value."""
    label = "token" if what == "token" else "webhook secret"
    if conn.installation_id is not None and (what == "token" or not (
            conn.secret_env or conn.secret_sealed)):
        return {"env": "", "hint": "", "stored": False, "problem": "", "label": label,
                "app": True}
    env_name = getattr(conn, f"{what}_env")
    try:
        (token_of if what == "token" else secret_of)(conn)
        problem = ""
    except SecretUnavailable as exc:
        problem = str(exc)
    return {"env": env_name, "hint": "" if env_name else getattr(conn, f"{what}_hint"),
            "stored": bool(getattr(conn, f"{what}_sealed")), "problem": problem, "label": label}
