"""CSRF on every state-changing request. The URL patterns of both apps are enumerated the way
the access matrix does (its helpers and its set of runs are reused), so a new view is covered
the day it is added: a POST without a token is refused with 403 and changes nothing in any
table; the same POST with the token, sent as htmx sends it (the ``X-CSRFToken`` header from
``hx-headers`` on <body>), is carried out. Sign-in and sign-out are covered too."""

from __future__ import annotations

import json
import re

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import get_resolver, reverse

from agents_app import engine
from agents_app.models import Dataset, Run
from reviews_app.models import Finding, Review
from tests.conftest import PASSWORD
from tests.review_corpus import GOOD
from tests.test_access_matrix import (  # noqa: F401
    CASES,
    PUBLIC,
    app_url_names,
    runs,
    url_for,
)
from tests.test_change_views import TASK, repo  # noqa: F401 - fixtures
from tests.webhook_helpers import APP_KEY

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HTTP_HX_REQUEST": "true"}


def fingerprint() -> dict:
    """Every row of every table of the two apps: a refused request leaves all of them as
    they were."""
    out = {}
    for model in [*apps.get_app_config("agents_app").get_models(),
                  *apps.get_app_config("reviews_app").get_models()]:
        out[model._meta.label] = list(model.objects.order_by("pk").values())
    return out


def htmx_token(client: Client, url: str) -> str:
    """The token exactly as htmx gets it: from ``hx-headers`` on the page's <body>."""
    html = client.get(url).content.decode()
    match = re.search(r"<body hx-headers='([^']*)'", html)
    assert match, f"no hx-headers on <body> of {url}"
    token = json.loads(match.group(1))["X-CSRFToken"]
    assert len(token) >= 32
    return token


def form_token(html: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert match, "no {% csrf_token %} in the form"
    return match.group(1)


def payload(name: str, runs) -> dict:  # noqa: F811
    """A valid body for each state-changing view, so that with the token it really acts."""
    plan, react, change, review = runs["plan"], runs["react"], runs["change"], runs["review"]
    vote = runs["vote"]
    for r in (plan, react, vote, change, review):
        r.refresh_from_db()
    sec1 = Finding.objects.get(review__run=review, key="SEC-1")
    return {
        "accept_all": {"severity": sec1.severity},
        "finding_decision": {"decision": "pending"},  # undo: accept_all accepted SEC-1
        "settle_rest": {"decision": "rejected"},
        "verdict_decision": {"action": "accept", "seq": review.stage_seq, "reason": "ok"},
        "reopen_triage": {"note": "one more look"},
        "plan_decision": {"action": "approve", "seq": plan.stage_seq,
                          "steps": (plan.state.get("plan") or {}).get("steps") or ["Do it"]},
        "tool_decision": {"action": "approve", "seq": react.stage_seq,  # the call as shown
                          "args": json.dumps((react.state.get("pending") or {}).get("input"))},
        "vote_decision": {"action": "pick", "group": 1, "seq": vote.stage_seq},
        "change_decision": {"action": "discard", "seq": change.stage_seq, "feedback": "no"},
        "cancel_run": {},
        "start_run": {"pattern": "plan_execute", "task": "Plan a picnic, then a walk"},
        "start_review": {"source": "paste", "diff": GOOD},
        "change_new": {"repo": (change.options or {}).get("repo", ""), "base": "main",
                       "task": TASK},
        "memory_edit": {"text": "Asserts are fine in tests.", "path_glob": "tests/**",
                        "effect": "drop"},
        "rule_new": {"title": "Quote shell args", "text": "Pass argument lists.",
                     "path_glob": "**", "severity": "high", "pattern": "", "scope": ""},
        "rule_edit": {"title": "Log errors", "text": "Log, then return 500.",
                      "path_glob": "api/**", "severity": "medium", "pattern": "", "scope": ""},
        "connection_new": CONNECTION | {"repository": "octo/csrf", "token": "t" * 20},
        "connection_edit": CONNECTION | {"publish_policy": "never"},
        "connection_delete": {},
        "github_app_new": {"app_id": "777", "api_url": "", "private_key": APP_KEY,
                           "publish_policy": "after_triage", "active": "on"},
        "github_app_edit": {"app_id": "4242", "api_url": "", "publish_policy": "never",
                            "active": "on"},
        "github_app_delete": {},
        "dataset_new": {"name": "csrf", "file": SimpleUploadedFile(
            "t.jsonl", b'{"task": "Say hi"}\n')},
        "dataset_from_history": {"runs": [plan.pk]},
        "experiment_new": {"name": "csrf", "dataset": Dataset.objects.filter(
            owner=plan.owner).earliest("pk").pk, "patterns": ["plan_execute"],
            "assignments": "*=offline/default", "repetitions": 1, "concurrency": 1,
            "action": "launch"},
        "experiment_cancel": {},
        "team_new": {"name": "CSRF team"},
        "team_member_add": {"username": "dave", "role": "approver"},
        "team_member_role": {"role": "approver"},
        "team_member_remove": {},
        "team_rule_new": TEAM_RULE | {"name": "CSRF rule"},
        "team_rule_edit": TEAM_RULE | {"name": "Merges, edited"},
        "team_rule_move": {"direction": "down"},
        "team_rule_delete": {},
        "team_leave": {},
        "team_delete": {"confirm": "Spare"},
        "notification_preferences": {"email_kinds": ["opened"], "webhook_kinds": ["decided"]},
        "notification_endpoint_new": {"name": "csrf", "style": "signed",
                                      "url": "https://hooks.example.org/csrf"},
        "notification_endpoint_test": {},
        "notification_endpoint_delete": {},
        "gate_assign": {"stop": runs.get("teamgate_stop", 0),
                        "to": f"u:{get_user_model().objects.get(username='alice').pk}"},
        "inbox_decide": {"action": "approve", "picks": [
            f"{runs['inbox'].pk}:{runs['inbox'].stage_seq}"]} if "inbox" in runs else {},
    }.get(name, {"seq": 0})


CONNECTION = {"provider": "github", "repository": "octo/widgets", "api_url": "",
              "publish_policy": "after_triage", "auto_min_severity": "high",
              "auto_min_confidence": "0.7"}


TEAM_RULE = {"required_approvals": 1, "rejections_to_reject": 1, "gate": "merge_request"}


# Decisions first, cancel after them (it ends the plan run), starts last.
ORDER = ["accept_all", "finding_decision", "settle_rest", "verdict_decision",
         "review_apply_fixes", "publish_review",
         "reopen_triage",
         "plan_decision", "tool_decision", "vote_decision", "change_decision", "cancel_run",
         "memory_edit", "memory_approve", "memory_retire", "memory_restore",
         "rule_new", "rule_edit", "rule_approve", "rule_retire", "rule_restore", "rule_delete",
         "rule_suggest",
         "start_run", "start_review", "change_new", "connection_new", "connection_edit",
         "connection_delete", "github_app_new", "github_app_edit", "github_app_delete",
         "fork_form", "run_again", "replay_run", "continue_run",
         "dataset_new", "dataset_from_history", "experiment_new", "experiment_cancel",
         "inbox_decide",
         "team_new", "team_member_add", "team_member_role", "team_member_remove",
         "team_rule_new", "team_rule_edit", "team_rule_move", "team_rule_delete", "team_leave",
         "team_delete", "notification_preferences", "notification_endpoint_new",
         "notification_endpoint_test", "notification_endpoint_delete", "gate_assign"]


def app_url(name: str, runs) -> str:  # noqa: F811
    if name in CASES:
        return url_for(name, runs)[0]
    return reverse(name)  # a URL the access matrix does not know yet fails there, not here


def test_no_view_is_csrf_exempt():
    names = []

    def walk(patterns):
        for p in patterns:
            if hasattr(p, "url_patterns"):
                walk(p.url_patterns)
            else:
                names.append(p.name)
                exempt = getattr(p.callback, "csrf_exempt", False)
                assert not exempt or p.name in PUBLIC, p.name  # PUBLIC: a signed webhook

    walk(get_resolver().url_patterns)
    assert app_url_names() <= set(names) and {"login", "logout"} <= set(names)


def test_posts_without_a_token_are_refused_and_change_nothing(alice, runs):  # noqa: F811
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    token = htmx_token(client, "/")
    before = fingerprint()
    runs_before = list(Run.objects.values_list("pk", "status", "stage_seq", "cancel_requested"))
    for name in sorted(app_url_names()):
        url = app_url(name, runs)
        body = payload(name, runs)
        # No token at all, a forged token, and a valid token from another origin.
        for extra in ({}, {"HTTP_X_CSRFTOKEN": "x" * 64},
                      {"HTTP_X_CSRFTOKEN": token, "HTTP_ORIGIN": "https://evil.example"}):
            response = client.post(url, body, **HTMX, **extra)
            assert response.status_code == 403, (name, extra, response.status_code)
        response = client.post(url, body)  # a plain form post without the hidden field
        assert response.status_code == 403, name
    assert list(Run.objects.values_list("pk", "status", "stage_seq", "cancel_requested")) \
        == runs_before
    assert fingerprint() == before


def as_git_review_with_a_proven_fix(run, change) -> None:
    """Applying fixes needs a review of a local git branch with an accepted, proven fix (the
    run that applies it is only created here, not run)."""
    from agents_app.repos import gitops

    top = change.options["repo"]
    Review.objects.filter(run=run).update(source_kind="git", source_meta={
        "repo": top, "head": gitops.head_sha(top, "main"), "range": "main~1..main"})
    Finding.objects.filter(review__run=run, key="SEC-1").update(decision="accepted", fix={
        "status": "proven", "diff": "@@ -1 +1 @@\n-a\n+b\n", "reason": "", "checks": []})


def as_pull_request(run, monkeypatch) -> None:
    """Publishing needs a review of a pull request (the task is not sent)."""
    from reviews_app.models import Connection, PullRequest
    from reviews_app.prflow.publishing import dispatch

    monkeypatch.setattr(dispatch, "send", lambda pk, countdown=None: None)
    conn = Connection.objects.create(owner=run.owner, provider="github", repository="o/r",
                                     api_url="https://api.github.com")
    Review.objects.filter(run=run).update(
        pull_request=PullRequest.objects.create(connection=conn, number=1))


def test_posts_with_the_htmx_token_are_carried_out(alice, runs, monkeypatch):  # noqa: F811
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    token = htmx_token(client, reverse("run_detail", args=[runs["plan"].pk]))
    accepting = set()
    names = app_url_names()
    for name in [n for n in ORDER if n in names] + sorted(names - set(ORDER)):
        url = app_url(name, runs)
        if name == "reopen_triage":  # a verdict is reopened once the worker closed the review
            engine.run_inline(runs["review"].pk)
        if name == "review_apply_fixes":  # the verdict is final now
            as_git_review_with_a_proven_fix(runs["review"], runs["change"])
        if name == "publish_review":  # the verdict is final now
            as_pull_request(runs["review"], monkeypatch)
        if name == "inbox_decide":  # a gate of its own to decide (the others are decided)
            runs["inbox"] = engine.run_inline(engine.create_run(
                alice, "plan_execute", "Plan a picnic", options={}, enqueue=False,
                models={"planner": "offline/default", "executor": "offline/default",
                        "synthesizer": "offline/default"}).pk)
        if name == "gate_assign":  # a team's run waiting at its gate, to hand on to Carol
            from agents_app.gates.models import GateOpening
            from agents_app.teams.models import Team

            runs["teamgate"] = engine.run_inline(engine.create_run(
                alice, "plan_execute", "Plan a team picnic", options={}, enqueue=False,
                team=Team.objects.get(name="Platform"),
                models={"planner": "offline/default", "executor": "offline/default",
                        "synthesizer": "offline/default"}).pk)
            url = app_url(name, runs)
            runs["teamgate_stop"] = GateOpening.objects.get(run=runs["teamgate"]).pk
        if name == "team_delete":  # a team of Alice's that nothing was made under
            from agents_app.teams import services as team_services

            url = reverse("team_delete", args=[team_services.create_team("Spare", alice).pk])
        if name == "continue_run":  # a run that failed at a stage continues
            Run.objects.filter(pk=runs["plan"].pk).update(status="failed")
        if name == "rule_suggest":  # something to suggest from: a comment left in triage
            Finding.objects.filter(review__run=runs["review"], key="SEC-1").update(
                decision="accepted", comment="Always pass argument lists to subprocess.")
        before = fingerprint()
        response = client.post(url, payload(name, runs), HTTP_X_CSRFTOKEN=token, **HTMX)
        assert response.status_code != 403, (name, response.content[:300])
        if name not in ORDER:  # a page: 405, or (change_detail) the page again, read-only
            assert response.status_code in (200, 405), (name, response.status_code)
            assert fingerprint() == before, name
            continue
        accepting.add(name)
        assert response.status_code in (200, 204), (name, response.status_code,
                                                      response.content[:500])
        assert fingerprint() != before, f"{name}: the POST with its token changed nothing"
    # Every view the access matrix lists as a POST was carried out (and change_new's POST).
    assert {n for n, c in CASES.items() if c[2] == "POST"} | {"change_new"} == accepting
    assert Run.objects.get(pk=runs["plan"].pk).status == "failed"  # cancelled, then failed
    assert Review.objects.count() == 2


def test_plain_form_posts_carry_the_hidden_token(alice, runs):  # noqa: F811
    """Without htmx (no JavaScript), the form's own {% csrf_token %} field is the token."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    page = client.get(reverse("run_detail", args=[runs["plan"].pk])).content.decode()
    token = form_token(page)
    response = client.post(reverse("cancel_run", args=[runs["plan"].pk]),
                           {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert Run.objects.get(pk=runs["plan"].pk).status == "cancelled"


def test_sign_in_needs_the_token(alice):
    client = Client(enforce_csrf_checks=True)
    credentials = {"username": "alice", "password": PASSWORD}
    assert client.post("/accounts/login/", credentials).status_code == 403
    assert "_auth_user_id" not in client.session
    token = form_token(client.get("/accounts/login/").content.decode())
    response = client.post("/accounts/login/", {**credentials, "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response.url == "/"
    assert client.session["_auth_user_id"] == str(alice.pk)


def test_sign_out_needs_the_token(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post("/accounts/logout/").status_code == 403
    assert client.get("/").status_code == 200  # still signed in
    token = form_token(client.get("/").content.decode())  # the sign-out form in the top bar
    response = client.post("/accounts/logout/", {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert client.get("/").status_code == 302  # signed out: back to sign-in
