"""``manage.py fork``, ``replay`` and ``compare`` (issue 33): the command line mirrors the run
page's fork, replay and comparison. Each command drives the real engine (scripted models
behind LiteLLM's real call path, so the provider's log shows every call really made), and
every flag is refused like a form field: one line, exit status 2, nothing saved."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from io import StringIO

import django
import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command, execute_from_command_line
from django.db import connections

from agents_app import engine
from agents_app.forking.cli import MAX_EDIT_BYTES
from agents_app.models import Checkpoint, Event, ModelCall, PlanVersion, Run
from agents_app.patterns.base import Decision
from tests.conftest import scripted_models

TASK = "Collect the logs, then find the error, then write a report."


def start(owner, *, auto_approve=False, models=None, **kw) -> Run:
    run = engine.create_run(owner, "plan_execute", TASK, options={"auto_approve": auto_approve},
                            models=models or scripted_models(), enqueue=False, **kw)
    return engine.run_inline(run.pk)


def finished(owner) -> Run:
    """A completed run: 0 start, 1 plan:1, 2 gate:plan_approval, 3–5 the steps, 6 the answer,
    7 its end."""
    run = start(owner)
    engine.decide(run, owner, run.stage_seq, Decision(action="approve", author="alice"),
                  enqueue=False)
    run = engine.run_inline(run.pk)
    assert run.status == "completed", run.error
    return run


def cmd(name: str, *args, stdin=None) -> tuple[int, str]:
    """The command through call_command: (exit status, stdout)."""
    out = StringIO()
    extra = {"stdin": stdin} if stdin is not None else {}
    try:
        call_command(name, *args, stdout=out, **extra)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def queued(monkeypatch):
    """Runs the commands hand to the worker, kept off the broker."""
    sent: list[int] = []
    monkeypatch.setattr(engine.scheduling, "schedule", lambda pk, countdown=None: sent.append(pk))
    return sent


# --- fork ---------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_fork_at_the_plan_gate_with_an_edit_and_another_executor(alice, scripted, tmp_path):
    parent = finished(alice)
    made = len(scripted.calls)
    steps = list(parent.state["plan"]["steps"])
    edit = tmp_path / "plan.json"
    edit.write_text(json.dumps({"steps": [steps[0], "Check the disk usage first"]}))
    code, out = cmd("fork", str(parent.pk), "--from", "gate:plan_approval", "--edit", str(edit),
                    "--model", "executor=scripted/other", "--gates", "approve", "--wait",
                    "--json", "--user", "alice")
    data = json.loads(out)
    assert code == 0 and data["status"] == "completed", out
    fork = Run.objects.get(pk=data["run"])
    assert data["url"] == fork.get_absolute_url() == f"/runs/{fork.pk}/"
    assert data["forked_from"] == parent.pk and data["seq"] == 2 and data["edited"]
    assert data["stage"] == "gate:plan_approval" and data["models"] == {
        "executor": "scripted/other"}
    assert fork.state["plan"]["steps"] == [steps[0], "Check the disk usage first"]
    assert PlanVersion.objects.get(run=fork, version=2).reason == "Edited when forking"
    # Nothing before the gate ran again: two steps and the answer, no planner.
    assert [c.role for c in scripted.calls[made:]] == ["executor", "executor", "synthesizer"]
    assert data["calls"] == {"made": 3, "replayed": 0}
    assert Checkpoint.objects.get(run=fork, seq=3).decision["how"] == "approved"


@pytest.mark.django_db(transaction=True)
def test_fork_from_a_stage_number_is_queued_for_the_worker(alice, scripted, queued):
    parent = finished(alice)
    made = len(scripted.calls)
    code, out = cmd("fork", f"#{parent.pk}", "--from", "4", "--user", "alice")
    fork = Run.objects.exclude(pk=parent.pk).get()
    assert code == 0 and queued == [fork.pk]
    assert out.splitlines() == [
        f"Run {fork.pk}: a fork of run {parent.pk} from stage 4 (Step 2 of plan v1), queued "
        "for the worker (or add --wait to run it here).", f"/runs/{fork.pk}/"]
    assert fork.status == "queued" and fork.stage == "step:1:1" and len(scripted.calls) == made


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stage, seq", [("plan:1", 1), ("STEP 3 of plan v1", 5),
                                        ("step:1:0", 3), ("Final answer", 6),
                                        ("Gate: plan approval", 2), ("0", 0)])
def test_a_stage_is_named_by_its_number_name_or_label(alice, scripted, queued, stage, seq):
    parent = finished(alice)
    code, out = cmd("fork", str(parent.pk), "--from", stage, "--json", "--user", "alice")
    assert code == 0 and json.loads(out)["seq"] == seq


@pytest.mark.django_db(transaction=True)
def test_fork_gates_reuse_the_original_decision_and_an_edit_comes_from_stdin(alice, scripted):
    parent = finished(alice)
    code, out = cmd("fork", str(parent.pk), "--from", "2", "--gate", "plan_approval=reuse",
                    "--wait", "--json", "--user", "alice")
    assert code == 0 and json.loads(out)["status"] == "completed"
    assert Checkpoint.objects.get(run=json.loads(out)["run"], seq=3).decision["how"] == "reused"
    # An edited plan is not what was decided: the fork waits for a person.
    stdin = io.StringIO(json.dumps({"steps": ["Only this step"]}))
    code, out = cmd("fork", str(parent.pk), "--from", "2", "--gates", "reuse", "--edit", "-",
                    "--wait", "--user", "alice", stdin=stdin)
    fork = Run.objects.order_by("-pk").first()
    assert code == 0 and fork.status == "awaiting_plan_approval", out
    assert "Awaiting plan approval" in out and f"/runs/{fork.pk}/" in out
    assert fork.state["plan"]["steps"] == ["Only this step"]


@pytest.mark.django_db(transaction=True)
def test_again_continue_and_retry(alice, scripted):
    parent = finished(alice)
    made = len(scripted.calls)
    code, out = cmd("fork", str(parent.pk), "--kind", "again", "--gates", "reuse", "--wait",
                    "--json", "--user", "alice")
    assert code == 0 and json.loads(out)["status"] == "completed" and json.loads(out)["seq"] == 0
    assert len(scripted.calls) - made == parent.calls  # every stage ran again
    code, out = cmd("fork", str(parent.pk), "--kind", "retry", "--from", "6", "--wait",
                    "--json", "--user", "alice")
    data = json.loads(out)
    # A retry asks anew: the stage it starts from makes its call again.
    assert code == 0 and data["status"] == "completed" and data["calls"]["replayed"] == 0
    assert len(scripted.calls) - made == parent.calls + 1
    scripted.usage = (4000, 1000)
    stopped = start(alice, auto_approve=True, max_cost_usd=Decimal("0.0000001"))
    assert stopped.status == "budget_exceeded"
    code, out = cmd("fork", str(stopped.pk), "--kind", "continue", "--max-cost", "5", "--wait",
                    "--json", "--user", "alice")
    data = json.loads(out)
    assert code == 0 and data["status"] == "completed", out
    assert Run.objects.get(pk=data["run"]).max_cost_usd == Decimal("5")


@pytest.mark.django_db(transaction=True)
def test_a_fork_that_fails_exits_1(alice, scripted):
    parent = finished(alice)

    def broken(messages, info):
        if info.role == "synthesizer":
            return ValueError("the provider is down")
        return scripted.offline_like(messages, info)

    scripted.fn = broken
    code, out = cmd("fork", str(parent.pk), "--from", "synthesize", "--wait", "--user", "alice")
    fork = Run.objects.order_by("-pk").first()
    assert code == 1 and fork.status == "failed", (out, fork.status, fork.error)
    assert ": Failed." in out and fork.error.splitlines()[0] in out


# --- replay -------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_replay_makes_no_provider_call_and_ends_in_the_same_state(alice, scripted):
    parent = finished(alice)
    made = len(scripted.calls)
    code, out = cmd("replay", str(parent.pk), "--user", "alice")
    replay = Run.objects.order_by("-pk").first()
    assert code == 0, out
    assert len(scripted.calls) == made
    assert out.splitlines() == [
        f"Replay of run {parent.pk}: run {replay.pk} (/runs/{replay.pk}/), completed.",
        f"Provider calls: 0 (replayed from the journal: {parent.calls}).",
        "Ended as the original did: completed, with the same state at its last stage "
        f"({parent.stage_seq})."]
    code, out = cmd("replay", str(parent.pk), "--json", "--user", "alice")
    data = json.loads(out)
    assert code == 0 and data["provider_calls"] == 0 and data["same_end_state"]
    assert data["calls"] == {"replayed": parent.calls, "new": 0} and data["diverged"] is None


@pytest.mark.django_db(transaction=True)
def test_a_replay_that_diverges_says_where_and_shows_the_first_message(alice, scripted,
                                                                      monkeypatch):
    from agents_app.patterns.plan_execute import pattern as pe

    parent = finished(alice)
    made = len(scripted.calls)
    monkeypatch.setattr(pe, "EXECUTOR_SYSTEM", pe.EXECUTOR_SYSTEM + " Be terse.")
    code, out = cmd("replay", str(parent.pk), "--json", "--user", "alice")
    data = json.loads(out)
    assert code == 1 and len(scripted.calls) == made
    d = data["diverged"]
    assert d["seq"] == 3 and d["stage"] == "step:1:0" and d["label"] == "Step 1 of plan v1"
    assert d["key"] and not d["missing"]
    assert any(line.startswith("+") and "Be terse." in line for line in d["first"])
    assert data["provider_calls"] == 0 and data["calls"]["replayed"] == 1  # the planner's
    assert not data["same_end_state"] and data["status"] == "failed"
    # Kept on the run for its page, whoever reads it.
    assert Run.objects.get(pk=data["run"]).fork["diverged"]["first"] == d["first"]
    code, out = cmd("replay", str(parent.pk), "--user", "alice")
    assert code == 1 and "Diverged at stage 3, Step 1 of plan v1, call " in out
    assert "The first difference:" in out and "Be terse." in out


@pytest.mark.django_db(transaction=True)
def test_a_replay_that_cannot_reuse_a_gate_decision_diverges_there(alice, scripted,
                                                                   monkeypatch):
    from agents_app.engine import fork_gates

    parent = finished(alice)
    monkeypatch.setattr(fork_gates.checkpoints, "digest", lambda value: "something else")
    code, out = cmd("replay", str(parent.pk), "--json", "--user", "alice")
    d = json.loads(out)["diverged"]
    assert code == 1 and d["seq"] == 2 and d["label"] == "gate:plan_approval"
    assert "decision cannot be reused" in d["why"]


# --- compare ------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_compare_two_runs_marks_where_they_part(alice, scripted):
    parent = finished(alice)
    steps = list(parent.state["plan"]["steps"])
    edit = {"steps": steps[:1]}
    code, out = cmd("fork", str(parent.pk), "--from", "2", "--gates", "approve", "--edit", "-",
                    "--wait", "--json", "--user", "alice", stdin=io.StringIO(json.dumps(edit)))
    fork = Run.objects.get(pk=json.loads(out)["run"])
    code, out = cmd("compare", str(parent.pk), str(fork.pk), "--json", "--user", "alice")
    data = json.loads(out)
    assert code == 0 and not data["same"]
    assert [r["run"] for r in data["runs"]] == [parent.pk, fork.pk]
    rows = data["stages"]
    assert [r["stage"] for r in rows[:4]] == ["start", "plan:1", "fork:edit",
                                              "gate:plan_approval"]
    assert rows[1]["same"] and rows[1]["right"]["replayed_calls"] == 1
    assert data["first_divergence"] == {"row": 2, "label": "Edited when forked",
                                        "stage": "fork:edit"}
    assert rows[2]["first_divergence"] and rows[2]["left"] is None
    # Approved both times: the same decision, though by the person, then by the fork's policy
    # (each side's own record says how).
    assert rows[3]["decision"]["same"] is True
    assert rows[3]["left"]["decision"]["how"] == "person"
    assert rows[3]["right"]["decision"]["how"] == "approved"  # by the policy
    lacking = [r for r in rows if r["right"] is None]
    assert lacking and all(r["tokens_delta"] < 0 for r in lacking)
    # Over the stages, the planner's call counts in both (the fork has it from its parent).
    assert data["totals"]["tokens_delta"] == sum(r["tokens_delta"] for r in rows) == -300
    code, text = cmd("compare", str(parent.pk), str(fork.pk), "--user", "alice")
    lines = text.splitlines()
    assert code == 0 and lines[2] == "They part at stage 2, Edited when forked (only one run " \
                                     "has it)."
    marked = [line for line in lines if line.lstrip().startswith(">>")]
    assert len(marked) == 1 and "Edited when forked" in marked[0]
    assert f"only in run {fork.pk}" in marked[0]
    assert "Stage 2 · Edited when forked (the first divergence):" in lines
    assert any(line.strip().startswith("+") and "steps" in line for line in lines)


@pytest.mark.django_db(transaction=True)
def test_compare_three_runs_side_by_side(alice, scripted):
    parent = finished(alice)
    # A fork after the gate, as it was (the same replies), and one with another executor.
    same = cmd("fork", str(parent.pk), "--from", "3", "--wait", "--json", "--user", "alice")[1]
    retry = cmd("fork", str(parent.pk), "--from", "5", "--model", "executor=scripted/other",
                "--wait", "--json", "--user", "alice")[1]
    ids = [parent.pk, json.loads(same)["run"], json.loads(retry)["run"]]
    code, out = cmd("compare", *map(str, ids), "--json", "--user", "alice")
    data = json.loads(out)
    assert code == 0 and [r["run"] for r in data["runs"]] == ids
    rows = data["stages"]
    assert all(len(r["runs"]) == 3 for r in rows)
    assert rows[0]["same"] and rows[0]["runs"][1]["same_as_first"]
    first = data["first_divergence"]
    assert first is not None and rows[first]["stage"] == "step:1:2"
    assert rows[first]["runs"][1]["same_as_first"] and not rows[first]["runs"][2]["same_as_first"]
    code, text = cmd("compare", *map(str, ids), "--user", "alice")
    assert code == 0 and text.startswith("3 runs side by side, on the stages of run")
    assert sum(line.lstrip().startswith(">>") for line in text.splitlines()) == 1


# --- refused like a form field ------------------------------------------------------------------
def saved() -> tuple[int, ...]:
    return (Run.objects.count(), Checkpoint.objects.count(), ModelCall.objects.count(),
            Event.objects.count(), PlanVersion.objects.count(),
            get_user_model().objects.count())


def write(tmp_path, name: str, data: bytes | str):
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return str(path)


def deep(n: int) -> str:
    return '{"steps": ' + "[" * n + "]" * n + "}"


FORK = ["fork", "{run}", "--user", "alice"]
AT_GATE = [*FORK, "--from", "gate:plan_approval"]
BAD = [
    # the run
    (["fork", "{missing}", "--from", "1", "--user", "alice"], "No run {missing}."),
    (["fork", "{bobs}", "--from", "1", "--user", "alice"], "No run {bobs}."),
    (["fork", "{run}", "--from", "1", "--user", "bob"], "No run {run}."),
    (["fork", "abc", "--from", "1"], "A run is given by its number (as in /runs/12/), not 'abc'"),
    (["fork", "9" * 40, "--from", "1"], "A run is given by its number"),
    (["fork", "9" * 25, "--from", "1", "--user", "alice"], "No run '9999999999999999999999"),
    (["fork", "", "--from", "1"], "A run is given by its number"),
    (["fork", "{run}", "--from", "1", "--user", "nobody"], "No user 'nobody'."),
    # the stage
    ([*FORK, "--from", "nope"], "--from: run {run} has no stage 'nope'; give a number or a "
                                "name: 0 start, 1 plan:1, 2 gate:plan_approval, 3 step:1:0"),
    ([*FORK, "--from", "99"], "--from: run {run} has no stage 99; its stages are 0 to 6."),
    ([*FORK, "--from", "7"], "--from: stage 7 is where run {run} ended: no stage runs from"),
    ([*FORK, "--from", "-1"], "has no stage '-1'"),
    ([*FORK, "--from", ""], "has no stage ''"),
    ([*FORK, "--from", "x" * 5000], "has no stage 'xxxxxxxx"),
    ([*FORK, "--from", "plan\x00"], "has no stage 'plan\\x00'"),
    ([*FORK, "--from", "step"], "has no stage 'step'"),
    (FORK, "--from is required for --kind fork"),
    ([*FORK, "--kind", "retry"], "--from is required for --kind retry"),
    ([*FORK, "--kind", "again", "--from", "2"], "--from: --kind again starts from the start"),
    ([*FORK, "--kind", "continue", "--from", "2"], "leave --from out"),
    ([*FORK, "--kind", "continue"], "Only a run stopped by its budget or failed at a stage can"),
    ([*FORK, "--kind", "replay", "--from", "1"], "argument --kind: invalid choice: 'replay'"),
    # models
    ([*AT_GATE, "--model", "judge=scripted/x"], "--model takes ROLE=NAME with ROLE one of "
                                                "planner, executor, synthesizer."),
    ([*AT_GATE, "--model", "executor"], "--model takes ROLE=NAME"),
    ([*AT_GATE, "--model", "executor=nonsense-model-xyz"], "Unknown model “nonsense-model-xyz”"),
    ([*AT_GATE, "--model", "executor="], "Give a model name."),
    ([*AT_GATE, "--model", "executor=offline/other"], "The offline provider has only"),
    # gates
    ([*AT_GATE, "--gates", "maybe"], "argument --gates: invalid choice: 'maybe'"),
    ([*AT_GATE, "--gate", "plan_approval=maybe"], "--gate plan_approval: the policy is one of "
                                                  "ask, reuse, approve, not 'maybe'."),
    ([*AT_GATE, "--gate", "merge=ask"], "--gate: a Plan and execute run has no gate 'merge'; "
                                        "its gates are plan_approval."),
    ([*AT_GATE, "--gate", "plan_approval"], "--gate takes GATE=POLICY"),
    ([*AT_GATE, "--gate", "=ask"], "--gate takes GATE=POLICY"),
    ([*AT_GATE, "--gate", "plan_approval=ask", "--gate", "plan_approval=approve"],
     "--gate plan_approval is given twice, with ask and approve."),
    ([*AT_GATE, "--gates", "ask", "--gate", "plan_approval=ask"],
     "argument --gate: not allowed with argument --gates"),
    # budgets
    ([*AT_GATE, "--max-cost", "nan"], "argument --max-cost: Enter a number"),
    ([*AT_GATE, "--max-cost", "-1"], "argument --max-cost: takes 0.0001 to 1000"),
    ([*AT_GATE, "--max-cost", "1e30"], "argument --max-cost: takes 0.0001 to 1000"),
    ([*AT_GATE, "--max-tokens", "0"], "argument --max-tokens: takes 100 to 50000000"),
    ([*AT_GATE, "--max-tokens", "ten"], "argument --max-tokens: Enter a whole number"),
    # the edit
    ([*AT_GATE, "--edit", "{tmp}/absent.json"], "--edit: no file '{tmp}/absent.json'."),
    ([*AT_GATE, "--edit", "{tmp}"], "--edit: '{tmp}' is a folder, not a file."),
    ([*AT_GATE, "--edit", ""], "--edit takes a file name, or - for standard input."),
    ([*AT_GATE, "--edit", "{file:bad.json:{\"steps\": [}"], "is not JSON (Expecting value at "
                                                            "line 1, column 12)."),
    ([*AT_GATE, "--edit", "{file:empty.json:}"], "is empty; give a JSON object"),
    ([*AT_GATE, "--edit", "{file:blank.json:  \n }"], "is empty; give a JSON object"),
    ([*AT_GATE, "--edit", "{bytes:nul.json}"], "holds NUL bytes: it is not a JSON text."),
    ([*AT_GATE, "--edit", "{bytes:latin1.json}"], "is not UTF-8 text."),
    ([*AT_GATE, "--edit", "{bytes:huge.json}"], "is over 1,000,000 bytes"),
    ([*AT_GATE, "--edit", "{file:list.json:[\"a\"]}"], "--edit takes a JSON object, like "
                                                       "{\"steps\": [\"…\", \"…\"]};"),
    ([*AT_GATE, "--edit", "{file:null.json:null}"], "holds null."),
    ([*AT_GATE, "--edit", "{file:obj.json:{}}"], "is empty: nothing to edit."),
    ([*AT_GATE, "--edit", "{file:nan.json:{\"steps\": [NaN]}}"], "NaN is not a number JSON can"),
    ([*AT_GATE, "--edit", "{file:inf.json:{\"steps\": [1e400]}}"], "1e400 is too large a number"),
    ([*AT_GATE, "--edit", "{file:deep.json:" + deep(40) + "}"], "nested more than 32 levels"),
    ([*AT_GATE, "--edit", "{file:deeper.json:" + deep(5000) + "}"], "nested more than 32"),
    ([*AT_GATE, "--edit", "{file:ctl.json:{\"steps\": [\"a\\u0000b\"]}}"],
     "--edit: the edit contains invisible control characters (U+0000 (NUL))"),
    ([*AT_GATE, "--edit", "{file:esc.json:{\"steps\": [\"a\\u001b[31mb\"]}}"],
     "control characters (U+001B (ESC))"),
    ([*AT_GATE, "--edit", "{file:key.json:{\"st\\u0000eps\": [\"a\"]}}"], "control characters"),
    ([*AT_GATE, "--edit", "{file:none.json:{\"steps\": []}}"],
     "--edit: The plan has no steps left to carry out"),
    ([*AT_GATE, "--edit", "{file:blank-step.json:{\"steps\": [\"  \"]}}"],
     "no steps left to carry out"),
    ([*AT_GATE, "--edit", "{file:str.json:{\"steps\": \"one\"}}"], "--edit: The edit is not "
                                                                   "valid: steps:"),
    ([*AT_GATE, "--edit", "{file:many.json:{\"steps\": " + json.dumps(["s"] * 31) + "}}"],
     "--edit: The edit is not valid: steps: List should have at most 30 items"),
    ([*AT_GATE, "--edit", "{file:long.json:{\"steps\": [\"" + "x" * 20_000 + "\"]}}"],
     "Step 1 is 20,000 characters; the limit is 2,000"),
    ([*AT_GATE, "--edit", "{file:typo.json:{\"step\": [\"a\"]}}"],
     "--edit: the edit at stage 2 takes steps; not 'step'."),
    ([*AT_GATE, "--edit", "{file:extra.json:{\"steps\": [\"a\"], \"goal\": \"g\"}}"],
     "takes steps; not 'goal'."),
    ([*FORK, "--from", "1", "--edit", "{file:ok.json:{\"steps\": [\"a\"]}}"],
     "--edit: nothing can be edited at stage 1 of run {run}; it can be at 2 "
     "gate:plan_approval."),
    ([*FORK, "--kind", "retry", "--from", "2", "--edit", "{file:ok.json:{\"steps\": [\"a\"]}}"],
     "--edit: --kind retry runs the stage as it was; an edit makes a fork"),
    # replay
    (["replay", "{missing}", "--user", "alice"], "No run {missing}."),
    (["replay", "{bobs}", "--user", "alice"], "No run {bobs}."),
    (["replay", "{waiting}", "--user", "alice"], "Run {waiting} has not ended (awaiting plan "
                                                 "approval): a replay repeats a finished run"),
    (["replay", "x1"], "A run is given by its number"),
    # compare
    (["compare", "{run}", "--user", "alice"], "compare takes two to six runs; 1 given."),
    (["compare", *["{run}"] * 7, "--user", "alice"], "compare takes two to six runs; 7 given."),
    (["compare", "{run}", "#{run}", "--user", "alice"], "Run {run} is given twice."),
    (["compare", "{run}", "{bobs}", "--user", "alice"], "No run {bobs}."),
    (["compare", "{run}", "{missing}", "--user", "alice"], "No run {missing}."),
    (["compare", "{run}", "two", "--user", "alice"], "A run is given by its number"),
    (["compare", "--user", "alice"], "the following arguments are required: RUN"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("args, message", BAD)
def test_bad_input_is_one_line_exit_2_and_saves_nothing(args, message, alice, bob, scripted,
                                                       tmp_path, capsys, monkeypatch):
    # The terminal's path (manage.py's argv through run_from_argv), in this process; its
    # closing of the connections at the end would close the test database, and setting
    # Django up again would point the logging at this test's captured stderr for good.
    monkeypatch.setattr(connections, "close_all", lambda: None)
    monkeypatch.setattr(django, "setup", lambda *args, **kwargs: None)
    parent = finished(alice)
    bobs = start(bob)
    waiting = start(alice)
    values = {"run": parent.pk, "bobs": bobs.pk, "waiting": waiting.pk,
              "missing": Run.objects.order_by("-pk").first().pk + 100, "tmp": tmp_path}
    special = {"nul.json": b'{"steps": ["a\x00"]}', "latin1.json": '{"steps": ["é"]}'.encode(
        "latin-1"), "huge.json": b'{"steps": ["' + b"x" * MAX_EDIT_BYTES + b'"]}'}

    def fill(arg: str) -> str:
        if arg.startswith("{file:"):
            name, _, body = arg[len("{file:"):-1].partition(":")
            return write(tmp_path, name, body)
        if arg.startswith("{bytes:"):
            name = arg[len("{bytes:"):-1]
            return write(tmp_path, name, special[name])
        return sub(arg)

    def sub(text: str) -> str:
        for key, value in values.items():
            text = text.replace("{" + key + "}", str(value))
        return text

    argv = [fill(a) for a in args]
    before = saved()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        execute_from_command_line(["manage.py", *argv])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert exited.value.code == 2, (argv[:4], err)
    assert len(lines) == 1 and "Traceback" not in err, (argv[:4], err)
    assert sub(message) in lines[0], (argv[:4], lines[0])
    assert len(lines[0]) < 600, lines[0]
    assert out == "", out
    assert saved() == before


@pytest.mark.django_db
def test_gates_on_a_pattern_without_gates_is_refused(alice):
    run = engine.run_inline(engine.create_run(
        alice, "reflective", "Explain attention", options={}, enqueue=False,
        models={"actor": "offline/default", "critic": "offline/default"}).pk)
    before = saved()
    with pytest.raises(CommandError) as refused:
        call_command("fork", str(run.pk), "--from", "0", "--gates", "approve", "--user",
                     "alice", stdout=StringIO())
    assert str(refused.value) == "--gates: a Reflective (actor and critic) run has no gates."
    assert refused.value.returncode == 2 and saved() == before


@pytest.mark.django_db(transaction=True)
def test_without_user_the_first_superuser_owns_and_no_cli_user_is_made(alice, scripted):
    run = finished(alice)
    before = saved()
    # Nobody is a superuser and there is no ``cli`` user: no run is the command's.
    with pytest.raises(CommandError, match=f"No run {run.pk}."):
        call_command("replay", str(run.pk), stdout=StringIO())
    assert saved() == before
    alice.is_superuser = True
    alice.save()
    code, text = cmd("replay", str(run.pk), "--json")
    assert code == 0 and json.loads(text)["same"]
    assert Run.objects.order_by("-pk").first().owner == alice


def test_each_command_has_help(capsys):
    for name in ("fork", "replay", "compare"):
        with pytest.raises(SystemExit) as exited:
            execute_from_command_line(["manage.py", name, "--help"])
        assert exited.value.code == 0 and "--json" in capsys.readouterr().out
