"""The tool-using agent loop with scripted fakes and a real sandboxed workspace."""

from __future__ import annotations

from pydantic import BaseModel

from agents_app.patterns.agent_loop import run_agent
from agents_app.patterns.testing import FunctionModel, QueueModel
from agents_app.repos import tools
from agents_app.repos.workspace import Workspace


class Summary(BaseModel):
    text: str


def runner(ws, toolset):
    return lambda name, args: tools.call(toolset, ws, name, args)


def agent(model, ws, toolset=None, max_turns=5):
    toolset = toolset or {**tools.READ_TOOLS, **tools.WRITE_TOOLS}
    return run_agent(model, "executor", system="You edit files.", task="Fix the greeting.",
                     catalogue=tools.describe(toolset), run_tool=runner(ws, toolset),
                     answer_schema=Summary, answer_instruction="Summarise what you did.",
                     key="execute:1", max_turns=max_turns)


def turn(tool=None, done=False, thought="t", **args):
    return {"thought": thought, "action": {"tool": tool, "args": args} if tool else None,
            "done": done}


def test_reads_edits_and_answers_with_a_trace(tmp_path):
    (tmp_path / "hello.py").write_text('print("helo")\n')
    ws = Workspace(tmp_path)
    model = QueueModel(turn("read_file", path="hello.py"),
                       turn("replace_in_file", path="hello.py", search="helo",
                            replacement="hello"),
                       turn(done=True), {"text": "Fixed the typo."})
    result = agent(model, ws)
    assert (tmp_path / "hello.py").read_text() == 'print("hello")\n'
    assert result.answer.text == "Fixed the typo." and result.stopped == "done"
    assert [(e.tool, e.ok) for e in result.trace] == [("read_file", True),
                                                      ("replace_in_file", True)]
    assert [c.key for c in model.history] == ["execute:1:1", "execute:1:2", "execute:1:3",
                                              "execute:1:answer"]
    # The model saw the file's content as an observation before editing it.
    assert 'print("helo")' in model.history[1].prompt
    assert "replace_in_file" in model.history[0].messages[0]["content"]  # the catalogue


def test_tool_errors_are_observations_and_escapes_are_refused(tmp_path):
    ws = Workspace(tmp_path)
    model = QueueModel(turn("read_file", path="../../etc/passwd"), turn("no_such_tool"),
                       turn(done=True), {"text": "Could not."})
    result = agent(model, ws)
    assert [e.ok for e in result.trace] == [False, False]
    assert "outside" in result.trace[0].observation
    assert "no_such_tool" in result.trace[1].observation
    assert "## Observation (read_file, error)" in model.history[1].prompt


def test_a_read_only_agent_cannot_write(tmp_path):
    ws = Workspace(tmp_path)
    model = QueueModel(turn("write_file", path="x.py", content="boom"), turn(done=True),
                       {"text": "ok"})
    result = agent(model, ws, toolset=dict(tools.READ_TOOLS))
    assert not (tmp_path / "x.py").exists() and result.trace[0].ok is False


def test_max_turns_forces_an_answer(tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    ws = Workspace(tmp_path)
    paths = iter(["a.txt", ".", "a.txt", "."])

    def fn(messages, info):
        if info.key.endswith(":answer"):
            assert "used all your turns" in messages[-1]["content"]
            return {"text": "partial"}
        p = next(paths)
        return turn("list_files" if p == "." else "read_file", path=p)

    result = agent(FunctionModel(fn), ws, max_turns=4)
    assert result.stopped == "max_turns" and len(result.trace) == 4
    assert result.answer.text == "partial"


def test_the_same_call_three_times_stops_the_loop(tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    ws = Workspace(tmp_path)

    def fn(messages, info):
        if info.key.endswith(":answer"):
            assert "three times" in messages[-1]["content"]
            return {"text": "stopped"}
        return turn("read_file", path="a.txt")

    model = FunctionModel(fn)
    result = agent(model, ws, max_turns=10)
    assert result.stopped == "repeating" and len(result.trace) == 3
    assert len(model.history) == 4
