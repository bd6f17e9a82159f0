"""Webhooks, the pure part: each provider's signature check and payload reading
(reviews_app/hosting/webhooks.py). The receiver's answers: tests/test_webhook_receiver.py."""

from __future__ import annotations

import pytest

from reviews_app.hosting import webhooks
from reviews_app.hosting.webhooks import BadPayload, HookEvent, Ignored

from .webhook_helpers import (
    SECRET,
    SHA,
    forgejo_comment,
    forgejo_pr,
    github_comment,
    github_pr,
    gitlab_mr,
    gitlab_note,
    sign,
)

BODY = b'{"action": "opened"}'


# --- verify (pure) ------------------------------------------------------------------------

def test_github_signature():
    good = {"X-Hub-Signature-256": "sha256=" + sign(BODY)}
    assert webhooks.verify("github", good, BODY, SECRET)
    assert webhooks.verify("github", {"x-hub-signature-256": good["X-Hub-Signature-256"]},
                           BODY, SECRET)  # header names are case-insensitive
    assert not webhooks.verify("github", good, BODY + b" ", SECRET)  # body changed
    assert not webhooks.verify("github", good, BODY, SECRET + "x")  # other secret
    assert not webhooks.verify("github", {}, BODY, SECRET)  # missing
    assert not webhooks.verify("github", {"X-Hub-Signature-256": sign(BODY)}, BODY, SECRET)
    assert not webhooks.verify("github", {"X-Hub-Signature-256": "sha1=" + sign(BODY)},
                               BODY, SECRET)  # wrong algorithm prefix
    assert not webhooks.verify("github", {"X-Hub-Signature": "sha256=" + sign(BODY)},
                               BODY, SECRET)  # the old SHA-1 header is not enough
    assert not webhooks.verify("github", good, BODY, "")  # no secret: never valid
    assert not webhooks.verify("github", {"X-Hub-Signature-256": "sha256=é"}, BODY, SECRET)


def test_gitlab_token():
    assert webhooks.verify("gitlab", {"X-Gitlab-Token": SECRET}, BODY, SECRET)
    assert not webhooks.verify("gitlab", {"X-Gitlab-Token": SECRET[:-1]}, BODY, SECRET)
    assert not webhooks.verify("gitlab", {"X-Gitlab-Token": ""}, BODY, SECRET)
    assert not webhooks.verify("gitlab", {}, BODY, SECRET)
    assert not webhooks.verify("gitlab", {"X-Gitlab-Token": ""}, BODY, "")


@pytest.mark.parametrize("header", ["X-Forgejo-Signature", "X-Gitea-Signature"])
def test_forgejo_and_gitea_signature(header):
    assert webhooks.verify("forgejo", {header: sign(BODY)}, BODY, SECRET)
    assert webhooks.verify("forgejo", {header: sign(BODY).upper()}, BODY, SECRET)
    assert not webhooks.verify("forgejo", {header: sign(BODY, "other")}, BODY, SECRET)
    assert not webhooks.verify("forgejo", {header: "sha256=" + sign(BODY)}, BODY, SECRET)
    assert not webhooks.verify("forgejo", {}, BODY, SECRET)


def test_unknown_provider_never_verifies():
    assert not webhooks.verify("bitbucket", {"X-Hub-Signature-256": "sha256=" + sign(BODY)},
                               BODY, SECRET)


# --- parse (pure) -------------------------------------------------------------------------

GH = {"X-GitHub-Event": "pull_request"}


@pytest.mark.parametrize("action,kind", [("opened", "opened"), ("synchronize", "synchronize"),
                                         ("reopened", "reopened"), ("closed", "closed")])
def test_github_pull_request_actions(action, kind):
    event = webhooks.parse("github", GH, github_pr(action))
    assert event == HookEvent(kind, 7, "octo/widgets", SHA, "carol", merged=False)


def test_github_merged_draft_and_other_actions():
    merged = webhooks.parse("github", GH, github_pr("closed", merged=True))
    assert merged.kind == "closed" and merged.merged
    assert isinstance(webhooks.parse("github", GH, github_pr("labeled")), Ignored)
    draft = webhooks.parse("github", GH, github_pr("opened", draft=True))
    assert isinstance(draft, Ignored) and "draft" in draft.reason
    assert webhooks.parse("github", GH, github_pr("ready_for_review")).kind == "opened"


def test_github_comment_command():
    h = {"X-GitHub-Event": "issue_comment"}
    event = webhooks.parse("github", h, github_comment("/quorum review please"))
    assert event == HookEvent("command", 7, "octo/widgets", "", "dave")
    assert isinstance(webhooks.parse("github", h, github_comment("looks good")), Ignored)
    assert isinstance(webhooks.parse("github", h, github_comment("/quorum reviewer")), Ignored)
    assert isinstance(webhooks.parse("github", h, github_comment(on_pr=False)), Ignored)
    edited = github_comment() | {"action": "edited"}
    assert isinstance(webhooks.parse("github", h, edited), Ignored)


def test_github_ping_and_unknown_event():
    ping = webhooks.parse("github", {"X-GitHub-Event": "ping"}, {"zen": "hi"})
    assert isinstance(ping, Ignored) and ping.ping
    push = webhooks.parse("github", {"X-GitHub-Event": "push"},
                          {"repository": {"full_name": "octo/widgets"}})
    assert isinstance(push, Ignored) and not push.ping and push.repository == "octo/widgets"


@pytest.mark.parametrize("payload,message", [
    ([], "not a JSON object"),
    ({"action": "opened"}, "repository.full_name"),
    (github_pr() | {"pull_request": {"number": 7}}, "pull_request.head.sha"),
    (github_pr() | {"pull_request": {"number": "7", "head": {"sha": SHA}}}, "pull_request.number"),
    (github_pr() | {"pull_request": {"number": True, "head": {"sha": SHA}}}, "pull_request.number"),
    (github_pr() | {"pull_request": {"number": -1, "head": {"sha": SHA}}}, "pull_request.number"),
    (github_pr(sha="not-a-sha; rm -rf /"), "pull_request.head.sha"),
    (github_pr() | {"action": 5}, "action"),
])
def test_github_bad_shapes(payload, message):
    with pytest.raises(BadPayload, match=message.replace(".", r"\.")):
        webhooks.parse("github", GH, payload)


def test_missing_event_header():
    with pytest.raises(BadPayload, match="event header"):
        webhooks.parse("github", {}, github_pr())


GL_MR = {"X-Gitlab-Event": "Merge Request Hook"}


@pytest.mark.parametrize("action,kind", [("open", "opened"), ("reopen", "reopened"),
                                         ("close", "closed"), ("merge", "closed")])
def test_gitlab_merge_request_actions(action, kind):
    event = webhooks.parse("gitlab", GL_MR, gitlab_mr(action))
    assert (event.kind, event.number, event.repository, event.head_sha, event.sender) == \
        (kind, 3, "group/sub/proj", SHA, "erin")
    assert event.merged == (action == "merge")


def test_gitlab_update_only_with_new_commits():
    assert webhooks.parse("gitlab", GL_MR, gitlab_mr("update", oldrev="f" * 40)).kind == \
        "synchronize"
    ignored = webhooks.parse("gitlab", GL_MR, gitlab_mr("update"))
    assert isinstance(ignored, Ignored) and "new commits" in ignored.reason
    assert isinstance(webhooks.parse("gitlab", GL_MR, gitlab_mr("approved")), Ignored)
    assert isinstance(webhooks.parse("gitlab", GL_MR, gitlab_mr("open", draft=True)), Ignored)


def test_gitlab_note_command():
    h = {"X-Gitlab-Event": "Note Hook"}
    event = webhooks.parse("gitlab", h, gitlab_note())
    assert (event.kind, event.number, event.sender) == ("command", 3, "erin")
    assert isinstance(webhooks.parse("gitlab", h, gitlab_note("lgtm")), Ignored)
    assert isinstance(webhooks.parse("gitlab", h, gitlab_note(noteable="Issue")), Ignored)
    assert isinstance(webhooks.parse("gitlab", {"X-Gitlab-Event": "Push Hook"}, {}), Ignored)


FJ = {"X-Forgejo-Event": "pull_request"}


@pytest.mark.parametrize("action,kind", [("opened", "opened"), ("synchronized", "synchronize"),
                                         ("reopened", "reopened"), ("closed", "closed")])
def test_forgejo_pull_request_actions(action, kind):
    event = webhooks.parse("forgejo", FJ, forgejo_pr(action))
    assert event == HookEvent(kind, 5, "octo/widgets", SHA, "frank")
    gitea = webhooks.parse("forgejo", {"X-Gitea-Event": "pull_request"}, forgejo_pr(action))
    assert gitea == event


def test_forgejo_comment_command_and_others():
    h = {"X-Gitea-Event": "issue_comment"}
    assert webhooks.parse("forgejo", h, forgejo_comment()).kind == "command"
    assert isinstance(webhooks.parse("forgejo", h, forgejo_comment("nice")), Ignored)
    on_issue = forgejo_comment() | {"is_pull": False, "issue": {"number": 5}}
    assert isinstance(webhooks.parse("forgejo", h, on_issue), Ignored)
    assert isinstance(webhooks.parse("forgejo", FJ, forgejo_pr("assigned")), Ignored)


def test_delivery_ids():
    assert webhooks.delivery_id("github", {"X-GitHub-Delivery": "abc"}) == "abc"
    assert webhooks.delivery_id("gitlab", {"X-Gitlab-Event-UUID": "u"}) == "u"
    assert webhooks.delivery_id("gitlab", {"Idempotency-Key": "k"}) == "k"
    assert webhooks.delivery_id("forgejo", {"X-Gitea-Delivery": "g"}) == "g"
    assert webhooks.delivery_id("forgejo", {"X-Forgejo-Delivery": "f"}) == "f"
    assert webhooks.delivery_id("github", {"X-Gitea-Delivery": "g"}) == ""

