"""Every URL of the two apps, for three people: anonymous → sign-in, another user → 404 on
anything that belongs to the owner (and no state change), the owner → allowed. The test
enumerates the URL patterns, so a new URL without a case here fails it."""

from __future__ import annotations

import pytest
from django.urls import get_resolver, reverse

from agents_app import engine
from agents_app.models import Run
from agents_app.patterns import PATTERNS
from agents_app.patterns.plan_execute_review.service import start_change
from reviews_app import services
from reviews_app.models import Connection, GitHubApp, Memory, ReviewRule
from tests.review_corpus import GOOD

from .test_change_views import OFFLINE, repo  # noqa: F401 - the repository fixture
from .webhook_helpers import make_app, make_conn

pytestmark = pytest.mark.django_db(transaction=True)

# URL name → (kind of run it needs, extra args, whether it changes state)
CASES = {
    "dashboard": (None, (), "GET"),
    "start_run": (None, (), "POST"),
    "run_detail": ("plan", (), "GET"),
    "plan_decision": ("plan", (), "POST"),
    "cancel_run": ("plan", (), "POST"),
    "tool_decision": ("react", (), "POST"),
    "vote_decision": ("vote", (), "POST"),
    "model_call": ("plan", (lambda run: run.model_calls.first().pk,), "GET"),
    "run_trace": ("plan", (), "GET"),
    "run_events": ("plan", (), "GET"),
    "usage": (None, (), "GET"),
    "usage_csv": (None, (), "GET"),
    "change_list": (None, (), "GET"),
    "change_new": (None, (), "GET"),
    "change_detail": ("change", (), "GET"),
    "change_decision": ("change", (), "POST"),
    "change_file": ("change", (0,), "GET"),
    "review_list": (None, (), "GET"),
    "review_calibration": (None, (), "GET"),
    "start_review": (None, (), "POST"),
    "review_detail": ("review", (), "GET"),
    "finding_decision": ("review", ("SEC-1",), "POST"),
    "accept_all": ("review", (), "POST"),
    "settle_rest": ("review", (), "POST"),
    "verdict_decision": ("review", (), "POST"),
    "reopen_triage": ("review", (), "POST"),
    "export_review": ("review", (), "GET"),
    "review_file": ("review", (0,), "GET"),
    "memory_list": (None, (), "GET"),
    "memory_edit": ("memory", (), "POST"),
    "memory_approve": ("memory", (), "POST"),
    "memory_retire": ("memory", (), "POST"),
    "memory_restore": ("memory", (), "POST"),
    "review_rules": (None, (), "GET"),
    "rule_new": (None, (), "POST"),
    "rule_suggest": (None, (), "POST"),
    "rule_edit": ("rule", (), "POST"),
    "rule_approve": ("rule", (), "POST"),
    "rule_retire": ("rule", (), "POST"),
    "rule_restore": ("rule", (), "POST"),
    "rule_delete": ("pending_rule", (), "POST"),
    "publish_review": ("review", (), "POST"),
    "review_apply_fixes": ("review", (), "POST"),
    "connection_list": (None, (), "GET"),
    "connection_new": (None, (), "POST"),
    "connection_detail": ("connection", (), "GET"),
    "connection_edit": ("connection", (), "POST"),
    "connection_delete": ("connection", (), "POST"),
    "fork_page": ("plan", (), "GET"),
    "fork_form": ("plan", (0,), "POST"),
    "run_again": ("plan", (), "POST"),
    "replay_run": ("plan", (), "POST"),
    "continue_run": ("plan", (), "POST"),
    "compare_runs": (None, (), "GET"),
    "inbox": (None, (), "GET"),
    "inbox_decide": (None, (), "POST"),
    "experiment_list": (None, (), "GET"),
    "experiment_new": (None, (), "POST"),
    "judge_prompts": (None, (), "GET"),
    "dataset_new": (None, (), "POST"),
    "dataset_from_history": (None, (), "POST"),
    "dataset_detail": ("dataset", (), "GET"),
    "experiment_detail": ("experiment", (), "GET"),
    "experiment_cancel": ("experiment", (), "POST"),
    "experiment_chart": ("experiment", ("heatmap",), "GET"),
    "experiment_csv": ("experiment", (), "GET"),
    "experiment_json": ("experiment", (), "GET"),
    "github_app_new": (None, (), "POST"),
    "github_app_detail": ("app", (), "GET"),
    "github_app_edit": ("app", (), "POST"),
    "github_app_delete": ("app", (), "POST"),
    # Teams (issue 35): Alice is the admin of "Platform" and a member of "Guild"; Bob is in
    # neither, so every team URL is a 404 to him.
    "gate_panel": ("plan", (), "GET"),
    "gate_assign": ("teamgate", (), "POST"),
    "gate_audit_csv": ("plan", (), "GET"),
    "gate_audit_json": ("plan", (), "GET"),
    "team_list": (None, (), "GET"),
    "team_new": (None, (), "POST"),
    "team": ("team", (), "GET"),
    "team_leave": ("guild", (), "POST"),
    "team_delete": ("team", (), "POST"),
    "team_member_add": ("team", (), "POST"),
    "team_member_role": ("team", (lambda team: member_pk(team, "carol"),), "POST"),
    "team_member_remove": ("team", (lambda team: member_pk(team, "carol"),), "POST"),
    "team_rule_new": ("team", (), "POST"),
    "team_rule_edit": ("team", (lambda team: team_rule_pk(team, first=True),), "POST"),
    "team_rule_move": ("team", (lambda team: team_rule_pk(team, first=True),), "POST"),
    "team_rule_delete": ("team", (lambda team: team_rule_pk(team, first=False),), "POST"),
    "notification_settings": (None, (), "GET"),
    "notification_preferences": (None, (), "POST"),
    "notification_endpoint_new": (None, (), "POST"),
    "notification_endpoint_test": ("endpoint", (), "POST"),
    "notification_endpoint_delete": ("endpoint", (), "POST"),
    "decision_link": ("link", (), "GET"),
}
# Public on purpose, with their own checks and tests: the webhook receivers (a signature;
# tests/test_webhook_receiver.py, tests/test_github_app.py).
PUBLIC = {"webhook", "github_app_webhook"}


def app_url_names() -> set[str]:
    names = set()

    def walk(patterns):
        for p in patterns:
            if hasattr(p, "url_patterns"):
                walk(p.url_patterns)
            elif p.name and p.callback.__module__.startswith(("agents_app", "reviews_app")):
                names.add(p.name)

    walk(get_resolver().url_patterns)
    return names - PUBLIC


def test_every_url_has_a_case():
    assert app_url_names() == set(CASES)


@pytest.fixture
def runs(alice, repo, monkeypatch):  # noqa: F811
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)
    monkeypatch.setattr("agents_app.notify.deliver.send", lambda ids: None)
    plan = engine.run_inline(engine.create_run(
        alice, "plan_execute", "Plan a picnic", options={}, enqueue=False,
        models={"planner": "offline/default", "executor": "offline/default",
                "synthesizer": "offline/default"}).pk)
    react = engine.run_inline(engine.create_run(
        alice, "react", "What is 6*7?", options={"approval": ["calculator"]}, enqueue=False,
        models={"agent": "offline/default"}).pk)
    vote = engine.run_inline(engine.create_run(
        alice, "vote", "Name the capital of Australia", options={}, enqueue=False,
        models=dict.fromkeys(PATTERNS["vote"].roles, "offline/default")).pk)
    change = engine.run_inline(start_change(
        alice, repo=str(repo), base="main", models=OFFLINE, auto_approve_plan=True,
        task='replace "Helo world" with "Hello world" in README.md', enqueue=False).pk)
    inp = services.from_text(GOOD)
    review = engine.run_inline(services.start_review(alice, inp, services.prepare(inp),
                                                     enqueue=False).pk)
    assert plan.is_waiting and react.is_waiting and change.is_waiting and review.is_waiting
    assert vote.is_waiting
    # The memories page's URLs act on this memory (found by ``target``; not a run, so it is
    # not in the dict other tests iterate).
    Memory.objects.create(owner=alice, path_glob="tests/**", text="Asserts are fine.")
    make_conn(alice)  # Alice's connection (not a run: ``target`` finds it)
    make_app(alice)  # and her GitHub App
    # The rules page's URLs act on these (the second one, a suggestion, is deleted).
    for title in ("Log errors", "No eval"):
        ReviewRule.objects.create(owner=alice, title=title, text=f"{title}.", path_glob="**")
    # An experiment of hers (not a run: ``target`` finds it and its dataset).
    from agents_app.experiments import service as experiments
    from agents_app.experiments.datasets import Row
    from agents_app.experiments.spec import parse_spec

    monkeypatch.setattr("agents_app.engine.experiment_hooks.ANNOUNCE", False)
    ds = experiments.save_dataset(alice, "tasks", [Row(key="a", task="Say hi")])
    experiments.launch(alice, ds, parse_spec({
        "name": "e", "patterns": [{"name": "plan_execute"}],
        "assignments": [{"models": {"*": "offline/default"}}]}), enqueue=False)
    make_teams(alice)
    # A webhook endpoint of hers, and a decision link to her plan gate (issue 35).
    from agents_app.gates.models import GateOpening
    from agents_app.notify import links
    from agents_app.notify.models import Endpoint
    from common import sealed

    Endpoint.objects.create(owner=alice, name="hook", style="signed",
                            url_sealed=sealed.seal("http://127.0.0.1:9/hook"),
                            secret_sealed=sealed.seal("whsec_" + "A" * 44))
    links.issue(alice, GateOpening.objects.get_or_create(
        run=plan, opened_seq=plan.stage_seq, defaults={"gate": plan.gate, "seq": plan.stage_seq})[0])
    return {"plan": plan, "react": react, "vote": vote, "change": change, "review": review}


def make_teams(alice):
    """Platform (Alice its admin, Carol a member, two gate rules) and Guild (Carol its
    admin, Alice a member: she may leave it). Dave is in none (the one to add)."""
    from django.contrib.auth import get_user_model

    from agents_app.gates.models import GateRule
    from agents_app.teams.models import Membership, Team

    User = get_user_model()
    carol = User.objects.create_user("carol")
    User.objects.create_user("dave")
    platform = Team.objects.create(name="Platform", created_by=alice)
    guild = Team.objects.create(name="Guild", created_by=carol)
    for team, user, role in ((platform, alice, "admin"), (platform, carol, "member"),
                             (guild, carol, "admin"), (guild, alice, "member")):
        Membership.objects.create(team=team, user=user, role=role)
    for position, name in enumerate(("Merges", "Plans")):
        GateRule.objects.create(team=platform, name=name, position=position)


def member_pk(team, username) -> int:
    """A user's id (the member URLs take it whether or not they are still a member)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username).pk


def team_rule_pk(team, *, first: bool) -> int:
    """The team's first or last rule by id; once deleted, an id no row has (404)."""
    rules = team.gate_rules.order_by("pk")
    rule = rules.first() if first else rules.last()
    return rule.pk if rule else 2**62


def target(kind, runs):
    """The run of that kind, or Alice's first connection for the connection pages."""
    if kind == "connection":  # once a test deleted it: an id no row has (404)
        return Connection.objects.filter(owner__username="alice").order_by("pk").first() \
            or Connection(pk=2**62)
    if kind == "app":  # once a test deleted it: an id no row has (404)
        return GitHubApp.objects.filter(owner__username="alice").order_by("pk").first() \
            or GitHubApp(pk=2**62)
    if kind == "memory":
        return Memory.objects.filter(owner=runs["review"].owner).earliest("pk")
    if kind == "rule":
        return ReviewRule.objects.filter(owner=runs["review"].owner).earliest("pk")
    if kind == "pending_rule":  # once deleted: an id no row has (404)
        return ReviewRule.objects.filter(owner=runs["review"].owner, status="pending") \
            .order_by("pk").last() or ReviewRule(pk=2**62)
    if kind == "experiment":
        from agents_app.models import Experiment

        return Experiment.objects.filter(owner=runs["plan"].owner).earliest("pk")
    if kind == "teamgate":  # a team's run at its gate (the CSRF test makes one), else any
        return runs.get("teamgate") or runs["plan"]
    if kind in ("team", "guild"):
        from agents_app.teams.models import Team

        return Team.objects.get(name="Platform" if kind == "team" else "Guild")
    if kind == "dataset":
        from agents_app.models import Dataset

        return Dataset.objects.filter(owner=runs["plan"].owner).earliest("pk")
    if kind == "endpoint":  # once a test deleted it: an id no row has (404)
        from agents_app.notify.models import Endpoint

        return Endpoint.objects.filter(owner=runs["plan"].owner, team__isnull=True) \
            .order_by("pk").first() or Endpoint(pk=2**62)
    if kind == "link":  # the token of her decision link (signing it writes nothing)
        from types import SimpleNamespace

        from django.core import signing

        from agents_app.notify import links
        from agents_app.notify.models import DecisionLink

        nonce = DecisionLink.objects.filter(user=runs["plan"].owner).earliest("pk").nonce
        return SimpleNamespace(pk=signing.dumps({"n": nonce}, salt=links.SALT))
    return runs[kind]


def url_for(name, runs):
    kind, extra, method = CASES[name]
    # An extra argument may depend on the run (a callable of it), like one of its model calls.
    obj = target(kind, runs) if kind else None
    extra = tuple(e(obj) if callable(e) else e for e in extra)
    args = (obj.pk, *extra) if kind else ()
    return reverse(name, args=args), method, kind


def snapshot():
    return list(Run.objects.order_by("pk").values_list("pk", "status", "stage_seq"))


# One set of runs serves every URL (building it is the slow part), so each test loops.
def test_anonymous_is_sent_to_sign_in(client, runs):
    before = snapshot()
    for name in sorted(CASES):
        url, method, _ = url_for(name, runs)
        response = client.get(url) if method == "GET" else client.post(url, {"seq": 0})
        assert response.status_code == 302, name
        assert response.url.startswith("/accounts/login/"), name
    assert snapshot() == before


def test_another_user_gets_404_and_changes_nothing(client, bob, runs):
    client.force_login(bob)
    before = snapshot()
    for name in sorted(n for n, c in CASES.items() if c[0]):
        url, method, _ = url_for(name, runs)
        response = client.get(url) if method == "GET" else client.post(
            url, {"seq": 0, "action": "approve", "verdict": "approve", "decision": "accept"})
        assert response.status_code == 404, name
    assert snapshot() == before


def test_the_owner_may_open_every_page(client, alice, runs):
    client.force_login(alice)
    for name in sorted(n for n, c in CASES.items() if c[2] == "GET"):
        url, _, _ = url_for(name, runs)
        response = client.get(url)
        assert response.status_code in (200, 302), (name, response.status_code)
        if response.status_code == 302:
            assert not response.url.startswith("/accounts/login/"), name
