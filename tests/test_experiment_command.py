"""``manage.py experiment`` (issue 34): a TOML specification run in the command (``--here``),
its table and JSON, ``show``, the exit status that gates CI (1 when a cell is worse than its
baseline beyond noise, 0 when not) and bad input: one line, exit 2, nothing saved."""

from __future__ import annotations

import json
from io import StringIO

import django
import pytest
from django.core.management import call_command, execute_from_command_line
from django.db import connections

from agents_app import engine
from agents_app.models import Dataset, Experiment, Run

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = ["Name the largest planet.", "List three prime numbers.", "Say hello to the team.",
         "Explain a queue in one line.", "Give two uses of a cache."]
SPEC = """\
name = "cli grid"
dataset = "tasks.jsonl"
repetitions = 2
evaluators = [{ kind = "regex", pattern = "%s" }]
gates = { plan_approval = "approve" }
%s
[[patterns]]
name = "plan_execute"

[[assignments]]
models = { "*" = "offline/default" }
"""


@pytest.fixture(autouse=True)
def here(monkeypatch):
    monkeypatch.setattr(engine.scheduling, "schedule", lambda *a, **k: None)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "tasks.jsonl").write_text("\n".join(
        json.dumps({"id": f"t{i}", "task": t, "reference": t}) for i, t in enumerate(TASKS)))
    return tmp_path


def write_spec(folder, pattern=r"\\w+", extra="") -> str:
    path = folder / f"spec-{len(list(folder.iterdir()))}.toml"
    path.write_text(SPEC % (pattern, extra))
    return str(path)


REFLECTIVE = """\
name = "reflective"
dataset = "tasks.jsonl"
repetitions = 1
evaluators = [{ kind = "regex", pattern = "(?m)^## Revisions" }]
%s
[[patterns]]
name = "reflective"

[[assignments]]
label = "candidate"
models = { "*" = "offline/default", actor = "%s" }
"""


def write_reflective(folder, actor: str, baseline: int | None = None) -> str:
    """The offline actor writes a "## Revisions" section the brief one leaves out."""
    path = folder / f"reflective-{len(list(folder.iterdir()))}.toml"
    path.write_text(REFLECTIVE % (f"baseline = {baseline}" if baseline else "", actor))
    return str(path)


def cmd(*args) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("experiment", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_run_here_prints_the_table_and_a_regression_exits_1(alice, files):
    code, out = cmd("run", write_spec(files), "--here", "--user", "alice")
    first = Experiment.objects.get()
    assert code == 0 and first.status == "completed", out
    assert f"Experiment {first.pk} · cli grid · Completed · 10 of 10 runs ended" in out
    assert "1.000 [1.000, 1.000]" in out
    # A worse model for a role, the same evaluators and cell label, against a baseline: every
    # task worse, the interval below zero — exit 1, the cell marked.
    base = write_reflective(files, "offline/default")
    code, out = cmd("run", base, "--here", "--user", "alice")
    baseline = Experiment.objects.order_by("-pk").first()
    assert code == 0 and "1.000 [1.000, 1.000]" in out, out
    worse = write_reflective(files, "offline/brief", baseline=baseline.pk)
    code, out = cmd("run", worse, "--here", "--user", "alice")
    second = Experiment.objects.order_by("-pk").first()
    assert code == 1, out
    assert "REGRESSION" in out and "worse than the baseline beyond noise" in out
    assert second.baseline_id == baseline.pk
    # The first against itself as baseline: no difference beyond noise — exit 0.
    same = write_spec(files, extra=f"baseline = {first.pk}")
    code, out = cmd("run", same, "--here", "--user", "alice", "--json")
    data = json.loads(out)
    assert code == 0 and data["regressions"] == []
    assert data["cells"][0]["against_baseline"]["pairs"] == 5
    code, out = cmd("show", str(second.pk), "--user", "alice", "--json")
    assert code == 1 and json.loads(out)["regressions"]  # show gates the same way


def test_example_is_a_specification_that_parses(alice):
    import tomllib

    from agents_app.experiments.spec import parse_spec

    code, out = cmd("example")
    data = tomllib.loads(out)
    data.pop("dataset")
    assert code == 0 and parse_spec(data).cells == 4


@pytest.mark.parametrize("args,message", [
    (["run", "{tmp}/nope.toml"], "nope.toml: No such file or directory"),
    (["run", "{bad_toml}"], "is not TOML"),
    (["run", "{unknown_pattern}"], "Unknown pattern 'nope'"),
    (["run", "{no_dataset}"], "dataset: give a file"),
    (["run", "{missing_dataset}"], "missing.jsonl: No such file or directory"),
    (["run", "{no_gates}", "--here"], 'set gates = { plan_approval = "approve" }'),
    (["run", "{bad_rows}"], "1 of 2 rows cannot be used: line 2: not JSON"),
    (["run", "{extra_key}"], "colour: Extra inputs are not permitted"),
    (["show", "abc"], "is not an experiment number"),
    (["show", "999"], "No experiment 999"),
    (["run"], "run needs a SPEC file"),
    (["run", "{spec}", "--user", "nobody"], "nobody"),
    (["run", "{deep}"], "nests too deeply"),
    (["run", "{nul_path}"], "dataset: a file's path, as text"),
    (["run", "{id_text}"], "dataset_id: a dataset's number"),
    (["run", "{both}"], "not both"),
    (["run", "{tmp}"], "is not a file"),
    (["run", "/dev/zero"], "is not a file"),
    (["run", "{spec}", "--timeout", "nan"], "--timeout"),
    (["show", "²"], "is not an experiment number"),
])
def test_bad_input_is_one_line_exit_2_and_saves_nothing(args, message, alice, files,
                                                       capsys, monkeypatch):
    monkeypatch.setattr(connections, "close_all", lambda: None)
    monkeypatch.setattr(django, "setup", lambda *a, **k: None)
    good = SPEC % (r"\\w+", "")
    specs = {
        "spec": good,
        "bad_toml": "name = [unclosed",
        "unknown_pattern": good.replace('name = "plan_execute"', 'name = "nope"'),
        "no_dataset": good.replace('dataset = "tasks.jsonl"\n', ""),
        "missing_dataset": good.replace("tasks.jsonl", "missing.jsonl"),
        "bad_rows": good.replace("tasks.jsonl", "bad.jsonl"),
        "extra_key": good + 'colour = "blue"\n',
        "no_gates": good.replace('gates = { plan_approval = "approve" }\n', ""),
        "deep": "x = " + "[" * 5000 + "]" * 5000 + "\n",
        "nul_path": good.replace('"tasks.jsonl"', '"tasks\\u0000.jsonl"'),
        "id_text": good.replace('dataset = "tasks.jsonl"', 'dataset_id = "abc"'),
        "both": good.replace('dataset = "tasks.jsonl"', 'dataset = "tasks.jsonl"\ndataset_id = 1'),
    }
    (files / "bad.jsonl").write_text('{"task": "ok"}\n{not json\n')
    values = {"tmp": str(files)}
    for name, text in specs.items():
        (files / f"{name}.toml").write_text(text)
        values[name] = str(files / f"{name}.toml")
    argv = []
    for a in args:
        for key, value in values.items():
            a = a.replace("{" + key + "}", value)
        argv.append(a)
    if "--user" not in argv and argv and argv[0] in ("run", "show"):
        argv += ["--user", "alice"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        execute_from_command_line(["manage.py", "experiment", *argv])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert exited.value.code == 2, (argv, err)
    assert len(lines) == 1 and "Traceback" not in err, (argv, err)
    assert message in lines[0], (argv, lines[0])
    assert Experiment.objects.count() == 0 and Dataset.objects.count() == 0
    assert Run.objects.count() == 0
