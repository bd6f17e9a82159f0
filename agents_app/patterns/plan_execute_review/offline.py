"""The offline model's part in plan → execute → review: honest, deterministic, no reasoning.

It cannot write code. It carries out edit instructions spelled out in the change request:

    replace "old text" with "new text" in path/to/file          (the text occurs once)
    replace all "old text" with "new text" in path/to/file      (every occurrence)
    replace the 2nd "old text" with "new text" in path/to/file  (one of several: 1st, 2nd, …)
    create path/to/file with "content"

A plain replace of a text that occurs more than once is refused (nothing is changed) with a
message naming the two other forms. The planner turns each instruction into a plan step
(quoted exactly), the executor performs the steps with the real tools and runs the test
command when there is one, and the reviewer applies the rules of ``checks.py``: it sends back
a round with a step not done, a comment of the person's not acted on, or no change, and
rejects failing tests; otherwise it approves. A request with no such instruction gets a plan
that says so, no change, and a reviewer that escalates to the person.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...llm.offline import find_section, sections
from ..base import OfflineReply
from .schemas import ALREADY_IN_FILES, UNFINISHED

# Plain text: these answers are shown as text (plan fields, reports, commit messages).
LABEL = "(Offline model: a deterministic stand-in, no language model.)"

_Q = r'"((?:[^"\\]|\\.)*)"'
_ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                  "ninth", "tenth")
# replace ["all" | "every" | "the 2nd" | "the second"] ["occurrence(s) of"] "old" with "new" in path
_REPLACE = re.compile(
    r"\breplace\s+(?:(?P<all>all|every)\s+(?:(?:the\s+)?occurrences?\s+of\s+)?"
    rf"|the\s+(?P<nth>\d+(?:st|nd|rd|th)|{'|'.join(_ORDINAL_WORDS)})\s+(?:occurrence\s+of\s+)?)?"
    r'"(?P<old>(?:[^"\\]|\\.)*)"\s+with\s+"(?P<new>(?:[^"\\]|\\.)*)"\s+in\s+(?:file\s+)?'
    r"`?(?P<path>[\w./@+-]+)`?", re.IGNORECASE)
_CREATE = re.compile(rf"\bcreate\s+(?:the\s+)?(?:file\s+)?`?([\w./@+-]+)`?\s+"
                     rf"(?:with|containing)\s+{_Q}", re.IGNORECASE)
PERSON_COMMENTS = "The person's comments to address"  # the executor prompt's section title
# Typographic quotes, so this explanation is never itself read as an instruction.
HOWTO = ("The offline model only carries out explicit instructions such as: replace “old” "
         "with “new” in path/to/file (a text that occurs once), replace all “old” with “new” "
         "in path/to/file (every occurrence), replace the 2nd “old” with “new” in "
         "path/to/file (one of several), or create path/to/file with “content” (with straight "
         "double quotes). Configure a real model for anything else.")
TEST_STEP = "Run the test command and report the result."
_OCCURS = re.compile(r"occurs (\d+) times")
_NUMBERED = re.compile(r"^\s*(\d+)[.)]\s")
_STEP_WORD = re.compile(r"\bstep\s+(\d+)\b", re.IGNORECASE)


def _unquote(text: str) -> str:
    return text.replace('\\"', '"').replace("\\n", "\n")


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, …, 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _step_number(text: str, pos: int) -> int | None:
    """The plan step the text at ``pos`` belongs to: its line's "2. " or a "step 2" before it
    on the line (a review comment naming the step)."""
    line = text[text.rfind("\n", 0, pos) + 1:pos]
    numbered = _NUMBERED.match(line)
    if numbered:
        return int(numbered[1])
    named = _STEP_WORD.findall(line)
    return int(named[-1]) if named else None


def instructions(text: str) -> list[dict[str, Any]]:
    """The edit instructions in ``text``, in order of appearance."""
    found = []
    for m in _REPLACE.finditer(text):
        path = m["path"].rstrip(".")
        args: dict[str, Any] = {"path": path, "search": _unquote(m["old"]),
                                "replacement": _unquote(m["new"])}
        which = ""
        if m["all"]:
            args["replace_all"] = True
            which = "all "
        elif m["nth"]:
            word = m["nth"].lower()
            n = _ORDINAL_WORDS.index(word) + 1 if word in _ORDINAL_WORDS else int(word[:-2])
            args["occurrence"] = n
            which = f"the {ordinal(n)} "
        found.append((m.start(), {"tool": "replace_in_file", "args": args,
                                  "number": _step_number(text, m.start()),
                                  "step": f'Replace {which}"{m["old"]}" with "{m["new"]}" in {path}'}))
    for m in _CREATE.finditer(text):
        found.append((m.start(), {"tool": "write_file", "args": {
            "path": m[1].rstrip("."), "content": _unquote(m[2]).rstrip("\n") + "\n"},
            "number": _step_number(text, m.start()),
            "step": f'Create {m[1].rstrip(".")} with "{m[2]}"'}))
    return [item for _, item in sorted(found, key=lambda pair: pair[0])]


def _plan_steps(first: str) -> list[str]:
    """The numbered steps of the plan in the executor's prompt."""
    plan = sections([{"role": "user", "content": first}]).get("Plan", "")
    body = re.search(r"^### Steps\n(.*?)(?=^### |\Z)", plan, re.MULTILINE | re.DOTALL)
    return [m[1].strip() for m in re.finditer(r"^\s*\d+\.\s+(.+)$", body[1] if body else "",
                                              re.MULTILINE)]


def _why_not(step: dict[str, Any], observation: str) -> str:
    """Why a step failed, for the person: the tool's refusal, and for a plain replace of a text
    that occurs more than once, the two forms that say which (in typographic quotes, so the
    advice is never itself read as an instruction)."""
    reason = observation.split("\n", 1)[-1].strip()[:300]
    args = step.get("args") or {}
    occurs = _OCCURS.search(reason)
    if step.get("tool") == "replace_in_file" and occurs and "occurrence" not in args \
            and not args.get("replace_all"):
        old, new, path = args["search"], args["replacement"], args["path"]
        return (f"“{old}” occurs {occurs[1]} times in {path}, and a plain replace changes "
                f"exactly one, so nothing was changed. Say which in the request: replace all "
                f"“{old}” with “{new}” in {path} (every occurrence), or replace the 2nd “{old}” "
                f"with “{new}” in {path} (one of them; 1st, 2nd, 3rd, …), with straight double "
                "quotes.")
    return reason


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
    asked = instructions(find_section(secs, PERSON_COMMENTS))
    others = instructions("\n".join(body for title, body in secs.items()
                                    if title != "Plan" and not title.startswith(PERSON_COMMENTS)))
    # The person's instructions come first and replace a step the reviewer's comments repeat
    # on the same text of the same file ("replace all …" for a step refused as ambiguous is
    # not followed by the refused step again); a step they do not touch is tried again.
    said = {_target(a) for a in asked}
    return asked + [o for o in others if _target(o) not in said]


def _target(instruction: dict[str, Any]) -> tuple[str, str, str]:
    args = instruction["args"]
    return instruction["tool"], args.get("path", ""), args.get("search", "")


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
        steps.append(TEST_STEP)
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
        item = next((s for s in todo if s["args"] == action.get("args")),
                    {"step": action.get("tool"), "number": None})
        if t["ok"]:
            done.append(item["step"])
        else:
            # "Step 2: <the step> — why", so the page can say which plan step was not done.
            named = f"Step {item['number']}: {item['step']}" if item.get("number") \
                else item["step"]
            skipped.append(f"{named} — {_why_not(item, t['observation'])}")
    again = ALREADY_IN_FILES in _first_user(messages)
    if not again:  # a step of the plan in words, not an instruction, is not done: say so
        for number, text in enumerate(_plan_steps(_first_user(messages)), 1):
            if text != TEST_STEP and not instructions(text):
                skipped.append(f"Step {number}: {text} — the offline model cannot write code, "
                               "only carry out explicit edit instructions.")
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
    unfinished = [line.strip()[2:].strip() for line in
                  find_section(secs, UNFINISHED).splitlines() if line.strip().startswith("- ")]
    actionable = instructions(secs.get("Plan", "")) or \
        instructions(find_section(secs, PERSON_COMMENTS))
    if ("(the branch has no changes)" in diff or not files) and not actionable:
        # Nothing here the offline executor could ever do: sending it back cannot help.
        return {"approve": False, "follows_plan": False,
                "summary": f"The branch has no changes, so there is nothing to merge. {LABEL}",
                "comments": [], "rejection_kind": "unclear", "reason": HOWTO}
    if unfinished:
        return {"approve": False, "follows_plan": False,
                "summary": f"The round left work unfinished, so it goes back to the executor. "
                           f"{LABEL}",
                "comments": [{"file": "", "line": None, "problem": u, "requested_change": ""}
                             for u in unfinished],
                "rejection_kind": "fixup", "reason": " ".join(unfinished)[:2000]}
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
            "reason": "", "summary": f"Changes in {', '.join(sorted(set(files))[:10])}; every "
            f"plan step done; {checked}. A rule-based check only: read the diff yourself. {LABEL}"}


def replies() -> list[OfflineReply]:
    """(schema, role, reply) for the pattern's ``offline_replies``."""
    return [("AgentTurn", "planner", planner_turn), ("AgentTurn", "executor", executor_turn),
            ("AgentTurn", "reviewer", reviewer_turn), ("PlanDoc", None, plan_doc),
            ("ExecutionReport", None, execution_report), ("ReviewVerdict", None, review_verdict)]
