"""The experiment pages (issue 34) for the owner, another user (404, nothing made) and
anonymous visitors, and every form at its edge: an empty, NUL, huge or malformed dataset, a
grid that cannot run, a double launch."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from agents_app import engine
from agents_app.engine import experiment_hooks as hooks
from agents_app.experiments import service
from agents_app.experiments.datasets import Row
from agents_app.experiments.spec import parse_spec
from agents_app.models import Dataset, Experiment, Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def here(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)
    monkeypatch.setattr(hooks, "ANNOUNCE", False)


def upload(client, content: bytes, name="tasks.jsonl", title="My tasks"):
    return client.post(reverse("dataset_new"), {
        "name": title, "file": SimpleUploadedFile(name, content)})


JSONL = b'{"id": "a", "task": "Say hi", "reference": "hi"}\n{"task": "Count to 3"}\n'


def test_upload_jsonl_and_csv_and_read_the_dataset(alice_client, alice):
    answer = upload(alice_client, JSONL)
    ds = Dataset.objects.get()
    assert answer.status_code == 302 and answer["Location"] == ds.get_absolute_url()
    assert [(i.key, i.task, i.reference) for i in ds.items.all()] == [
        ("a", "Say hi", "hi"), ("2", "Count to 3", "")]
    csv = b'id,task,reference\nx,"Add 2 and 2",4\ny,"Name a colour",\n'
    assert upload(alice_client, csv, "t.csv", "csv").status_code == 302
    page = alice_client.get(Dataset.objects.get(name="csv").get_absolute_url())
    assert b"Add 2 and 2" in page.content and b"Start an experiment on it" in page.content


@pytest.mark.parametrize("content,message", [
    (b"", "The submitted file is empty"),
    (b"   \n", "The file is empty"),
    (b'{"task": "a\x00b"}', "NUL"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b'{"task": "ok"}\nnot json\n{"id": 1}\n', "2 of 3 rows cannot be used: line 2: not JSON"),
    (b'{"id": "a", "task": "x"}\n{"id": "a", "task": "y"}\n', "the id 'a' is used twice"),
    (b'{"task": "x", "expected_findings": [{"line_start": 3}]}', "needs a \\\"file\\\""),
    (b'{"task": "x", "expected_findings": [{"file": "a.py", "line_start": 5, "line_end": 2}]}',
     "are not a range"),
    (b"name,other\nx,y\n", "no task column"),
])
def test_a_bad_dataset_is_refused_whole_with_its_rows_named(alice_client, content, message):
    answer = upload(alice_client, content, "t.csv" if b"," in content[:20] and
                    not content.startswith(b"{") else "tasks.jsonl")
    assert answer.status_code == 400
    text = answer.content.decode()
    assert message.replace('\\"', "&quot;") in text.replace("&#x27;", "'"), text[:3000]
    assert Dataset.objects.count() == 0


def test_a_huge_dataset_is_refused(alice_client, settings):
    big = b'{"task": "' + b"x" * (6 * 1024 * 1024) + b'"}'
    answer = upload(alice_client, big)
    assert answer.status_code in (400, 413)
    assert Dataset.objects.count() == 0


def make_dataset(user):
    return service.save_dataset(user, "tasks", [Row(key="a", task="Say hi", reference="hi"),
                                                Row(key="b", task="Count to 3")])


def launch_data(ds, **over):
    data = {"name": "first", "dataset": ds.pk, "patterns": ["plan_execute"],
            "assignments": "*=offline/default", "repetitions": 2,
            "evaluators": "", "reject_note": "", "concurrency": 2,
            "gate_plan_approval": "approve", "action": "preview"}
    data.update(over)
    return data


def test_preview_shows_runs_and_forecast_then_launch_starts_it(alice_client, alice):
    ds = make_dataset(alice)
    answer = alice_client.post(reverse("experiment_new"), launch_data(ds))
    assert answer.status_code == 200, answer.content.decode()[:2000]
    text = answer.content.decode()
    assert "1 cell × 2 tasks × 2 repetitions = 4 runs." in text and "$0" in text
    assert Experiment.objects.count() == 0  # a preview starts nothing
    answer = alice_client.post(reverse("experiment_new"), launch_data(ds, action="launch"))
    experiment = Experiment.objects.get()
    assert answer.status_code == 302 and answer["Location"] == experiment.get_absolute_url()
    assert experiment.runs.count() == 2 and experiment.spec["gates"]["plan_approval"] == \
        "approve"
    page = alice_client.get(experiment.get_absolute_url()).content.decode()
    assert "0 of 4 runs ended" in page and 'id="cell-table"' in page
    assert 'hx-trigger="every 2s"' in page  # it follows the runs while it runs


@pytest.mark.parametrize("over,message", [
    ({"patterns": []}, "This field is required"),
    ({"assignments": "offline/default"}, "is not role=model"),
    ({"assignments": "*=offline/default, *=offline/brief"}, "named twice"),
    ({"assignments": "*=no-such/model"}, "Assignment"),
    ({"options": "{not json"}, "Not JSON"),
    ({"options": '{"debate": {"max_rounds": 2}}'}, "Options for patterns not chosen"),
    ({"evaluators": '{"kind": "exact"}'}, "A JSON list of evaluator objects"),
    ({"repetitions": "0"}, "greater than or equal to 1"),
    ({"name": "a\x00b"}, "Null characters are not allowed"),
    ({"name": ""}, "This field is required"),
    ({"name": "x" * 500}, "at most 200 characters"),
])
def test_a_launch_that_cannot_run_says_why_and_starts_nothing(alice_client, alice, over,
                                                              message):
    ds = make_dataset(alice)
    answer = alice_client.post(reverse("experiment_new"), launch_data(ds, action="launch",
                                                                      **over))
    assert answer.status_code == 400
    assert message in answer.content.decode().replace("&#x27;", "'"), \
        answer.content.decode()[:3000]
    assert Experiment.objects.count() == 0 and Run.objects.count() == 0


def test_another_users_dataset_is_not_offered_nor_accepted(alice_client, bob):
    theirs = make_dataset(bob)
    answer = alice_client.post(reverse("experiment_new"), launch_data(theirs, action="launch"))
    assert answer.status_code == 400 and Experiment.objects.count() == 0


def test_owner_other_user_and_anonymous(client, alice, bob):
    ds = make_dataset(alice)
    experiment = service.launch(alice, ds, parse_spec({
        "name": "e", "patterns": [{"name": "plan_execute"}],
        "assignments": [{"models": {"*": "offline/default"}}]}), enqueue=False)
    pages = [reverse("dataset_detail", args=[ds.pk]), experiment.get_absolute_url(),
             reverse("experiment_csv", args=[experiment.pk]),
             reverse("experiment_json", args=[experiment.pk])]
    client.force_login(alice)
    for url in pages:
        assert client.get(url).status_code == 200, url
    data = json.loads(client.get(reverse("experiment_json", args=[experiment.pk])).content)
    assert data["experiment"]["planned_runs"] == 2
    for url in (reverse("experiment_list"), reverse("experiment_new"), reverse("dataset_new")):
        assert client.get(url).status_code == 200
    client.force_login(bob)
    for url in pages:
        assert client.get(url).status_code == 404, url
    assert client.post(reverse("experiment_cancel", args=[experiment.pk])).status_code == 404
    listing = client.get(reverse("experiment_list")).content
    assert ds.get_absolute_url().encode() not in listing
    assert experiment.get_absolute_url().encode() not in listing
    client.logout()
    for url in [*pages, reverse("experiment_list"), reverse("experiment_new")]:
        assert client.get(url).status_code == 302, url
    experiment.refresh_from_db()
    assert experiment.status == "running"
    client.force_login(alice)
    assert client.post(reverse("experiment_cancel", args=[experiment.pk])).status_code == 302
    experiment.refresh_from_db()
    assert experiment.status == "cancelled"


def test_a_dataset_from_runs_picked_in_the_history(alice_client, alice, bob):
    mine = engine.create_run(alice, "plan_execute", "Mine", options={},
                             models={"planner": "offline/default"}, enqueue=False)
    theirs = engine.create_run(bob, "plan_execute", "Theirs", options={},
                               models={"planner": "offline/default"}, enqueue=False)
    answer = alice_client.post(reverse("dataset_from_history"),
                               {"runs": [mine.pk, theirs.pk], "name": "picked"})
    assert answer.status_code == 400 and Dataset.objects.count() == 0
    answer = alice_client.post(reverse("dataset_from_history"), {"runs": [mine.pk]})
    ds = Dataset.objects.get()
    assert answer.status_code == 302 and [i.task for i in ds.items.all()] == ["Mine"]


def test_the_charts_are_svg_images_of_the_owner_that_run_nothing(client, alice, bob):
    from agents_app.experiments.charts import SVG_CSP

    experiment = service.launch(alice, make_dataset(alice), parse_spec({
        "name": "e", "patterns": [{"name": "plan_execute"}],
        "assignments": [{"models": {"*": "offline/default"}}]}), enqueue=False)
    client.force_login(alice)
    for name in ("cost_vs_score", "heatmap", "latency"):
        url = reverse("experiment_chart", args=[experiment.pk, name])
        answer = client.get(url)
        assert answer.status_code == 200 and answer["Content-Type"] == "image/svg+xml"
        assert answer["Content-Security-Policy"] == SVG_CSP
        assert answer.content.lstrip().startswith((b"<?xml", b"<svg"))
        assert b"<script" not in answer.content
    assert client.get(reverse("experiment_chart", args=[experiment.pk, "nope"])).status_code \
        == 404
    client.force_login(bob)
    assert client.get(reverse("experiment_chart", args=[experiment.pk, "heatmap"])
                      ).status_code == 404


def test_a_launch_sent_twice_makes_one_experiment(alice_client, alice):
    ds = make_dataset(alice)
    page = alice_client.get(reverse("experiment_new")).content.decode()
    import re

    nonce = re.search(r'name="nonce" value="([0-9a-f]+)"', page).group(1)
    data = launch_data(ds, action="launch", nonce=nonce)
    first = alice_client.post(reverse("experiment_new"), data)
    second = alice_client.post(reverse("experiment_new"), data)
    experiment = Experiment.objects.get()
    assert first["Location"] == second["Location"] == experiment.get_absolute_url()
    assert experiment.runs.count() == 2


def test_the_csv_export_never_hands_a_spreadsheet_a_formula(alice_client, alice):
    ds = service.save_dataset(alice, "t", [Row(key="=HYPERLINK(\"http://x\")", task="Say hi")])
    experiment = service.launch(alice, ds, parse_spec({
        "name": "e", "patterns": [{"name": "plan_execute"}],
        "assignments": [{"models": {"*": "offline/default"}}]}), enqueue=False)
    answer = alice_client.get(reverse("experiment_csv", args=[experiment.pk]))
    body = b"".join(answer.streaming_content).decode()
    assert "'=HYPERLINK" in body and ",=HYPERLINK" not in body


def test_a_nonce_sent_again_with_other_settings_is_refused_not_ignored(alice_client, alice):
    ds = make_dataset(alice)
    data = launch_data(ds, action="launch", nonce="n" * 32)
    alice_client.post(reverse("experiment_new"), data)
    answer = alice_client.post(reverse("experiment_new"), {**data, "repetitions": 3})
    assert answer.status_code == 409
    assert "This form was launched already" in answer.content.decode()
    assert Experiment.objects.count() == 1
    # Two launches racing past the check: the database keeps one.
    again = service.launch(alice, ds, parse_spec({
        "name": "first", "patterns": [{"name": "plan_execute"}], "repetitions": 2,
        "assignments": [{"models": {"*": "offline/default"}}]}), enqueue=False, nonce="n" * 32)
    assert again.pk == Experiment.objects.get().pk


@pytest.mark.parametrize("content,message", [
    (b'{"task": "a\\ud800b"}', "unpaired surrogate"),
    (b'{"task": "ok", "id": "\\udfff"}', "unpaired surrogate"),
    (b'{"task": "a\\u0000b"}', "invisible control characters (U+0000 (NUL))"),
    (b'{"task": "x", "id": "rtl\\u202egnp.exe"}', "invisible control characters (U+202E"),
    (b'{"task": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    (b'{"task": "x", "expected_findings": [{"file": "a", "line_start": Infinity}]}',
     "whole numbers from 1"),
    (b'{"task": "x", "expected_findings": [{"file": "a", "line_start": 1e400}]}',
     "whole numbers from 1"),
    (b'{"task": "x", "id": true}', "the id must be text or a whole number"),
    (b'{"task": "' + b"x" * 9000 + b'"}', "the task is 9,000 characters; at most 8,000"),
])
def test_hostile_rows_are_refused_not_a_500(alice_client, content, message):
    answer = upload(alice_client, content)
    assert answer.status_code == 400 and message in answer.content.decode(), \
        answer.content.decode()[:500]
    assert Dataset.objects.count() == 0


def test_an_unclosed_quote_in_a_csv_is_refused_not_merged(alice_client):
    answer = upload(alice_client, b'task,reference\n"abc,1\nxyz,2\n', "t.csv")
    assert answer.status_code == 400 and "unexpected end of data" in answer.content.decode()
    assert Dataset.objects.count() == 0


@pytest.mark.parametrize("runs", [["9223372036854775808"], [str(10**30)], ["1", "x"], ["١"]])
def test_run_numbers_from_the_history_out_of_range_are_refused(alice_client, runs):
    answer = alice_client.post(reverse("dataset_from_history"), {"runs": runs})
    assert answer.status_code == 400 and Dataset.objects.count() == 0


@pytest.mark.parametrize("field,value,message", [
    ("options", '{"plan_execute": ' * 1000 + "1" + "}" * 1000, "nested too deeply"),
    ("evaluators", "[" + "{}" * 60_000 + "]", "at most 100,000"),
    ("pairwise", '{"cells": [1, 5], "rubric": "x"}', "the grid has 1 cells"),
])
def test_deep_or_huge_json_and_a_launch_refused_late_are_400_not_500(alice_client, alice,
                                                                     field, value, message):
    ds = make_dataset(alice)
    answer = alice_client.post(reverse("experiment_new"),
                               launch_data(ds, action="launch", **{field: value}))
    assert answer.status_code == 400 and message in answer.content.decode()
    assert Experiment.objects.count() == 0
