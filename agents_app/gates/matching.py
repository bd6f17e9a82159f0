"""Which of a team's gate rules applies to a gate, and who owns the files it is about.

A rule matches when each of its conditions it sets matches: the pattern, the gate, the
repository (a glob), and the paths (gitignore-style globs, ``pathspec``; any file of the gate
matching any glob). CODEOWNERS is read from the repository's base branch — never from the
branch the agents wrote, which a change could edit to name its own approvers — with the
``codeowners`` library (GitHub's rules: the last matching line wins)."""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass, field

import pathspec
from codeowners import CodeOwners
from django.contrib.auth import get_user_model

from ..repos.gitcmd import GitError, check_ref_arg, git
from ..teams.models import Team
from .models import GateRule

log = logging.getLogger("quorum.gates")

CODEOWNERS_PLACES = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
MAX_CODEOWNERS_BYTES = 256 * 1024
MAX_PATHS = 2000


@dataclass
class Facts:
    """What a gate is about, for matching: its pattern and gate, the repository (a local path
    or a host's owner/name) and its base branch, and the files it changes or plans to."""

    pattern: str
    gate: str
    repository: str = ""
    repo_path: str = ""  # a local repository whose base branch can be read
    base: str = ""
    paths: list[str] = field(default_factory=list)


def facts_for(run) -> Facts:
    """What the gate is about, from the run's records (no pattern is named here): a review's
    files and repository, or a change's local repository, base branch and files."""
    from django.core.exceptions import ObjectDoesNotExist

    state = run.state or {}
    opts = state.get("options") or run.options or {}
    facts = Facts(run.pattern, run.gate)
    try:
        review = run.review  # a code review (reviews_app), if this run is one
    except (AttributeError, ObjectDoesNotExist):
        review = None
    if review is not None:
        facts.paths = [str(f.get("path", "")) for f in review.files or [] if isinstance(f, dict)]
        meta = review.source_meta or {}
        pr = review.pull_request
        if pr is not None:
            facts.repository = pr.connection.repository
        elif review.source_kind == "git" and meta.get("repo"):
            # A range of a local repository: its base commit's CODEOWNERS.
            facts.repo_path = facts.repository = str(meta["repo"])
            facts.base = str(meta.get("merge_base") or meta.get("base") or "")
    elif opts.get("repo") and opts.get("base"):  # a change of a local repository
        facts.repo_path = facts.repository = str(opts["repo"])
        facts.base = str(opts["base"])
        from ..models import AgentReport

        report = AgentReport.objects.filter(run=run).exclude(files=[]).order_by("-id").first()
        if report is not None:
            facts.paths = [str(f.get("path", "")) for f in report.files if isinstance(f, dict)]
        elif isinstance(state.get("plan"), dict):
            facts.paths = [str(p) for p in state["plan"].get("files") or []]
    facts.paths = [p for p in facts.paths if p][:MAX_PATHS]
    return facts


def _spec(lines: str) -> pathspec.PathSpec | None:
    globs = [g.strip() for g in lines.splitlines() if g.strip() and not g.startswith("#")]
    return pathspec.PathSpec.from_lines("gitignore", globs) if globs else None


def matches(rule: GateRule, facts: Facts) -> bool:
    if rule.pattern and rule.pattern != facts.pattern:
        return False
    if rule.gate and rule.gate != facts.gate:
        return False
    if rule.repository and not fnmatch.fnmatchcase(facts.repository, rule.repository):
        return False
    if rule.paths.strip():
        spec = _spec(rule.paths)
        if spec is not None and not any(spec.match_file(p) for p in facts.paths):
            return False
    return True


def rule_for(team_id: int | None, facts: Facts) -> GateRule | None:
    if team_id is None:
        return None
    for rule in GateRule.objects.filter(team_id=team_id).select_related(
            "assign_user", "assign_team", "escalate_to"):
        if matches(rule, facts):
            return rule
    return None


def read_codeowners(repo_path: str, base: str) -> str:
    """The CODEOWNERS file of ``base`` in the repository, or "" (none, unreadable)."""
    if not repo_path or not base:
        return ""
    try:
        check_ref_arg(base, "base")
    except GitError:
        return ""
    for place in CODEOWNERS_PLACES:
        try:
            proc = git(repo_path, "show", f"{base}:{place}", check=False)
        except (GitError, OSError) as exc:
            log.info("CODEOWNERS of %s not read: %s", repo_path, exc)
            return ""
        if proc.returncode == 0:
            return proc.stdout[:MAX_CODEOWNERS_BYTES]
    return ""


@dataclass
class Owners:
    users: list = field(default_factory=list)
    teams: list = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # owners named that are nobody here


def owners_of(text: str, paths: list[str]) -> Owners:
    """The people and teams CODEOWNERS names for ``paths``: ``@name`` a user of that name (or
    else a team of that name), ``@org/team`` a team named ``team`` or ``org/team``, an email
    a user with that address."""
    out = Owners()
    if not text.strip() or not paths:
        return out
    try:
        owners = CodeOwners(text)
    except Exception as exc:  # a broken file is named in the audit, never fatal  # noqa: BLE001
        out.unknown.append(f"CODEOWNERS unreadable: {exc}"[:200])
        return out
    named: dict[tuple[str, str], None] = {}
    for path in paths:
        for kind, owner in owners.of(path):
            named[(kind, owner)] = None
    users = get_user_model().objects
    for kind, owner in named:
        if kind == "TEAM":
            slug = owner.removeprefix("@")
            team = Team.objects.filter(name__iexact=slug).first() or \
                Team.objects.filter(name__iexact=slug.split("/", 1)[-1]).first()
            (out.teams.append(team) if team else out.unknown.append(owner))
        elif kind == "EMAIL":
            user = users.filter(email__iexact=owner).first()
            (out.users.append(user) if user else out.unknown.append(owner))
        else:  # "@name": a person here of that name, else a team of that name
            name = owner.removeprefix("@")
            user = users.filter(username=name).first()
            team = None if user else Team.objects.filter(name__iexact=name).first()
            if user:
                out.users.append(user)
            elif team:
                out.teams.append(team)
            else:
                out.unknown.append(owner)
    return out
