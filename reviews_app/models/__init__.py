"""The review app's models, where Django registers them: reviews and their findings and triage
(``review``), connected repositories, webhooks and publishing (``hosting``); the feature
packages' own models, triage decisions (``reviews_app/triage/models.py``), memories
(``reviews_app/memories/models.py``) and review rules (``reviews_app/rules/models.py``), are
imported after them, in the order Django always registered them."""

# isort: off
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
from .review import (
    Finding,
    MaskedOnRead,
    RejectReason,
    Resolution,
    Review,
    Verdict,
)
from ..triage.models import AppendOnly, TriageDecision
from ..memories.models import Memory
from ..rules.models import ReviewRule
# isort: on

__all__ = ["AppendOnly", "CommitStatus", "Connection", "GitHubApp", "Installation", "Finding", "MaskedOnRead", "Memory", "Publication",
           "PublishedComment", "PullRequest", "RejectReason", "Resolution", "Review", "ReviewRule",
           "TriageDecision", "Verdict", "WebhookDelivery"]
