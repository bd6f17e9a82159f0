"""Pull requests of connected repositories (issues 15 and 31): a webhook delivery becomes a
review round (full, or incremental from the head reviewed before), with the repository's
``.quorum.toml`` read from the base commit, the findings a person rejected kept out and the
open findings of the round before carried; a closed or merged pull request ends its running
review. ``delivery`` acts on a delivery; ``inputs`` builds a round's input and options;
``account`` knows who Quorum is on the provider; ``status`` reports the "Quorum" commit
status branch protection can require; ``publishing`` posts a review to its pull request, with
a person in between; ``models`` holds the pull requests, webhook deliveries, publications and
commit statuses; ``urls`` the "Publish now" button; ``templates`` the review page's
pull-request and publication panels.

``handle_delivery`` is imported on first use: the review command and the engine's records
import ``status`` without the HTTP client the delivery needs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Outcome", "handle_delivery"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import delivery

        return getattr(delivery, name)
    raise AttributeError(name)
