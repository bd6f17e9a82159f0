"""Decision links: the link in a notification to one person. Signed (a forged or altered token
is refused before the database is asked), single use, expiring after ``QUORUM_LINK_HOURS``,
and only for the person it was sent to. Following one opens the run page at its gate; it
decides nothing (deciding is a POST on that page)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.urls import reverse
from django.utils import timezone

from .models import DecisionLink

SALT = "quorum.decision-link"


def absolute(path: str) -> str:
    """``path`` on this site as a notification's reader reaches it (``QUORUM_BASE_URL``)."""
    return settings.QUORUM_BASE_URL.rstrip("/") + path


def issue(user, opening) -> str:
    """A new link row for ``user`` to ``opening``; returns its signed token."""
    nonce = secrets.token_urlsafe(24)
    DecisionLink.objects.create(
        nonce=nonce, user=user, opening=opening,
        expires_at=timezone.now() + timedelta(hours=settings.QUORUM_LINK_HOURS))
    return signing.dumps({"n": nonce}, salt=SALT)


def link_for(user, opening) -> str:
    """The absolute URL of a new single-use decision link for ``user`` to ``opening``."""
    return absolute(reverse("decision_link", args=[issue(user, opening)]))


@dataclass
class Followed:
    """What following a token came to: ``status`` 302 (``url`` to go to), 404 or 410
    (``reason``: "invalid", "expired" or "used")."""

    status: int
    reason: str = ""
    url: str = ""
    link: DecisionLink | None = None


def follow(token: str, user) -> Followed:
    """Check ``token`` for the signed-in ``user`` and, when it is good, mark it used (a
    conditional update: of two clicks at once, one wins). A link of another person is a
    404, as a forged one is: nothing confirms that it exists."""
    try:
        data = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return Followed(404, "invalid")
    nonce = data.get("n") if isinstance(data, dict) else None
    if not isinstance(nonce, str):
        return Followed(404, "invalid")
    link = (DecisionLink.objects.select_related("opening__run")
            .filter(nonce=nonce, user=user).first())
    if link is None:
        return Followed(404, "invalid")
    if link.used_at is not None:
        return Followed(410, "used", link=link)
    now = timezone.now()
    if link.expires_at <= now:
        return Followed(410, "expired", link=link)
    claimed = DecisionLink.objects.filter(pk=link.pk, used_at__isnull=True,
                                          expires_at__gt=now).update(used_at=now)
    if claimed != 1:  # used (or expired) a moment ago
        return Followed(410, "used", link=link)
    return Followed(302, url=link.opening.run.get_absolute_url() + "#gate", link=link)
