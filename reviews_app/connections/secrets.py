"""A connection's token and webhook secret, for the code that calls the provider or checks a
delivery's signature. Each is read from the environment variable the connection names, or
unsealed from the database. A missing variable or an unreadable sealed value raises
``SecretUnavailable`` with a sentence that names the connection and what to do — never the
secret.
"""

from __future__ import annotations

import os

from common import sealed
from reviews_app.hosting.base import RepoRef

__all__ = ["ENV_PREFIX", "SecretUnavailable", "describe", "repo_ref", "secret_of", "token_of"]

# A connection may name only variables with this prefix: nobody can make Quorum send
# SECRET_KEY, a model provider's key or a database password to a server of their choosing.
ENV_PREFIX = "QUORUM_CONN_"


class SecretUnavailable(ValueError):
    """The token or webhook secret of a connection cannot be had right now (a ValueError:
    the pull-request flow catches that as "the connection cannot be used")."""


def _value(conn, what: str, env_name: str, sealed_value: str) -> str:
    if env_name:
        if not env_name.startswith(ENV_PREFIX):
            raise SecretUnavailable(f"The {what} of connection {conn.pk} names an environment "
                                    f"variable without the {ENV_PREFIX} prefix.")
        value = os.environ.get(env_name, "")
        if not value:
            raise SecretUnavailable(f"The environment variable {env_name} (the {what} of "
                                    f"connection {conn.pk}) is not set in this process.")
        return value
    if sealed_value:
        try:
            return sealed.unseal(sealed_value)
        except sealed.UnsealError:
            raise SecretUnavailable(f"The stored {what} of connection {conn.pk} cannot be read "
                                    "with the current key (QUORUM_SECRETS_KEY or SECRET_KEY "
                                    "changed?): enter it again on the connection's page.") \
                from None
    raise SecretUnavailable(f"Connection {conn.pk} has no {what}.")


def token_of(conn) -> str:
    return _value(conn, "token", conn.token_env, conn.token_sealed)


def secret_of(conn) -> str:
    return _value(conn, "webhook secret", conn.secret_env, conn.secret_sealed)


def repo_ref(conn) -> RepoRef:
    """Where the connection's repository lives, with its token (raises SecretUnavailable)."""
    return RepoRef(provider=conn.provider, api_url=conn.api_url.rstrip("/"),
                   repository=conn.repository, token=token_of(conn))


def describe(conn, what: str) -> dict:
    """For the connection's page: where the token ("token") or secret ("secret") comes from,
    its hint, and a problem sentence if it cannot be had. Never the value."""
    env_name = getattr(conn, f"{what}_env")
    label = "token" if what == "token" else "webhook secret"
    try:
        (token_of if what == "token" else secret_of)(conn)
        problem = ""
    except SecretUnavailable as exc:
        problem = str(exc)
    return {"env": env_name, "hint": "" if env_name else getattr(conn, f"{what}_hint"),
            "stored": bool(getattr(conn, f"{what}_sealed")), "problem": problem, "label": label}
