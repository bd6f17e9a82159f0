"""Which publishing policy applies to a review, and which of its findings go out.

The connection's policy applies unless the repository's ``.quorum.toml`` (read from the base
branch, kept on the review as ``repo_config``) sets one; the same for the automatic policy's
minimum severity and confidence. Values that are not valid are ignored (the flow reports
them on the review already).
"""

from __future__ import annotations

from ...models import Connection, Finding, Publication, Review
from ...pipeline.schema import SEVERITIES, SEVERITY_RANK

Policy = Connection.Policy
TRIAGED = ("triage", "manual")

WORDS = {
    Policy.AFTER_TRIAGE: "after triage: the findings you accept are published once you "
                         "finalise the verdict",
    Policy.AUTOMATIC: "automatic: findings at or above {sev} severity and {conf:.2f} "
                      "confidence are published as soon as the review is synthesized, with "
                      "the proposed verdict",
    Policy.NEVER: "never: the findings stay in Quorum, nothing is posted on the pull request",
}


def _publish_config(review: Review) -> dict:
    config = review.repo_config if isinstance(review.repo_config, dict) else {}
    section = config.get("publish")
    section = dict(section) if isinstance(section, dict) else {}
    for key, top in (("policy", "publish_policy"), ("min_severity", "min_severity"),
                     ("min_confidence", "min_confidence")):
        if section.get(key) is None and config.get(top) is not None:
            section[key] = config[top]
    return section


def is_fork(review: Review) -> bool:
    """A review made by forking another (issue 33): it publishes nothing on its own, neither
    after triage nor automatically; only a person's Publish does."""
    from agents_app.models import Run

    return Run.objects.filter(pk=review.run_id, forked_from__isnull=False).exists()


def policy_of(review: Review) -> tuple[str, str]:
    """``(policy, where it comes from)`` for a review of a pull request; ("never", ...) for
    any other review."""
    pr = review.pull_request
    if pr is None:
        return Policy.NEVER, "not a pull request"
    chosen = _publish_config(review).get("policy")
    if chosen in Policy.values:
        return chosen, ".quorum.toml"
    return pr.connection.publish_policy, "the connection"


def thresholds(review: Review) -> tuple[str, float]:
    """The automatic policy's minimum severity and confidence."""
    conn = review.pull_request.connection if review.pull_request else None
    sev = conn.auto_min_severity if conn else "high"
    conf = conn.auto_min_confidence if conn else 0.7
    section = _publish_config(review)
    if section.get("min_severity") in SEVERITIES:
        sev = section["min_severity"]
    value = section.get("min_confidence")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
        conf = float(value)
    if sev not in SEVERITIES:
        sev = "high"
    return sev, conf


FORK_WORDS = ("This review is a fork: nothing of it is published to the pull request unless "
              "you press Publish once its verdict is final.")


def describe(review: Review) -> str:
    policy, source = policy_of(review)
    sev, conf = thresholds(review)
    words = WORDS[Policy(policy)].format(sev=sev, conf=conf)
    if policy != Policy.NEVER and is_fork(review):
        return f"{words} (set by {source}). {FORK_WORDS}"
    return f"{words} (set by {source})."


def can_press_publish(review: Review) -> bool:
    """Whether the page offers Publish: under "after triage", and for a fork under
    "automatic" too (a fork was not published when it was synthesized)."""
    policy, _ = policy_of(review)
    return policy == Policy.AFTER_TRIAGE or (policy == Policy.AUTOMATIC and is_fork(review))


def selected(review: Review, trigger: str) -> list[Finding]:
    """The findings a publication of ``trigger`` posts: the accepted ones after triage, the
    kept ones at or above the thresholds when automatic."""
    kept = review.findings.filter(kept=True).order_by("position")
    if trigger in TRIAGED:
        return list(kept.filter(decision=Finding.Decision.ACCEPTED))
    sev, conf = thresholds(review)
    return [f for f in kept if SEVERITY_RANK.get(f.severity, 99) <= SEVERITY_RANK[sev]
            and f.confidence >= conf]


def closed_text(review: Review) -> str:
    """Why publishing is not the default (the pull request is closed or merged), or ''."""
    pr = review.pull_request
    if pr is None or pr.state == "open":
        return ""
    return (f"The pull request was {pr.state} while this review waited: nothing is "
            "published to it unless you choose to.")


def can_publish_now(review: Review, *, to_closed: bool = False) -> str | None:
    """Why the "Publish now" button cannot publish, or None when it can."""
    if review.pull_request_id is None:
        return "This review is not of a pull request."
    if review.pull_request.state != "open" and not to_closed:
        return (f"The pull request is {review.pull_request.state}. To publish to it anyway, "
                "confirm with “Publish to the closed pull request”.")
    policy, _ = policy_of(review)
    if not can_press_publish(review):
        return {Policy.NEVER: "The publishing policy is “never”: nothing is posted.",
                Policy.AUTOMATIC: "The publishing policy is automatic: this review was "
                                  "published when it was synthesized."}[Policy(policy)]
    if not review.final_verdict:
        return "Finalise the verdict first: only triaged findings are published."
    return None


def latest(review: Review) -> Publication | None:
    return review.publications.order_by("-id").first()
