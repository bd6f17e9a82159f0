"""zizmor: GitHub Actions workflows (``.github/workflows/*.yml``). It runs offline (no audit
that asks GitHub), with no configuration file of the change (``--no-config``; ours is written
to the run's directory), ignore comments of the change not honoured (``--no-ignores``) and
``--no-exit-codes`` (a report with findings is a normal run).

It runs as the ``auditor`` persona, for one result only the regular persona hides: a token
given every write permission (``permissions: write-all``). Its other pedantic and auditor
results (a job without a name, no concurrency limit, permissions without a comment, a write
permission at the workflow level, secrets outside an environment) are dropped: opinions, not
problems. Actions of GitHub's own organisations may be pinned
to a tag; any other action must be pinned to a commit.

How its results are graded (category security; severity):

==============================  ==============  ===========================================
zizmor result                   grade           why
==============================  ==============  ===========================================
template-injection              high            an event field (a pull request's title,
                                                a branch name) expanded into a shell: code
                                                execution with the workflow's token
dangerous-triggers              medium          ``pull_request_target``/``workflow_run``
                                                with a checkout: risky, not always wrong
                                                (our semgrep rule reports the checkout of
                                                the pull request's head, high)
excessive-permissions           medium / low    ``write-all``: a token that can write
                                                everything / a job left with the default
                                                token (read-only in newer repositories)
unpinned-uses, impostor-commit  medium          a third-party action by a movable tag
artipacked                      low             the checkout's credentials left on disk
others                          zizmor's own    its severity: High/Medium/Low/Informational
==============================  ==============  ===========================================
"""

from __future__ import annotations

from pathlib import Path

from .base import Tool, item, unit_for

NAME = "zizmor"
CONFIG = """\
rules:
  unpinned-uses:
    config:
      policies:
        "actions/*": ref-pin
        "github/*": ref-pin
        "docker/*": ref-pin
        "*": hash-pin
"""
_BY_SEVERITY = {"high": "high", "medium": "medium", "low": "low", "informational": "info",
                "unknown": "low"}
RULES = {"template-injection": "high", "dangerous-triggers": "medium",
         "excessive-permissions": "medium", "unpinned-uses": "medium",
         "impostor-commit": "medium", "artipacked": "low"}
_CONFIDENCE = {"high": 0.85, "medium": 0.7, "low": 0.5}


def _cmd(exe: str, names: list[str], work: Path) -> list[str]:
    config = work / "zizmor.yml"
    config.write_text(CONFIG, encoding="utf-8")
    return [exe, "--offline", "--no-ignores", "--config", str(config), "--persona", "auditor",
            "--format", "json", "--no-exit-codes", "--no-progress", "--color", "never",
            "--", *names]


def _primary(finding: dict) -> dict | None:
    locations = [loc for loc in finding.get("locations") or [] if isinstance(loc, dict)]
    for loc in locations:
        if (loc.get("symbolic") or {}).get("kind") == "Primary":
            return loc
    return locations[0] if locations else None


def _path(loc: dict) -> object:
    key = (loc.get("symbolic") or {}).get("key") or {}
    local = key.get("Local") if isinstance(key, dict) else None
    return local.get("verbatim_path") if isinstance(local, dict) else None


def _row(point: object) -> int | None:
    row = point.get("row") if isinstance(point, dict) else None
    return row + 1 if isinstance(row, int) and not isinstance(row, bool) else None


def parse(data, units, inputs, errors: list[str]) -> list[dict]:
    out: list[dict] = []
    for f in data if isinstance(data, list) else []:
        if not isinstance(f, dict) or f.get("ignored"):
            continue
        rule = str(f.get("ident") or "zizmor")
        found = f.get("determinations")
        det: dict = found if isinstance(found, dict) else {}
        loc = _primary(f)
        if loc is None:
            continue
        note = str((loc.get("symbolic") or {}).get("annotation") or "")
        write_all = rule == "excessive-permissions" and "write-all" in note
        if str(det.get("persona") or "Regular") != "Regular" and not write_all:
            continue
        unit = unit_for(units, _path(loc))
        if unit is None:
            continue
        where = (loc.get("concrete") or {}).get("location") or {}
        severity = RULES.get(rule) or _BY_SEVERITY.get(str(det.get("severity") or "").lower(),
                                                       "low")
        if rule == "excessive-permissions" and not write_all:
            severity = "low"  # the default token (read-only in repositories made since 2023)
        message = str(f.get("desc") or rule) + (f" ({note})" if note else "")
        ev = item(unit, inputs, tool=NAME, rule=rule, category="security", severity=severity,
                  confidence=_CONFIDENCE.get(str(det.get("confidence") or "").lower(), 0.6),
                  line=_row(where.get("start_point")), end=_row(where.get("end_point")),
                  message=message, url=str(f.get("url") or "") or None)
        if ev is not None:
            out.append(ev)
    return out


ZIZMOR = Tool(name=NAME, package="zizmor", kinds=frozenset({"workflow"}), command=_cmd,
              parse=parse, ok_codes=(0,), private_home=True, env={"RUST_BACKTRACE": "0"},
              about="GitHub Actions workflows: script injection, dangerous triggers, "
                    "unpinned actions, over-broad tokens")
