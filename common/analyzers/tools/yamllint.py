"""yamllint: YAML files, GitHub Actions workflows included. Its configuration is ours (``-d``,
below): no ``.yamllint`` of the change is read, and its ``# yamllint disable`` comments are
made plain comments (``..fragments.neutralize_directives``). Line length, the ``---`` document
start and comment spacing are not checked (layout habits, not problems); ``on:`` as a key is
not taken for a boolean (GitHub Actions' own key).

How its results are graded (category, severity):

==============================  ==============  ===========================================
yamllint result                 grade           why
==============================  ==============  ===========================================
syntax error, whole file        architecture,   the file does not parse: whatever reads it
                                high            fails
syntax error in a fragment      (dropped)       an artefact of cutting the file into hunks
key-duplicates                  architecture,   the second value silently wins
                                medium
truthy (``yes``/``on`` values)  architecture,   YAML 1.1 readers take them for booleans
                                low
anchors, octal-values,          architecture,   easy to misread
float-values                    low
any other rule                  style, info     layout (indentation, spaces, blank lines)
indentation in a fragment       (dropped)       a hunk starts inside a block
==============================  ==============  ===========================================
"""

from __future__ import annotations

import re
from pathlib import Path

from .base import Tool, item, unit_for

NAME = "yamllint"
CONFIG = ("{extends: default, rules: {document-start: disable, line-length: disable, "
          "comments: disable, comments-indentation: disable, "
          "truthy: {check-keys: false, level: warning}}}")
RULES: dict[str, tuple[str, str]] = {
    "syntax": ("architecture", "high"), "key-duplicates": ("architecture", "medium"),
    "truthy": ("architecture", "low"), "anchors": ("architecture", "low"),
    "octal-values": ("architecture", "low"), "float-values": ("architecture", "low"),
}
FRAGMENT_ARTEFACTS = frozenset({"syntax", "indentation", "empty-lines", "new-line-at-end-of-file",
                                "document-end"})
# ``-f parsable``: "f0.yaml:3:1: [error] duplication of key "a" in mapping (key-duplicates)"
_LINE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): \[(?P<level>\w+)\] "
                   r"(?P<message>.*?)(?: \((?P<rule>[\w-]+)\))?$")


def decode(text: str) -> list[dict]:
    return [m.groupdict() for m in map(_LINE.match, text.splitlines()) if m]


def _cmd(exe: str, names: list[str], work: Path) -> list[str]:
    return [exe, "-f", "parsable", "-d", CONFIG, "--", *names]


def parse(data, units, inputs, errors: list[str]) -> list[dict]:
    out: list[dict] = []
    syntax_seen: set[str] = set()
    for r in data if isinstance(data, list) else []:
        if not isinstance(r, dict):
            continue
        unit = unit_for(units, r.get("file"))
        if unit is None:
            continue
        rule = str(r.get("rule") or ("syntax" if "syntax error" in str(r.get("message"))
                                     else "yamllint"))
        if unit.fragment and rule in FRAGMENT_ARTEFACTS:
            continue
        if rule == "syntax":
            if unit.name in syntax_seen:
                continue
            syntax_seen.add(unit.name)
        category, severity = RULES.get(rule, ("style", "info"))
        message = str(r.get("message") or "")
        if rule == "syntax":
            message = f"The file does not parse as YAML: {message.removeprefix('syntax error: ')}"
        ev = item(unit, inputs, tool=NAME, rule=rule, category=category, severity=severity,
                  confidence=0.85 if category == "architecture" else 0.6,
                  line=int(r.get("line") or 0), end=int(r.get("line") or 0), message=message,
                  url=None if rule == "syntax" else "https://yamllint.readthedocs.io/en/stable/"
                  f"rules.html#module-yamllint.rules.{rule.replace('-', '_')}")
        if ev is not None:
            out.append(ev)
    return out


YAMLLINT = Tool(name=NAME, package="yamllint", kinds=frozenset({"yaml", "workflow"}),
                command=_cmd, parse=parse, private_home=True, decode=decode, quiet_ok=True,
                about="YAML: syntax, duplicate keys, values read as booleans, layout")
