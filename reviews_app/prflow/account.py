"""Who Quorum is on the provider: the account its token writes as.

Quorum's own comments arrive as webhooks like anyone's. The account is learned from the
provider's "who am I" call ("GET /user" on GitHub, GitLab and Forgejo; for a GitHub App, its
bot ``<slug>[bot]``) when the connection is saved, or on first use, and stored on the
connection; a ``/quorum review`` comment written by it is never acted on.
"""

from __future__ import annotations

import logging

from ..hosting.base import HostClient, HostError
from ..models import Connection

log = logging.getLogger("quorum.prflow")


def known(conn: Connection) -> str:
    """The account as far as it is known without asking the provider ('' when not)."""
    if conn.installation_id is not None and conn.installation is not None:
        return conn.installation.app.bot_login
    return conn.bot_login


def learn(conn: Connection, client: HostClient) -> str:
    """The account, asking the provider when it is not known yet (a network call: never
    inside a transaction). Raises HostError when the provider does not say."""
    login = known(conn)
    if login:
        return login
    login = client.whoami().strip()[:150]
    if login:
        Connection.objects.filter(pk=conn.pk).update(bot_login=login)
        conn.bot_login = login
        log.info("connection %s writes as %s", conn.pk, login)
    return login


def try_learn(conn: Connection, client_for) -> str:
    """``learn`` for a page: the account, or '' with the reason logged (the first delivery
    asks again). ``client_for(conn)`` gives the client."""
    try:
        client = client_for(conn)
    except (ValueError, HostError) as exc:
        log.info("connection %s: account not learned (%s)", conn.pk, exc)
        return ""
    try:
        return learn(conn, client)
    except HostError as exc:
        log.info("connection %s: account not learned (%s)", conn.pk, exc)
        return ""
    finally:
        client.close()


def is_ours(conn: Connection, login: str, bot: str) -> bool:
    return bool(bot) and bool(login) and login.strip().lower() == bot.strip().lower()
