"""Starting and showing plan → execute → review runs on a git repository (the Django side of
``patterns.plan_execute_review``): checks the repository against the configured roots, the
base branch and the test command, names the run's worktree, and builds the page's context."""

from __future__ import annotations

import shlex
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Sum

from ... import engine
from ...llm.families import same_family
from ...models import AgentReport, MergeRequest, Run
from ...option_fields import default_of
from ...repos import gitops
from ...repos.roots import RepoRootError, allowed_repo, project_file_above
from .. import safe_json
from .checks import headline
from .messages import proposed_merge_message
from .pattern import PlanExecuteReview
from .schemas import DEFAULT_MERGE_MODE, MAX_COMMIT_MESSAGE, MERGE_MODES

PATTERN = PlanExecuteReview.name


class ChangeError(ValueError):
    """The change cannot start; the message is for the person."""


def check_repo(path: str) -> str:
    try:
        return str(allowed_repo(path, settings.QUORUM_REPO_ROOTS))
    except RepoRootError as exc:
        raise ChangeError(str(exc)) from None


def check_base(repo: str, base: str) -> str:
    base = (base or "").strip()
    if not base:
        current = gitops.current_branch(repo)
        if not current:
            raise ChangeError("Name the base branch (the repository has a detached HEAD).")
        return current
    try:
        names = gitops.branches(repo)
    except gitops.GitError as exc:
        raise ChangeError(f"The branches of {repo} could not be read: {exc}") from None
    if base not in names:
        shown = ", ".join(names[:10]) + (" …" if len(names) > 10 else "")
        raise ChangeError(f"There is no branch {base!r} in {repo}. Branches: {shown or 'none'}.")
    if base.startswith("quorum/"):
        raise ChangeError("quorum/… branches belong to runs; pick the branch to change.")
    return base


def test_commands() -> list[str]:
    return list(settings.QUORUM_TEST_COMMANDS)


def test_argv(command: str) -> list[str]:
    command = (command or "").strip()
    if not command:
        return []
    if command not in test_commands():
        raise ChangeError("That test command is not among the configured ones "
                          "(QUORUM_TEST_COMMANDS).")
    return shlex.split(command)


def family_warning(models: dict[str, str]) -> str:
    """A warning (never a refusal) when the reviewer shares the executor's model family.
    The offline model is no model family: no warning for it."""
    executor, reviewer = models.get("executor", ""), models.get("reviewer", "")
    if same_family(executor, reviewer) and not executor.startswith("offline/"):
        return (f"The reviewer ({reviewer}) is from the same model family as the executor "
                f"({executor}), so their mistakes tend to coincide. A reviewer from another "
                "family catches more.")
    return ""


def git_identity(user) -> str:
    """The person as the merge commit names them: ``Full Name <email>``, or their name alone
    when no address is known (a made-up address would mislead)."""
    name = " ".join((user.get_full_name() or "").replace("<", "").replace(">", "").split()) \
        or user.get_username()
    email = (user.email or "").strip()
    return f"{name} <{email}>" if email and "<" not in email and ">" not in email \
        and " " not in email else name


def default_models() -> dict[str, str]:
    return {role: settings.QUORUM_ROLE_MODELS.get(role, settings.QUORUM_DEFAULT_MODEL)
            for role in PlanExecuteReview.roles}


def start_change(owner, *, repo: str, base: str, task: str, models: dict[str, str],
                 max_rounds: int | None = None, test_command: str = "",
                 auto_approve_plan: bool = False, auto_merge: bool = False,
                 max_cost_usd: Decimal | None = None, max_tokens: int | None = None,
                 enqueue: bool = True, team=None) -> Run:
    """Check everything and create the run; ChangeError with a readable message otherwise."""
    task = (task or "").strip()
    if not task:
        raise ChangeError("Describe the change.")
    if len(task) > settings.QUORUM_MAX_TASK_CHARS:
        raise ChangeError(f"The change request is {len(task):,} characters; the limit is "
                          f"{settings.QUORUM_MAX_TASK_CHARS:,}.")
    top = check_repo(repo)
    worktrees = Path(settings.QUORUM_WORKTREE_ROOT).expanduser().resolve()
    if worktrees == Path(top) or worktrees.is_relative_to(top):
        raise ChangeError(f"QUORUM_WORKTREE_ROOT ({worktrees}) lies inside this repository; "
                          "run worktrees must live outside it.")
    if (found := project_file_above(worktrees)) is not None:
        raise ChangeError(f"QUORUM_WORKTREE_ROOT ({worktrees}) lies inside a project ({found}): "
                          "a test command run in a worktree there would read that file's "
                          "settings, not only the repository's own. Set it to a folder outside "
                          "any project, or leave it unset (the default, "
                          "$XDG_STATE_HOME/quorum/worktrees or else "
                          "~/.local/state/quorum/worktrees, is outside any project).")
    base = check_base(top, base)
    argv = test_argv(test_command)
    allowlist = [shlex.split(c) for c in test_commands()]
    options = {
        "repo": top, "base": base, "worktree_root": str(settings.QUORUM_WORKTREE_ROOT),
        "max_rounds": max_rounds or default_of(PlanExecuteReview, "max_rounds"),
        "test_command": argv, "test_allowlist": allowlist if argv else [],
        "test_timeout": settings.QUORUM_TEST_TIMEOUT,
        "auto_approve_plan": auto_approve_plan, "auto_merge": auto_merge,
        "max_run_seconds": settings.QUORUM_CHANGE_MAX_RUN_SECONDS,
    }
    run = engine.create_run(
        owner, PATTERN, task, options=options, models={**default_models(), **models},
        max_cost_usd=max_cost_usd or Decimal(str(settings.QUORUM_DEFAULT_MAX_COST_USD)),
        max_tokens=max_tokens or settings.QUORUM_DEFAULT_MAX_TOKENS, enqueue=enqueue, team=team)
    MergeRequest.objects.get_or_create(run=run, defaults={
        "repo": top, "base_branch": base, "branch": run.options["branch"]})
    return run


def close_after_end(run_id: int) -> None:
    """Once a change run has ended without merging or discarding (failed, cancelled, over
    budget), remove its worktree, keep its branch, and close the merge request."""
    run = Run.objects.get(pk=run_id)
    mr = MergeRequest.objects.filter(run=run).first()
    if mr is None or mr.status in (MergeRequest.State.MERGED, MergeRequest.State.DISCARDED,
                                   MergeRequest.State.CLOSED):
        return
    opts = run.options or {}
    try:
        gitops.remove_worktree(opts["repo"], opts["worktree"], opts["branch"],
                               delete_branch=False)
        kept = gitops.branch_sha(opts["repo"], opts["branch"]) is not None
        note = f"the worktree was removed; branch {opts['branch']} is kept" if kept else \
            "the worktree was removed"
    except (gitops.GitError, KeyError) as exc:
        note = f"the worktree could not be removed ({exc})"
    mr.status = MergeRequest.State.CLOSED
    mr.message = f"The run ended ({run.get_status_display().lower()}) without a merge; {note}."
    mr.save(update_fields=["status", "message", "updated_at"])


def on_fork(parent: Run, fork: Run, checkpoint) -> None:
    """A fork's own merge request (issue 33), made in the fork's creation transaction: for its
    own branch, never the original's (whose row and branch a fork never touches). Database
    only: the branch itself is made by the fork's first stage that needs it."""
    opts = fork.options or {}
    state = fork.state or {}
    status = state.get("mr_status")
    MergeRequest.objects.create(
        run=fork, repo=opts.get("repo", ""), base_branch=opts.get("base", ""),
        branch=opts.get("branch", ""), base_sha=state.get("base_sha") or "",
        head_sha=state.get("head") or "",
        status=status if status in (MergeRequest.State.OPEN, MergeRequest.State.CONFLICT)
        and fork.status == "awaiting_merge_request" else MergeRequest.State.DRAFT,
        message=f"Forked from run #{parent.pk} at stage {checkpoint.seq}; its branch "
                f"{opts.get('branch', '')} is made from "
                f"{(state.get('fork_start') or opts.get('base', ''))[:10]} when the fork "
                "first works on it.")


# --- the page ---------------------------------------------------------------------------------
def diff_views(diff: str, *, only: int | None = None):
    """The diff as highlighted per-file views (the review page's renderer), and the files it
    could not show with the reason. A large diff comes with its files as stubs the page loads
    when opened; ``only`` renders that one file in full."""
    from reviews_app.pipeline.diffs import DiffError, prepare
    from reviews_app.rendering import file_views

    if not diff.strip():
        return [], []
    try:
        prepared = prepare(diff)
    except DiffError as exc:
        return [], [{"path": "(diff)", "detail": str(exc)}]
    if only is not None and not 0 <= only < len(prepared.files):
        return [], []
    return (file_views(prepared.files, [], only=only),
            [c for c in prepared.coverage if not c["reviewed"]])


def stage_costs(run: Run) -> list[dict]:
    rows = run.model_calls.values("stage").annotate(
        calls=Count("id"), cost=Sum("cost_usd"), prompt=Sum("prompt_tokens"),
        completion=Sum("completion_tokens")).order_by("stage")
    order = {r.stage: i for i, r in enumerate(run.agent_reports.all())}
    return sorted(rows, key=lambda r: (order.get(r["stage"], 10**6), r["stage"]))


def live_calls(run: Run, reports: list[AgentReport]) -> list[dict]:
    """The running agent stage's turns so far (thought and tool call of each model reply),
    read from the journal while the stage has no report yet."""
    if run.is_terminal or run.is_waiting or not run.stage or \
            run.stage.split(":", 1)[0] not in ("plan", "execute", "review"):
        return []
    if any(r.stage == run.stage for r in reports):
        return []
    turns = []
    for call in run.model_calls.filter(stage=run.stage).order_by("id"):
        try:
            data = safe_json.loads(call.response) if call.response else {}
        except ValueError:
            data = {}
        action = data.get("action") if isinstance(data, dict) else None
        turns.append({"key": call.key, "role": call.role, "error": call.error,
                      "thought": data.get("thought", "") if isinstance(data, dict) else "",
                      "tool": action.get("tool") if isinstance(action, dict) else None,
                      "args": action.get("args") if isinstance(action, dict) else None,
                      "answer": call.key.endswith(":answer")})
    return turns


def vote_note(run: Run) -> str:
    """At a gate that needs several approvals, the last vote in words ("alice approved (1 of
    2 approvals): 1 more needed."), the same for every watcher, so a live update keeps it."""
    if not run.is_waiting:
        return ""
    last = run.events.order_by("-seq").only("kind", "message").first()
    return last.message if last is not None and last.kind == "gate_vote" else ""


def change_context(run: Run, *, with_diff: bool = True, timeline: bool = True,
                   **extra) -> dict:
    """The change page's context. Live updates and gate answers leave out the highlighted diff
    (``with_diff``) unless they show it, and the whole timeline (``timeline``: then only the
    newest event, for the header's activity line)."""
    reports = list(run.agent_reports.all())
    executes = [r for r in reports if r.kind == AgentReport.Kind.EXECUTE]
    reviews = {r.round: r for r in reports if r.kind == AgentReport.Kind.REVIEW}
    plans = list(run.plan_versions.all())
    latest_exec = executes[-1] if executes else None
    files, unshown = diff_views(latest_exec.diff) if (with_diff and latest_exec) else ([], [])
    from ...run_page import newest_only  # the run page's own
    from ...run_page import timeline as run_timeline

    shown = run_timeline(run) if timeline else newest_only(run)
    state = run.state or {}
    mr = MergeRequest.objects.filter(run=run).select_related("decided_by").first()
    # The latest round's plan steps not done, for the notice at the top of the page.
    not_done = (latest_exec.answer or {}).get("not_done") if latest_exec else None
    return {
        "run": run, "mr": mr, "plans": plans, "plan": plans[-1] if plans else None,
        "reports": reports, "latest_exec": latest_exec,
        "latest_review": reviews.get(latest_exec.round) if latest_exec else None,
        "files": files, "unshown": unshown, "live_turns": live_calls(run, reports),
        "now_label": PlanExecuteReview().describe_stage(run.stage) if run.stage else "",
        "stage_costs": stage_costs(run),
        "approvals": list(run.approvals.select_related("user")),
        **shown,
        "at_plan_gate": run.status == "awaiting_plan_approval",
        "at_merge_gate": run.status == "awaiting_merge_request",
        "at_escalation": run.status == "awaiting_escalation",
        "escalation_why": state.get("escalation", ""),
        "merge_problem": state.get("merge_problem"),
        "merge_message": (state.get("merge_message") or proposed_merge_message(state))
        if state.get("plan") else "",
        "merge_mode": state.get("merge_mode") or DEFAULT_MERGE_MODE,
        "merge_modes": MERGE_MODES, "max_commit_message": MAX_COMMIT_MESSAGE,
        "approver": git_identity(run.owner) if run.status == "awaiting_merge_request" else "",
        "last_review_state": state.get("last_review") or {},
        "not_done": not_done or {}, "not_done_headline": headline(not_done),
        "rounds_used": state.get("round", 0),
        "max_rounds": (run.options or {}).get("max_rounds"),
        "family_warning": family_warning(run.models_used),
        "all_offline": all(m.startswith("offline/") for m in (run.models_used or {}).values()),
        "vote_note": vote_note(run),
        **extra,
    }
