"""The review app's models, where Django registers them: connected repositories and GitHub Apps
(``hosting``), reviews and their findings (``review``); the feature packages' own models,
pull requests, webhook deliveries, publications and commit statuses
(``reviews_app/prflow/models.py``), triage decisions (``reviews_app/triage/models.py``), memories
(``reviews_app/memories/models.py``) and review rules (``reviews_app/rules/models.py``), are
imported after them, in the order Django always registered them."""

# isort: off
from .hosting import Connection, GitHubApp, Installation
from ..prflow.models import (
    CommitStatus,
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
