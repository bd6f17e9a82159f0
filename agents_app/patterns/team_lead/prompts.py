"""What the lead and the members are told. The offline replies (``offline.py``) read the same
headings, named here once."""

from __future__ import annotations

from typing import Any

TASK = "Task"
OVERALL_TASK = "Overall task"
YOUR_SUBTASK = "Your subtask"
RESULTS_SO_FAR = "Results so far"
WORK_LOG = "Work log"
RESULTS = "Results"
MEMBER_INTRO = "You are"  # "You are NAME, a member of a team: …"

LEAD_SYSTEM = """You lead a small team. Split the user's task into subtasks, each for one
team member by name, each self-contained and doable in one reply. Use as few subtasks as the
task needs (at most {max_subtasks}).

Team:
{team}"""

MEMBER_SYSTEM = MEMBER_INTRO + """ {name}, a member of a team: {description}
Do the subtask you are given, completely, in Markdown. Use the results of earlier subtasks
when they are given."""

REVIEW_SYSTEM = """You lead a team and review its work so far against the task. If the
results are enough to answer, set `complete`. Otherwise assign more work: new subtasks, or a
subtask again to someone (say what to change). Team:
{team}"""

SYNTH_SYSTEM = """You lead a team. Write the final answer to the user's task from your team's
results, in Markdown. Answer the task directly; do not describe the process."""


def team_block(team: list[dict[str, str]]) -> str:
    """The team as the lead reads it: one ``- name: what they do`` line per member."""
    return "\n".join(f"- {m['name']}: {m['description']}" for m in team)


def work_log(subtasks: list[dict[str, Any]]) -> str:
    """The work done so far: one ``### ID — assignee (attempt N)`` block per subtask tried."""
    out = []
    for s in subtasks:
        if s["status"] == "pending":
            continue
        result = s["result"] if s["status"] == "done" else f"(failed: {s['error']})"
        out.append(f"### {s['id']} — {s['assignee']} (attempt {s['attempt']})\nTask: {s['task']}"
                   f"\n\n{result}")
    return "\n\n".join(out) or "(nothing done yet)"


def lead_messages(task: str, team: list[dict[str, str]], max_subtasks: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": LEAD_SYSTEM.format(max_subtasks=max_subtasks,
                                                              team=team_block(team))},
            {"role": "user", "content": f"## {TASK}\n{task}"}]


def member_messages(task: str, member: dict[str, str], subtask: str, prior: str) -> list[dict[str, str]]:
    user = f"## {OVERALL_TASK}\n{task}\n\n## {YOUR_SUBTASK}\n{subtask}\n"
    if prior:
        user += f"\n## {RESULTS_SO_FAR}\n{prior}\n"
    return [{"role": "system", "content": MEMBER_SYSTEM.format(
        name=member["name"], description=member["description"])},
        {"role": "user", "content": user}]


def review_messages(task: str, team: list[dict[str, str]],
                    subtasks: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": "system", "content": REVIEW_SYSTEM.format(team=team_block(team))},
            {"role": "user", "content": f"## {TASK}\n{task}\n\n## {WORK_LOG}\n"
             f"{work_log(subtasks)}"}]


def synthesis_messages(task: str, subtasks: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYNTH_SYSTEM},
            {"role": "user", "content": f"## {TASK}\n{task}\n\n## {RESULTS}\n"
             f"{work_log(subtasks)}"}]
