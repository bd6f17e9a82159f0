"""The one summary comment per pull request, updated in place.

The status posted while a review runs and the summary published after it are the same
comment: whoever writes first creates it and stores its id on the pull request; every later
write updates it. If it was deleted on the provider, or its id is unknown (a create the
provider saved but answered with an error), the marked comment is looked for before a new
one is created, so a re-run never adds a second one.

While a new round runs the last published summary stays readable: the round's status is a
line on top of it (``compose``), not a replacement.
"""

from __future__ import annotations

from .base import SUMMARY_MARKER, HostClient, HostError

# Marks a status line on top of the summary: closing the pull request before the round is
# published can then say the review stopped, and publishing removes the line.
STATUS_MARKER = "<!-- quorum:status -->"
RULE = "\n\n---\n\n"


def with_marker(body: str) -> str:
    return body if SUMMARY_MARKER in body else f"{SUMMARY_MARKER}\n{body}"


def compose(status: str, summary: str) -> str:
    """The comment's text: ``status`` (one line, Markdown, already safe) on top of the last
    published ``summary`` (either may be empty)."""
    parts = []
    if status:
        parts.append(f"{STATUS_MARKER}\n> {' '.join(status.split())}")
    if summary:
        parts.append(summary.replace(SUMMARY_MARKER, "").strip())
    return RULE.join(parts)


def upsert_summary(client: HostClient, number: int, comment_id: str, body: str,
                   bot: str = "") -> str:
    """Write ``body`` as the pull request's summary comment; returns the comment's id. A
    marked comment counts only when written by ``bot`` (when known): someone quoting our
    marker does not get their comment overwritten."""
    body = with_marker(body)
    if comment_id:
        try:
            client.update_comment(number, comment_id, body)
            return comment_id
        except HostError as exc:
            if exc.status != 404:
                raise
    for c in client.comments(number):
        if SUMMARY_MARKER in c.body and (not bot or c.author.lower() == bot.lower()):
            client.update_comment(number, c.id, body)
            return c.id
    return client.create_comment(number, body)
