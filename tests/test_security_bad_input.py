"""No request answers 500. Every URL of both apps (enumerated from the URL conf, like the
access matrix) is asked, as the owner, with ids no row can have in each id position — 20
digits, 2**63, negative, zero — and answers 404; every form and query string of every URL
gets numbers past 64 bits and JSON nested 3,000 levels deep in each field and answers with a
page (a 4xx or the form's message), never 500. The tool-argument parsers below the views
refuse such JSON with a plain message."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from pydantic import BaseModel

from agents_app import engine
from agents_app.models import Run
from agents_app.patterns import safe_json
from agents_app.patterns.base import Decision, InvalidDecision
from agents_app.patterns.react import APPROVAL_GATE, ReAct
from agents_app.patterns.structured import ParseError, parse_structured
from agents_app.patterns.tools.toolbox import registry, run_tool
from agents_app.repos import tools as repo_tools
from tests.test_access_matrix import CASES, runs, target  # noqa: F401 - one run of each kind
from tests.test_change_views import repo  # noqa: F401 - its repository

pytestmark = pytest.mark.django_db(transaction=True)

BAD_IDS = ("99999999999999999999", "9223372036854775808", "-1", "0")
HUGE = "9" * 30
DEEP = "[" * 3000 + "]" * 3000
DEEP_OBJECT = '{"a":' * 3000 + "1" + "}" * 3000
PARAM = re.compile(r"<(?:(\w+):)?(\w+)>")


def app_routes() -> dict[str, str]:
    """URL name → its full route ("reviews/<id:pk>/files/<id:index>/")."""
    routes = {}

    def walk(patterns, prefix):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and p.name in CASES:
                routes[p.name] = prefix + str(p.pattern)

    walk(get_resolver().url_patterns, "/")
    return routes


def test_every_id_in_a_url_uses_the_bounded_converter():
    routes = app_routes()
    assert set(routes) == set(CASES)
    for name, route in routes.items():
        for converter, param in PARAM.findall(route):
            assert converter in ("id", "str"), (name, route)


def urls_with_bad_ids(name: str, route: str, runs) -> list[str]:  # noqa: F811
    """The URL with each id position in turn replaced by each bad id, the others real (no
    primary key is 0; the first file of a review or change has index 0, so it is left out)."""
    kind, extra, _ = CASES[name]
    real = [str(a) for a in ((target(kind, runs).pk, *extra) if kind else ())]
    params = PARAM.findall(route)
    urls = []
    for i, (converter, _) in enumerate(params):
        if converter not in ("id", "int"):
            continue
        for bad in BAD_IDS if i == 0 else BAD_IDS[:3]:  # a file index 0 exists
            values = iter(bad if j == i else real[j] for j in range(len(params)))
            urls.append(PARAM.sub(lambda m: next(values), route))
    return urls


def test_ids_no_row_can_have_answer_404(client, alice, runs):  # noqa: F811
    client.force_login(alice)
    before = snapshot()
    asked = 0
    for name, route in sorted(app_routes().items()):
        method = CASES[name][2]
        for url in urls_with_bad_ids(name, route, runs):
            response = client.get(url) if method == "GET" else client.post(
                url, {"seq": 0, "action": "approve", "verdict": "approve", "decision": "accept"})
            assert response.status_code == 404, (url, response.status_code)
            asked += 1
    assert asked >= 4 * 12
    assert snapshot() == before


def snapshot():
    return list(Run.objects.order_by("pk").values_list("pk", "status", "stage_seq"))


FIELDS = ("seq", "before", "action", "decision", "verdict", "args", "feedback", "steps", "task",
          "pattern", "max_cost_usd", "max_tokens", "max_steps", "index", "comment", "format",
          "q", "status", "min_confidence", "source", "diff", "note", "message", "from", "to",
          "model", "min_cost", "max_cost", "sort", "after", "by", "table")


def real_url(name, runs):  # noqa: F811
    from tests.test_access_matrix import url_for

    return url_for(name, runs)[0]


@pytest.mark.slow  # ~500 requests a value, every page rendered: about half the unit tier's time
@pytest.mark.parametrize("value", [HUGE, "-" + HUGE, "1e400", "nan", DEEP, DEEP_OBJECT])
def test_huge_numbers_and_deep_json_in_every_field_answer_without_500(client, alice, runs,  # noqa: F811
                                                                      value):
    client.force_login(alice)
    for name in sorted(CASES):
        url = real_url(name, runs)
        for field in FIELDS:
            data = {"seq": 0, "action": "approve", "verdict": "approve", "decision": "accept",
                    field: value}
            response = client.get(url, data) if CASES[name][2] == "GET" else client.post(
                url, data)
            assert response.status_code < 500, (name, field, response.status_code)


def test_deep_json_at_the_tool_gate_is_refused_with_a_message(client, alice, runs):  # noqa: F811
    client.force_login(alice)
    run = runs["react"]
    response = client.post(real_url("tool_decision", runs),
                           {"seq": run.stage_seq, "action": "approve", "args": DEEP_OBJECT})
    assert response.status_code == 400
    assert "nested too deeply (more than 64 levels" in response.content.decode()
    run.refresh_from_db()
    assert run.status == "awaiting_tool_approval" and run.stage_seq == runs["react"].stage_seq


def test_a_huge_seq_is_a_stale_decision_not_a_500(client, alice, runs, monkeypatch):  # noqa: F811
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk: None)
    client.force_login(alice)
    for name in ("plan_decision", "tool_decision", "change_decision", "verdict_decision",
                 "accept_all", "finding_decision"):
        response = client.post(real_url(name, runs), {"seq": HUGE, "action": "approve",
                                                      "verdict": "approve",
                                                      "decision": "accept"})
        assert 400 <= response.status_code < 500, (name, response.status_code)


# --- the parsers below the views --------------------------------------------------------
def test_safe_json_refuses_depth_and_keeps_strings():
    assert safe_json.loads('{"a": "[[[[[[", "b": [[1]]}') == {"a": "[[[[[[", "b": [[1]]}
    assert safe_json.nesting_depth('["\\"[[", {"x": []}]') == 3
    assert safe_json.loads("[" * 64 + "]" * 64) is not None
    for text in (DEEP, DEEP_OBJECT, "[" * 65 + "]" * 65):
        with pytest.raises(ValueError, match="nested more than 64 levels"):
            safe_json.loads(text)


class _Reply(BaseModel):
    thought: str
    action: dict


def test_deep_tool_arguments_and_model_replies_are_refused_with_a_message():
    ok, observation, _ = run_tool(registry([]), "calculator", DEEP_OBJECT)
    assert not ok and "nested more than 64 levels" in observation
    # The repository tools parse before they look at the tool, the workspace or the schema.
    ok, observation = repo_tools.call({"read_file": object()}, None, "read_file", DEEP_OBJECT)
    assert not ok and "nested more than 64 levels" in observation
    with pytest.raises(ParseError, match="nested more than 64 levels"):
        parse_structured('{"thought": "x", "action": ' + DEEP_OBJECT + "}", _Reply)


def test_deep_edited_arguments_at_the_react_gate_are_refused():
    pattern = ReAct()
    state = pattern.initial_state("What is 1+1?", {"tools": ["calculator"]})
    state["pending"] = {"iteration": 1, "thought": "", "tool": "calculator",
                        "input": {"expression": "1+1"}}
    with pytest.raises(InvalidDecision, match="nested more than 64 levels"):
        pattern.decide(APPROVAL_GATE, state, Decision(action="approve", edits=DEEP_OBJECT,
                                                      author="alice"))
