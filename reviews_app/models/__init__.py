"""The review app's models: reviews and their findings and triage (``review``), connected
repositories, webhooks and publishing (``hosting``), memories (``memory``) and review rules
(``rules``)."""

from ..rules.models import ReviewRule
from .hosting import (
    CommitStatus,
    Connection,
    GitHubApp,
    Installation,
    Publication,
    PublishedComment,
    PullRequest,
    WebhookDelivery,
)
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

__all__ = ["AppendOnly", "CommitStatus", "Connection", "GitHubApp", "Installation", "Finding", "MaskedOnRead", "Memory", "Publication",
           "PublishedComment", "PullRequest", "RejectReason", "Resolution", "Review", "ReviewRule",
           "TriageDecision", "Verdict", "WebhookDelivery"]
