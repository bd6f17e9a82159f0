"""Pull requests of connected repositories (issue 15): a webhook delivery becomes a review
round (full, or incremental from the head reviewed before), with the repository's
``.quorum.toml`` read from the base commit, the findings a person rejected kept out and the
open findings of the round before carried; a closed or merged pull request ends its running
review. ``delivery`` acts on a delivery; ``inputs`` builds a round's input and options."""

from .delivery import Outcome, handle_delivery

__all__ = ["Outcome", "handle_delivery"]
