"""The one summary comment per pull request, updated in place.

The status comment posted while a review runs and the summary published after it are the
same comment: whoever writes first creates it and stores its id on the pull request; every
later write updates it. If it was deleted on the provider, or its id is unknown, the marked
comment is looked for before a new one is created, so a re-run never adds a second one.
"""

from __future__ import annotations

from .base import SUMMARY_MARKER, HostClient, HostError


def with_marker(body: str) -> str:
    return body if SUMMARY_MARKER in body else f"{SUMMARY_MARKER}\n{body}"


def upsert_summary(client: HostClient, number: int, comment_id: str, body: str) -> str:
    """Write ``body`` as the pull request's summary comment; returns the comment's id."""
    body = with_marker(body)
    if comment_id:
        try:
            client.update_comment(number, comment_id, body)
            return comment_id
        except HostError as exc:
            if exc.status != 404:
                raise
    for c in client.comments(number):
        if SUMMARY_MARKER in c.body:
            client.update_comment(number, c.id, body)
            return c.id
    return client.create_comment(number, body)
