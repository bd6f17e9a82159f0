"""The offline model's part in plan → execute → review: honest, deterministic, no reasoning.

It cannot write code. It carries out edit instructions spelled out in the change request:

    replace "old text" with "new text" in path/to/file
    create path/to/file with "content"

The planner turns each instruction into a plan step (quoted exactly), the executor performs
the steps with the real tools and runs the test command when there is one, and the reviewer
approves when the branch has changes and the tests did not fail. A request with no such
instruction gets a plan that says so, no change, and a reviewer that escalates to the person.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...llm.offline import find_section, sections
from ..base import OfflineReply
from .schemas import ALREADY_IN_FILES

# Plain text: these answers are shown as text (plan fields, reports, commit messages).
LABEL = "(Offline model: a deterministic stand-in, no language model.)"

_Q = r'"((?:[^"\\]|\\.)*)"'
_REPLACE = re.compile(rf"\breplace\s+{_Q}\s+with\s+{_Q}\s+in\s+(?:file\s+)?`?([\w./@+-]+)`?",
                      re.IGNORECASE)
_CREATE = re.compile(rf"\bcreate\s+(?:the\s+)?(?:file\s+)?`?([\w./@+-]+)`?\s+"
                     rf"(?:with|containing)\s+{_Q}", re.IGNORECASE)
PERSON_COMMENTS = "The person's comments to address"  # the executor prompt's section title
# Typographic quotes, so this explanation is never itself read as an instruction.
HOWTO = ("The offline model only carries out explicit instructions such as: replace “old” "
         "with “new” in path/to/file, or create path/to/file with “content” (with straight "
         "double quotes). Configure a real model for anything else.")


def _unquote(text: str) -> str:
    return text.replace('\\"', '"').replace("\\n", "\n")


def instructions(text: str) -> list[dict[str, Any]]:
    """The edit instructions in ``text``, in order of appearance."""
    found = []
    for m in _REPLACE.finditer(text):
        found.append((m.start(), {"tool": "replace_in_file", "args": {
            "path": m[3].rstrip("."), "search": _unquote(m[1]),
            "replacement": _unquote(m[2])},
            "step": f'Replace "{m[1]}" with "{m[2]}" in {m[3].rstrip(".")}'}))
    for m in _CREATE.finditer(text):
        found.append((m.start(), {"tool": "write_file", "args": {
            "path": m[1].rstrip("."), "content": _unquote(m[2]).rstrip("\n") + "\n"},
            "step": f'Create {m[1].rstrip(".")} with "{m[2]}"'}))
    return [item for _, item in sorted(found, key=lambda pair: pair[0])]


def _first_user(messages: list[dict[str, str]]) -> str:
    return next((m["content"] for m in messages if m.get("role") == "user"), "")


def _todo(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The executor's edits: the plan's, or on a later round whose earlier edits are in the
    files already, only those the comments ask for (the plan's again would apply twice:
    replacing "hello" with "hello, world" a second time gives "hello, world, world")."""
    first = _first_user(messages)
    if ALREADY_IN_FILES not in first:
        return instructions(first)
    secs = sections([{"role": "user", "content": first}])
    return instructions("\n".join(body for title, body in secs.items() if title != "Plan"))


def _turns(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The offline agent's earlier turns (its own JSON replies) with their observations."""
    out = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        try:
            turn = json.loads(m["content"])
        except (ValueError, TypeError):
            continue
        obs = messages[i + 1]["content"] if i + 1 < len(messages) else ""
        out.append({"turn": turn, "ok": ", ok)" in obs.split("\n", 1)[0], "observation": obs})
    return out


def _tool_available(messages: list[dict[str, str]], name: str) -> bool:
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    return f"### {name}" in system


def _turn(thought: str, tool: str | None = None, args: dict[str, Any] | None = None) -> dict[str, Any]:
    if tool is None:
        return {"thought": thought, "action": None, "done": True}
    return {"thought": thought, "action": {"tool": tool, "args": args or {}}, "done": False}


# --- planner -------------------------------------------------------------------------------------
def planner_turn(messages: list[dict[str, str]]) -> dict[str, Any]:
    if not _turns(messages):
        return _turn("Look at the repository's layout first.", "list_files",
                     {"path": ".", "max_depth": 2})
    return _turn("I have what I need.")


def plan_doc(messages: list[dict[str, str]]) -> dict[str, Any]:
    secs = sections(messages)
    request = secs.get("Change request", "")
    found = instructions(request)
    if found:
        steps = [f["step"] for f in found]
        files = sorted({f["args"]["path"] for f in found})
        approach = "Carry out the edit instructions of the request literally, in order."
        goal = f"Apply {len(found)} explicit edit(s) from the request"
    else:
        steps = [f"Make the requested change: {' '.join(request.split())[:300]}"]
        files = []
        approach = HOWTO
        goal = "No explicit edit instruction the offline model can perform"
    if _tool_available(messages, "run_tests"):
        steps.append("Run the test command and report the result.")
    return {"goal": f"{goal} {LABEL}", "files": files, "approach": approach, "steps": steps,
            "test_strategy": "Run the configured test command after the edits."
            if _tool_available(messages, "run_tests") else "No test command is configured.",
            "risks": ["The offline model does not read or understand the code."]}


# --- executor ------------------------------------------------------------------------------------
def executor_turn(messages: list[dict[str, str]]) -> dict[str, Any]:
    todo = _todo(messages)
    done = _turns(messages)
    if len(done) < len(todo):
        step = todo[len(done)]
        return _turn(f"Next step: {step['step']}", step["tool"], step["args"])
    ran_tests = any((t["turn"].get("action") or {}).get("tool") == "run_tests" for t in done)
    if todo and not ran_tests and _tool_available(messages, "run_tests"):
        return _turn("All edits are made; run the tests.", "run_tests", {})
    return _turn("Finished.")


def execution_report(messages: list[dict[str, str]]) -> dict[str, Any]:
    todo = _todo(messages)
    turns = _turns(messages)
    done, skipped, tests = [], [], ""
    for t in turns:
        action = t["turn"].get("action") or {}
        if action.get("tool") == "run_tests":
            tests = t["observation"].split("\n", 1)[-1][:500]
            continue
        step = next((s["step"] for s in todo if s["args"] == action.get("args")), action.get("tool"))
        if t["ok"]:
            done.append(step)
        else:
            reason = t["observation"].split("\n", 1)[-1].strip()[:300]
            skipped.append(f"{step}: {reason}")
    again = ALREADY_IN_FILES in _first_user(messages)
    summary = (f"Carried out {len(done)} of {len(todo)} edit instruction(s)." if todo else
               "The plan's edits are in the files from the earlier round; no new edit." if again
               else f"No change made. {HOWTO}")
    asked = find_section(sections(messages[:2]), PERSON_COMMENTS)
    if asked and not instructions(asked):
        # Say so instead of passing over the person's words in silence.
        said = " ".join(line.strip().removeprefix("- ") for line in asked.splitlines())
        skipped.append(f"The person's comment ({said[:300]}): it holds no edit instruction "
                       f"I can carry out. {HOWTO}")
    surprises = []
    if skipped and "## Review comments" in _first_user(messages):
        surprises.append("Edits from the earlier round are already in the files, so repeating "
                         "them can fail.")
    return {"summary": f"{summary} {LABEL}", "done": done, "skipped": skipped,
            "surprises": surprises,
            "tests": tests or "I did not run the tests myself (Quorum runs them after me)."}


# --- reviewer ------------------------------------------------------------------------------------
def reviewer_turn(messages: list[dict[str, str]]) -> dict[str, Any]:
    return _turn("The diff, the report and the test output are enough for a rule-based check.")


def review_verdict(messages: list[dict[str, str]]) -> dict[str, Any]:
    secs = sections(messages)
    diff = secs.get("Diff against the base branch", "")
    tests = secs.get("Test output (run by Quorum after the change)", "")
    files = re.findall(r"^\+\+\+ b/(.+)$", diff, re.MULTILINE)
    if "(the branch has no changes)" in diff or not files:
        report = secs.get("Execution report", "")
        skipped = report.split("Skipped:", 1)[-1].split("Surprises:", 1)[0].strip() \
            if "Skipped:" in report else ""
        if skipped and skipped != "(none)":
            reason = f"The executor could not carry out the plan: {skipped}"
        else:
            reason = HOWTO
        return {"approve": False, "follows_plan": False,
                "summary": f"The branch has no changes, so there is nothing to merge. {LABEL}",
                "comments": [], "rejection_kind": "unclear", "reason": reason}
    first = tests.splitlines()[1] if len(tests.splitlines()) > 1 else ""
    failed = tests and "No test command" not in tests and not first.startswith("exit code 0")
    if failed:
        return {"approve": False, "follows_plan": True,
                "summary": f"The tests do not pass after the change. {LABEL}",
                "comments": [{"file": "", "line": None, "problem": f"Tests: {first or 'failed'}",
                              "requested_change": "Make the tests pass."}],
                "rejection_kind": "fixup", "reason": "The test command failed."}
    checked = "the tests pass" if tests and "No test command" not in tests else \
        "no test command is configured"
    return {"approve": True, "follows_plan": True, "comments": [], "rejection_kind": None,
            "reason": "", "summary": f"Changes in {', '.join(sorted(set(files))[:10])}; "
            f"{checked}. A rule-based check only: read the diff yourself. {LABEL}"}


def replies() -> list[OfflineReply]:
    """(schema, role, reply) for the pattern's ``offline_replies``."""
    return [("AgentTurn", "planner", planner_turn), ("AgentTurn", "executor", executor_turn),
            ("AgentTurn", "reviewer", reviewer_turn), ("PlanDoc", None, plan_doc),
            ("ExecutionReport", None, execution_report), ("ReviewVerdict", None, review_verdict)]
