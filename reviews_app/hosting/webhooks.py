"""Webhook deliveries from GitHub, GitLab and Forgejo/Gitea: checking that a delivery was
signed with the connection's secret, and reading what it says in one shape.

Plain Python, no Django. The payload is untrusted: every field is type-checked, and a field
that is missing or of the wrong type raises ``BadPayload`` with a plain sentence naming it
(never the payload itself).

``parse`` gives a ``HookEvent`` for what Quorum acts on — a pull request opened, given new
commits ("synchronize"), reopened, closed or merged ("closed", ``merged``), or a comment
starting with ``/quorum review`` ("command") — and ``Ignored(reason)`` for anything else
(other events, other actions, drafts, an update without new commits). A ping is
``Ignored("ping", ping=True)``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["COMMAND", "PROVIDERS", "BadPayload", "HookEvent", "Ignored", "delivery_id",
           "event_name", "parse", "verify"]

PROVIDERS = ("github", "gitlab", "forgejo")
COMMAND = "/quorum review"
_COMMAND_RE = re.compile(r"\s*/quorum\s+review(?:\s|$)")
_FRESH_RE = re.compile(r"\s*/quorum\s+review[ \t]+(?:--)?(?:fresh|again|full)\b", re.IGNORECASE)
_SHA_RE = re.compile(r"[0-9a-fA-F]{7,64}")
_MAX_NUMBER = 2**31 - 1


class BadPayload(ValueError):
    """The delivery is not shaped as its event says. ``str()`` is safe to answer with."""


@dataclass(frozen=True)
class HookEvent:
    kind: str            # opened, synchronize, reopened, closed, command
    number: int
    repository: str      # "owner/name" (GitLab: the full project path), as the provider sent it
    head_sha: str = ""   # empty for a comment command (the comment payload has no head)
    sender: str = ""
    merged: bool = False
    fresh: bool = False  # "/quorum review fresh": a new full round even on a reviewed head


@dataclass(frozen=True)
class Ignored:
    reason: str
    repository: str = ""
    ping: bool = False


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers.items()}


def _eq(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "replace"), b.encode("utf-8", "replace"))


def verify(provider: str, headers: Mapping[str, str], body: bytes, secret: str) -> bool:
    """Whether ``body`` was signed with ``secret`` (GitLab: whether the token header equals
    it). Constant-time comparison; False for an empty secret or a missing header."""
    if not secret or provider not in PROVIDERS:
        return False
    h = _lower(headers)
    if provider == "gitlab":
        token = h.get("x-gitlab-token", "")
        return bool(token) and _eq(token, secret)
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    if provider == "github":
        given = h.get("x-hub-signature-256", "").strip()
        return given.startswith("sha256=") and _eq(given[7:].lower(), digest)
    given = (h.get("x-forgejo-signature") or h.get("x-gitea-signature") or "").strip()
    return bool(given) and _eq(given.lower(), digest)


def delivery_id(provider: str, headers: Mapping[str, str]) -> str:
    """The provider's id of this delivery ('' when absent): replays are refused by it."""
    h = _lower(headers)
    names = {"github": ("x-github-delivery",),
             "gitlab": ("x-gitlab-event-uuid", "idempotency-key"),
             "forgejo": ("x-forgejo-delivery", "x-gitea-delivery")}.get(provider, ())
    for name in names:
        if h.get(name, "").strip():
            return h[name].strip()
    return ""


def event_name(provider: str, headers: Mapping[str, str]) -> str:
    h = _lower(headers)
    if provider == "github":
        return h.get("x-github-event", "").strip()
    if provider == "gitlab":
        return h.get("x-gitlab-event", "").strip()
    return (h.get("x-forgejo-event") or h.get("x-gitea-event") or "").strip()


# --- reading the payload --------------------------------------------------------------------

def _get(payload: Any, path: str, kind: type | tuple[type, ...], *, required: bool = True):
    node = payload
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node or node[part] is None:
            if required:
                raise BadPayload(f"The payload has no {path} field.")
            return None
        node = node[part]
    if kind is int and isinstance(node, bool) or not isinstance(node, kind):
        raise BadPayload(f"The payload's {path} field is not of the expected type.")
    return node


def _number(payload: Any, path: str) -> int:
    value = _get(payload, path, int)
    if not 0 < value <= _MAX_NUMBER:
        raise BadPayload(f"The payload's {path} field is not a pull request number.")
    return value


def _sha(payload: Any, path: str, *, required: bool = True) -> str:
    value = _get(payload, path, str, required=required) or ""
    if value and not _SHA_RE.fullmatch(value):
        raise BadPayload(f"The payload's {path} field is not a commit sha.")
    return value.lower()


def _text(payload: Any, path: str, limit: int = 150) -> str:
    value = _get(payload, path, str, required=False) or ""
    return "".join(c for c in value if c.isprintable())[:limit]


def _repo(payload: Any, path: str) -> str:
    value = _get(payload, path, str)
    if not value or len(value) > 200:
        raise BadPayload(f"The payload's {path} field is not a repository name.")
    return value


def _is_command(body: str) -> bool:
    return bool(_COMMAND_RE.match(body))


def _is_fresh(body: str) -> bool:
    return bool(_FRESH_RE.match(body))


def parse(provider: str, headers: Mapping[str, str], payload: Any):
    """A ``HookEvent`` or ``Ignored``; raises ``BadPayload`` for a payload not shaped as its
    event says."""
    if not isinstance(payload, dict):
        raise BadPayload("The payload is not a JSON object.")
    event = event_name(provider, headers)
    if not event:
        raise BadPayload("The delivery has no event header.")
    if provider == "github":
        return _github(event, payload)
    if provider == "gitlab":
        return _gitlab(event, payload)
    if provider == "forgejo":
        return _forgejo(event, payload)
    raise BadPayload("Unknown provider.")


def _safe(event: str) -> str:
    return "".join(c for c in event if c.isprintable())[:60]


def _repo_or_empty(payload: dict, path: str) -> str:
    value = _get(payload, path, str, required=False)
    return value[:200] if value else ""


_GITHUB_ACTIONS = {"opened": "opened", "synchronize": "synchronize", "reopened": "reopened",
                   "closed": "closed", "ready_for_review": "opened"}


def _github(event: str, p: dict):
    if event == "ping":
        return Ignored("ping", _repo_or_empty(p, "repository.full_name"), ping=True)
    if event == "pull_request":
        action = _get(p, "action", str)
        repo = _repo(p, "repository.full_name")
        if action not in _GITHUB_ACTIONS:
            return Ignored(f"pull_request action {_safe(action)!r} is not acted on", repo)
        draft = _get(p, "pull_request.draft", bool, required=False)
        if draft and action in ("opened", "synchronize", "reopened"):
            return Ignored("draft pull request (mark it ready, or comment /quorum review)", repo)
        return HookEvent(_GITHUB_ACTIONS[action], _number(p, "pull_request.number"), repo,
                         _sha(p, "pull_request.head.sha"), _text(p, "sender.login"),
                         merged=bool(_get(p, "pull_request.merged", bool, required=False)))
    if event == "issue_comment":
        action = _get(p, "action", str)
        repo = _repo(p, "repository.full_name")
        if action != "created":
            return Ignored(f"issue_comment action {_safe(action)!r} is not acted on", repo)
        if _get(p, "issue.pull_request", dict, required=False) is None:
            return Ignored("a comment on an issue, not on a pull request", repo)
        body = _get(p, "comment.body", str)
        if not _is_command(body):
            return Ignored("a comment without the /quorum review command", repo)
        return HookEvent("command", _number(p, "issue.number"), repo, "",
                         _text(p, "comment.user.login") or _text(p, "sender.login"),
                         fresh=_is_fresh(body))
    return Ignored(f"event {_safe(event)!r} is not acted on",
                   _repo_or_empty(p, "repository.full_name"))


_GITLAB_ACTIONS = {"open": "opened", "reopen": "reopened", "close": "closed", "merge": "closed",
                   "update": "synchronize"}


def _gitlab(event: str, p: dict):
    if event == "Merge Request Hook":
        repo = _repo(p, "project.path_with_namespace")
        action = _get(p, "object_attributes.action", str, required=False) or ""
        if action not in _GITLAB_ACTIONS:
            return Ignored(f"merge request action {_safe(action)!r} is not acted on", repo)
        attrs = _get(p, "object_attributes", dict)
        if action == "update" and not attrs.get("oldrev"):
            return Ignored("merge request update without new commits", repo)
        draft = attrs.get("draft") is True or attrs.get("work_in_progress") is True
        if draft and action in ("open", "update", "reopen"):
            return Ignored("draft merge request (mark it ready, or comment /quorum review)",
                           repo)
        return HookEvent(_GITLAB_ACTIONS[action], _number(p, "object_attributes.iid"), repo,
                         _sha(p, "object_attributes.last_commit.id"), _text(p, "user.username"),
                         merged=action == "merge")
    if event == "Note Hook":
        repo = _repo(p, "project.path_with_namespace")
        if _get(p, "object_attributes.noteable_type", str) != "MergeRequest":
            return Ignored("a comment on something other than a merge request", repo)
        action = _get(p, "object_attributes.action", str, required=False)
        if action not in (None, "create"):
            return Ignored(f"note action {_safe(action)!r} is not acted on", repo)
        note = _get(p, "object_attributes.note", str)
        if not _is_command(note):
            return Ignored("a comment without the /quorum review command", repo)
        return HookEvent("command", _number(p, "merge_request.iid"), repo,
                         _sha(p, "merge_request.last_commit.id", required=False),
                         _text(p, "user.username"), fresh=_is_fresh(note))
    return Ignored(f"event {_safe(event)!r} is not acted on",
                   _repo_or_empty(p, "project.path_with_namespace"))


_FORGEJO_ACTIONS = {"opened": "opened", "synchronized": "synchronize", "reopened": "reopened",
                    "closed": "closed"}


def _forgejo(event: str, p: dict):
    if event == "ping":
        return Ignored("ping", _repo_or_empty(p, "repository.full_name"), ping=True)
    if event == "pull_request":
        action = _get(p, "action", str)
        repo = _repo(p, "repository.full_name")
        if action not in _FORGEJO_ACTIONS:
            return Ignored(f"pull_request action {_safe(action)!r} is not acted on", repo)
        return HookEvent(_FORGEJO_ACTIONS[action], _number(p, "pull_request.number"), repo,
                         _sha(p, "pull_request.head.sha"), _text(p, "sender.login"),
                         merged=bool(_get(p, "pull_request.merged", bool, required=False)))
    if event in ("issue_comment", "pull_request_comment"):
        action = _get(p, "action", str)
        repo = _repo(p, "repository.full_name")
        if action != "created":
            return Ignored(f"issue_comment action {_safe(action)!r} is not acted on", repo)
        on_pull = _get(p, "is_pull", bool, required=False) or \
            _get(p, "issue.pull_request", dict, required=False) is not None
        if not on_pull:
            return Ignored("a comment on an issue, not on a pull request", repo)
        body = _get(p, "comment.body", str)
        if not _is_command(body):
            return Ignored("a comment without the /quorum review command", repo)
        return HookEvent("command", _number(p, "issue.number"), repo, "",
                         _text(p, "comment.user.login") or _text(p, "sender.login"),
                         fresh=_is_fresh(body))
    return Ignored(f"event {_safe(event)!r} is not acted on",
                   _repo_or_empty(p, "repository.full_name"))
