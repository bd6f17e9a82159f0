"""The review app's models: reviews and their findings and triage (``review``), connected
repositories, webhooks and publishing (``hosting``), memories (``memory``) and review rules
(``rules``)."""

from .hosting import Connection, Publication, PublishedComment, PullRequest, WebhookDelivery
from .memory import Memory
from .review import (
    AppendOnly,
    Finding,
    MaskedOnRead,
    RejectReason,
    Resolution,
    Review,
    TriageDecision,
    Verdict,
)
from .rules import ReviewRule

__all__ = ["AppendOnly", "Connection", "Finding", "MaskedOnRead", "Memory", "Publication",
           "PublishedComment", "PullRequest", "RejectReason", "Resolution", "Review", "ReviewRule",
           "TriageDecision", "Verdict", "WebhookDelivery"]
