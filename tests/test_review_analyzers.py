"""ruff and bandit on a change's Python files, with real tool runs (both are installed;
detect-secrets runs next to them on every file, see tests/test_analyzer_tools.py)."""

import ast
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from common import analyzers, proc
from common.analyzers import (
    AnalyzerInput,
    for_category,
    input_from_file,
    run_analyzers,
    suggestion_for,
)

BAD = '''import subprocess


def handler(cursor, uid, x, cmd):
    subprocess.call(cmd, shell=True)
    y = eval(x)
    cursor.execute("select * from t where id = %s" % uid)
    password = "hunter2"
    try:
        pass
    except Exception:
        pass
    if x == None:
        return y, password
'''

EVIDENCE_KEYS = {"tool", "rule", "category", "severity", "confidence", "file", "line",
                 "end_line", "message", "url", "on_changed_line"}


def hunk(start: int, rows: list[tuple[str, str]]) -> dict:
    """A parsed hunk whose new side starts at ``start``."""
    lines, new, old = [], start, start
    for kind, text in rows:
        lines.append({"kind": kind, "old": None if kind == "add" else old,
                      "new": None if kind == "del" else new, "text": text})
        if kind != "del":
            new += 1
        if kind != "add":
            old += 1
    return {"header": f"@@ -{start} +{start} @@", "lines": lines}


def by_rule(evidence: list[dict]) -> dict[str, dict]:
    return {e["rule"]: e for e in evidence}


@pytest.fixture(scope="module")
def bad_report():
    inp = AnalyzerInput(path="app/views.py", text=BAD, changed_lines={5, 6, 7, 8, 11, 13})
    return run_analyzers([inp])


# --- whole files ---------------------------------------------------------------------------------
def test_full_file_reports_the_expected_rules(bad_report):
    assert bad_report.errors == []
    # semgrep reads Python too since issue 36 (its taint rules for web code)
    assert set(bad_report.tools) == {"ruff", "bandit", "semgrep", "detect-secrets"}
    assert all(re.match(r"\d+\.\d+", v) for v in bad_report.tools.values())
    ev = by_rule(bad_report.evidence)
    for e in bad_report.evidence:
        assert EVIDENCE_KEYS <= set(e)
        assert e["file"] == "app/views.py"
        assert 0 < e["confidence"] <= 1
    shell = ev["B602"]
    assert (shell["tool"], shell["category"], shell["severity"], shell["line"]) == \
        ("bandit+ruff", "security", "critical", 5)
    assert shell["url"].startswith("https://")
    assert (ev["B307"]["category"], ev["B307"]["line"]) == ("security", 6)
    assert (ev["B608"]["category"], ev["B608"]["line"]) == ("security", 7)
    assert ev["B608"]["severity"] in ("medium", "high")
    assert (ev["B105"]["category"], ev["B105"]["line"]) == ("security", 8)
    assert (ev["BLE001"]["category"], ev["BLE001"]["severity"], ev["BLE001"]["line"]) == \
        ("architecture", "low", 11)
    assert ev["BLE001"]["tool"] == "ruff"
    assert (ev["E711"]["category"], ev["E711"]["severity"], ev["E711"]["line"]) == \
        ("style", "low", 13)
    assert ev["E711"]["url"] == "https://docs.astral.sh/ruff/rules/none-comparison"


def test_ruff_and_bandit_duplicates_are_merged(bad_report):
    rules = [e["rule"] for e in bad_report.evidence]
    for twin in ("S602", "S307", "S608", "S105", "S110"):
        assert twin not in rules
    seen = set()
    for e in bad_report.evidence:
        key = (re.sub(r"^[A-Z]+", "", e["rule"]) if e["category"] == "security" else e["rule"],
               e["file"], e["line"])
        assert key not in seen, e
        seen.add(key)
    assert by_rule(bad_report.evidence)["B307"]["tool"] == "bandit+ruff"


def test_changed_lines_and_categories(bad_report):
    ev = by_rule(bad_report.evidence)
    assert ev["B602"]["on_changed_line"] is True
    assert ev["B404"]["on_changed_line"] is False  # `import subprocess` is not in the change
    security = for_category(bad_report.evidence, "security")
    assert security and all(e["category"] == "security" for e in security)
    assert {e["rule"] for e in for_category(bad_report.evidence, "style")} >= {"E711"}
    assert for_category(bad_report.evidence, "nonsense") == []
    total = sum(len(for_category(bad_report.evidence, c))
                for c in ("security", "architecture", "style"))
    assert total == len(bad_report.evidence)


def test_suggestions_are_concrete_and_never_empty(bad_report):
    for e in bad_report.evidence:
        assert suggestion_for(e).strip()
    ev = by_rule(bad_report.evidence)
    assert "cursor.execute(sql, params)" in suggestion_for(ev["B608"])
    assert "shell=False" in suggestion_for(ev["B602"])
    assert "ast.literal_eval" in suggestion_for(ev["B307"])
    assert "environment" in suggestion_for(ev["B105"])
    assert "`is`" in suggestion_for(ev["E711"])
    assert "specific" in suggestion_for(ev["BLE001"])
    assert "mutable" in suggestion_for({"tool": "ruff", "rule": "B006"})
    assert "safe_load" in suggestion_for({"tool": "ruff", "rule": "S506"})
    assert "secrets" in suggestion_for({"tool": "bandit", "rule": "B311"})
    assert "sha256" in suggestion_for({"tool": "ruff", "rule": "S324"})
    unknown = suggestion_for({"tool": "ruff", "rule": "ZZZ999", "message": "odd thing"})
    assert unknown == "Change the code here so that this no longer holds: odd thing."
    assert suggestion_for({}).strip()
    assert suggestion_for({"rule": "UP999", "tool_fix": "Rewrite it", "line": 4}) == \
        "Rewrite it on line 4."


def test_whole_file_syntax_error_is_one_result_and_a_bandit_note():
    report = run_analyzers([AnalyzerInput(path="broken.py", text="def f(:\n    x = (\n")])
    syntax = [e for e in report.evidence if e["rule"] == "E999"]
    assert len(syntax) == 1
    assert (syntax[0]["category"], syntax[0]["severity"]) == ("architecture", "high")
    assert syntax[0]["message"].startswith("SyntaxError")
    assert any("bandit skipped broken.py" in err for err in report.errors)


def test_newer_python_syntax_is_not_a_syntax_error():
    text = "def f[T](x: T) -> T:\n    return eval(x)\n"
    report = run_analyzers([AnalyzerInput(path="new.py", text=text)])
    assert [(e["rule"], e["line"]) for e in report.evidence] == [("S307", 2)]
    assert report.errors and "bandit skipped new.py" in report.errors[0]


def test_full_file_keeps_undefined_names():
    report = run_analyzers([AnalyzerInput(path="a.py", text="def f():\n    return nme\n")])
    assert [(e["rule"], e["category"], e["line"]) for e in report.evidence] == \
        [("F821", "architecture", 2)]


# --- diff files ----------------------------------------------------------------------------------
def test_input_from_file_variants():
    readme = input_from_file({"path": "README.md", "is_python": False, "content": "x",
                              "hunks": []})
    assert (readme.kind, readme.text) == ("markdown", "x")  # codespell, pymarkdown
    notes = input_from_file({"path": "app.toml", "is_python": False, "content": "x",
                             "hunks": []})
    assert (notes.kind, notes.text) == ("other", "x")  # read by the secrets scanners
    assert input_from_file({"path": "README.md", "is_python": False, "content": " \n",
                            "hunks": []}) is None
    deleted = {"path": "gone.py", "is_python": True, "content": None,
               "hunks": [hunk(1, [("del", "x = 1"), ("del", "y = 2")])]}
    assert input_from_file(deleted) is None
    full = {"path": "m.py", "is_python": True, "content": "a = 1\nb = 2\nc = 3\n",
            "hunks": [hunk(2, [("ctx", "a = 1"), ("add", "b = 2"), ("ctx", "c = 3")])]}
    got = input_from_file(full)
    assert (got.full, got.text, got.line_map, got.changed_lines) == \
        (True, "a = 1\nb = 2\nc = 3\n", None, {3})


FRAGMENT = {"path": "pkg/mod.py", "is_python": True, "content": None, "hunks": [
    hunk(20, [("ctx", "            if flag:"),
              ("ctx", "                data = load()"),
              ("ctx", "        value = eval(data)"),
              ("add", "        y = eval(other)"),
              ("del", "        z = 1"),
              ("ctx", "    return y")]),
    hunk(50, [("ctx", '        msg = """start'),
              ("add", "        unused = undefined_name"),
              ("ctx", '        end"""'),
              ("add", "        os.system(cmd)"),
              ("ctx", "        def g(")]),
]}


def test_fragment_maps_lines_without_syntax_noise():
    inp = input_from_file(FRAGMENT)
    assert inp.full is False
    assert inp.changed_lines == {23, 51, 53}
    assert inp.line_map[1] == 20 and inp.line_map[5] == 24 and inp.line_map[6] == 50
    report = run_analyzers([inp])
    assert report.errors == []
    rules = {e["rule"] for e in report.evidence}
    assert not rules & {"E999", "invalid-syntax", "F821", "F841", "F706"}
    evals = sorted((e["line"], e["on_changed_line"]) for e in report.evidence
                   if e["rule"] in ("B307", "S307"))
    assert evals == [(22, False), (23, True)]  # 22 is a context line
    shell = [e for e in report.evidence if e["rule"] == "B605"]
    assert [(e["line"], e["on_changed_line"], e["file"]) for e in shell] == \
        [(53, True, "pkg/mod.py")]


def test_broken_line_inside_a_hunk_is_blanked():
    # The broken line is too far from both ends of the hunk to be cut off there.
    middle = (["x = eval(q)"] + [f"v{i} = {i}" for i in range(7)] + ["y = [1, 2)"]
              + [f"w{i} = {i}" for i in range(7)])
    frag = {"path": "odd.py", "is_python": True, "content": None, "hunks": [
        hunk(10, [("add", "    " + t) for t in middle]),
        hunk(60, [("ctx", "    def ok(self):"), ("add", "        return eval(self.s)")]),
    ]}
    inp = input_from_file(frag)
    units = analyzers.fragments.units_for(0, inp)
    assert [u.name for u in units] == ["f0.py"]
    assert "y = [1, 2)" not in units[0].text and "x = eval(q)" in units[0].text
    report = run_analyzers([inp])
    assert report.errors == []
    assert not {e["rule"] for e in report.evidence} & {"E999", "invalid-syntax"}
    evals = sorted((e["line"], e["tool"]) for e in report.evidence if e["rule"] == "B307")
    assert evals == [(10, "bandit+ruff"), (61, "bandit+ruff")]


def test_hunk_that_cannot_be_repaired_is_analyzed_alone():
    # Python 3.12 type-parameter syntax does not parse on 3.11 however many lines go.
    new_syntax = [f"    def f{i}[T](x: T) -> T: return x" for i in range(14)]
    frag = {"path": "odd.py", "is_python": True, "content": None, "hunks": [
        hunk(10, [("add", t) for t in new_syntax]),
        hunk(60, [("ctx", "    def ok(self):"), ("add", "        return eval(self.s)")]),
    ]}
    inp = input_from_file(frag)
    assert [u.name for u in analyzers.fragments.units_for(0, inp)] == ["f0.py", "f0_0.py"]
    report = run_analyzers([inp])
    assert report.errors == []  # bandit's parse failure on a cut fragment is expected
    assert not {e["rule"] for e in report.evidence} & {"E999", "invalid-syntax"}
    evals = [(e["line"], e["tool"]) for e in report.evidence if e["rule"] == "B307"]
    assert evals == [(61, "bandit+ruff")]  # the parseable hunk keeps both tools


def test_hostile_paths_never_reach_the_disk(monkeypatch):
    seen = []
    real_popen = subprocess.Popen

    def spy(cmd, *args, **kwargs):
        if kwargs.get("cwd"):
            seen.append((list(cmd), sorted(os.listdir(kwargs["cwd"])), kwargs.get("env")))
        return real_popen(cmd, *args, **kwargs)

    monkeypatch.setattr(proc.subprocess, "Popen", spy)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-the-analyzers")
    hostile = ["../../x.py", "<script>.py", "/etc/passwd", "a b;rm -rf ~.py"]
    inputs = [AnalyzerInput(path=p, text="y = eval(input())\n") for p in hostile]
    report = run_analyzers(inputs)
    assert len(seen) == 4  # one ruff, one bandit, one semgrep and one detect-secrets process
    for cmd, listing, env in seen:
        assert listing == ["f0.py", "f1.py", "f2.py", "f3.py"]
        assert not any(p in arg for arg in cmd for p in hostile)
        assert "shell" not in cmd
        # common.proc's scrubbed environment (detect-secrets: with a private HOME and XDG
        # directories): no keys of ours
        private = {k: v for k, v in env.items() if k in ("HOME", "TMPDIR") or
                   k.startswith(("XDG_", "SEMGREP_"))}  # semgrep's: metrics and checks off
        assert {k: v for k, v in env.items() if k not in private} == \
            {k: v for k, v in proc.child_env().items() if k not in ("HOME", "TMPDIR")}
        assert "OPENAI_API_KEY" not in env
    assert {e["file"] for e in report.evidence if e["rule"] == "B307"} == set(hostile)
    assert not Path("x.py").exists()


# --- failures ------------------------------------------------------------------------------------
def test_missing_analyzers_are_errors_not_exceptions(monkeypatch):
    monkeypatch.setattr(analyzers.runner, "find_tool", lambda name: f"/nonexistent/bin/{name}")
    report = run_analyzers([AnalyzerInput(path="a.py", text=BAD)])
    assert report.evidence == [] and report.tools == {}
    assert len(report.errors) == 4
    assert any("ruff could not be started" in e for e in report.errors)
    assert any("semgrep could not be started" in e for e in report.errors)
    assert any("bandit could not be started" in e for e in report.errors)
    assert any("detect-secrets could not be started" in e for e in report.errors)
    assert report.examined == {}
    assert len(report.not_run["a.py"]) == 4


def test_one_missing_analyzer_leaves_the_other(monkeypatch):
    real = analyzers.runner.find_tool
    monkeypatch.setattr(analyzers.runner, "find_tool",
                        lambda name: None if name == "bandit" else real(name))
    report = run_analyzers([AnalyzerInput(path="a.py", text=BAD)])
    assert set(report.tools) == {"ruff", "semgrep", "detect-secrets"}
    assert report.errors and "bandit is not installed" in report.errors[0]
    assert {e["tool"] for e in report.evidence} == {"ruff", "detect-secrets"}
    assert report.examined == {"a.py": ["ruff", "semgrep", "detect-secrets"]}
    assert report.not_run["a.py"][0].startswith("bandit is not installed")
    assert "S602" in {e["rule"] for e in report.evidence}


def test_timeout_stops_the_tool(monkeypatch, tmp_path):
    slow = tmp_path / "slow-tool"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    real = analyzers.runner.find_tool
    monkeypatch.setattr(analyzers.runner, "find_tool",
                        lambda name: str(slow) if name == "ruff" else real(name))
    report = run_analyzers([AnalyzerInput(path="a.py", text=BAD)], timeout=4,
                           disabled={"detect-secrets", "semgrep"})
    assert any("ruff timed out after 4 s" in e for e in report.errors)
    assert "ruff" not in report.tools
    assert {e["tool"] for e in report.evidence} == {"bandit"}
    assert sorted(report.not_run["a.py"]) == [
        "detect-secrets is turned off (QUORUM_DISABLE_ANALYZERS)",
        "ruff timed out after 4 s and was stopped; its results are missing",
        "semgrep is turned off (QUORUM_DISABLE_ANALYZERS)"]
    assert report.examined == {"a.py": ["bandit"]}


def test_no_inputs_runs_nothing():
    report = run_analyzers([])
    assert (report.evidence, report.errors, report.tools) == ([], [], {})


def test_package_is_plain_python():
    modules = sorted(Path(analyzers.__file__).parent.glob("*.py"))
    assert len(modules) > 1
    for module in modules:
        tree = ast.parse(module.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                    for a in n.names}
        imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                     if isinstance(n, ast.ImportFrom)}
        assert not imported & {"django", "reviews_app", "agents_app"}, module.name


# --- timing --------------------------------------------------------------------------------------
def _generated_file(i: int) -> str:
    out = ["import os", "import subprocess", "", ""]
    for k in range(20):
        out += [f"def func_{i}_{k}(items, name, cursor):",
                '    """Do something."""',
                "    total = 0",
                "    for item in items:",
                "        if item == None:",
                "            continue",
                "        total += len(str(item))",
                "    cursor.execute(\"select * from t where n = '%s'\" % name)"
                if k % 5 == 0 else "    cursor.execute('select 1')",
                "    return total",
                ""]
    return "\n".join(out) + "\n"


def test_timing_fifty_files(capsys):
    inputs = [AnalyzerInput(path=f"pkg/mod_{i}.py", text=_generated_file(i)) for i in range(50)]
    assert all(190 <= len(t.text.splitlines()) <= 210 for t in inputs)
    report = run_analyzers(inputs)
    assert report.errors == []
    assert len([e for e in report.evidence if e["rule"] == "B608"]) == 50 * 4
    with capsys.disabled():
        print(f"\nrun_analyzers on 50 files x ~200 lines: {report.seconds:.2f} s, "
              f"{len(report.evidence)} evidence items")
