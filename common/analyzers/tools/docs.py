"""Documentation: codespell (spelling, in Markdown and plain-text documents) and pymarkdown
(Markdown lint). Neither reads a configuration file of the change (codespell gets an empty one
of ours, pymarkdown runs where only our generated files are), and their ``codespell:ignore``
and ``<!-- pyml disable -->`` comments are made plain comments
(``..fragments.neutralize_directives``).

pymarkdown runs with the rules that are matters of taste turned off: line length (MD013), a
first line that is not a heading (MD041, and a fragment has none), inline HTML (MD033),
repeated heading texts (MD024, every changelog has them), and list-marker and emphasis styles
(MD004, MD049, MD050).

How their results are graded (category, severity):

==============================  ==============  ===========================================
result                          grade           why
==============================  ==============  ===========================================
codespell: a misspelt word      style, low      a reader notices; the fix is given
pymarkdown: broken link or      architecture,   a link that goes nowhere, an image without
image syntax (MD042, MD045,     low             its text, a reversed link
MD011, MD051, MD052)
pymarkdown: any other rule      style, info     layout: blank lines, heading levels, ...
the same, in a fragment: MD001, (dropped)       an artefact of cutting the file into hunks
MD012, MD022, MD025, MD031,
MD032, MD047
==============================  ==============  ===========================================
"""

from __future__ import annotations

import re
from pathlib import Path

from .base import Tool, item, unit_for

# codespell: "f0.md:3: teh ==> the"
_SPELLING = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+): (?P<word>.+?) ==> (?P<fix>.+)$")
# pymarkdown: "f0.md:5:1: MD022: Headings should be surrounded by blank lines. [...] (aliases)"
_MARKDOWN = re.compile(r"^(?P<file>[^\n]+?):(?P<line>\d+):(?P<col>\d+): (?P<rule>MD\d+): "
                       r"(?P<message>.*?)(?: \((?P<alias>[\w,-]+)\))?$")
MARKDOWN_OFF = "md013,md041,md033,md024,md004,md049,md050"
MARKDOWN_RULES: dict[str, tuple[str, str]] = {
    rule: ("architecture", "low") for rule in ("MD011", "MD042", "MD045", "MD051", "MD052")}
FRAGMENT_ARTEFACTS = frozenset({"MD001", "MD012", "MD022", "MD025", "MD031", "MD032",
                                "MD047"})


def decode_spelling(text: str) -> list[dict]:
    return [m.groupdict() for m in map(_SPELLING.match, text.splitlines()) if m]


def decode_markdown(text: str) -> list[dict]:
    return [m.groupdict() for m in map(_MARKDOWN.match, text.splitlines()) if m]


def _codespell_cmd(exe: str, names: list[str], work: Path) -> list[str]:
    config = work / "codespell.cfg"
    config.write_text("[codespell]\n", encoding="utf-8")
    return [exe, "--config", str(config), "--disable-colors", "--", *names]


def _pymarkdown_cmd(exe: str, names: list[str], work: Path) -> list[str]:
    return [exe, "--disable-rules", MARKDOWN_OFF, "scan", "--", *names]


def parse_spelling(data, units, inputs, errors: list[str]) -> list[dict]:
    out: list[dict] = []
    for r in data if isinstance(data, list) else []:
        unit = unit_for(units, r.get("file")) if isinstance(r, dict) else None
        if unit is None:
            continue
        word, fix = str(r.get("word") or ""), str(r.get("fix") or "").strip()
        ev = item(unit, inputs, tool="codespell", rule="misspelling", category="style",
                  severity="low", confidence=0.7, line=int(r.get("line") or 0),
                  end=int(r.get("line") or 0), message=f"“{word}” is misspelt.",
                  tool_fix=f"Write “{fix}”" if fix else None)
        if ev is not None:
            out.append(ev)
    return out


def parse_markdown(data, units, inputs, errors: list[str]) -> list[dict]:
    out: list[dict] = []
    for r in data if isinstance(data, list) else []:
        unit = unit_for(units, r.get("file")) if isinstance(r, dict) else None
        if unit is None:
            continue
        rule = str(r.get("rule") or "")
        if unit.fragment and rule in FRAGMENT_ARTEFACTS:
            continue
        category, severity = MARKDOWN_RULES.get(rule, ("style", "info"))
        ev = item(unit, inputs, tool="pymarkdown", rule=rule, category=category,
                  severity=severity, confidence=0.7, line=int(r.get("line") or 0),
                  end=int(r.get("line") or 0), message=str(r.get("message") or ""),
                  url="https://pymarkdown.readthedocs.io/en/latest/plugins/rule_"
                      f"{rule.lower()}/")
        if ev is not None:
            out.append(ev)
    return out


CODESPELL = Tool(name="codespell", package="codespell", kinds=frozenset({"markdown", "text"}),
                 command=_codespell_cmd, parse=parse_spelling, ok_codes=(0, 65),
                 private_home=True, decode=decode_spelling, quiet_ok=True,
                 about="Markdown and plain-text documents: misspelt words")
PYMARKDOWN = Tool(name="pymarkdown", package="pymarkdownlnt", kinds=frozenset({"markdown"}),
                  command=_pymarkdown_cmd, parse=parse_markdown, private_home=True,
                  decode=decode_markdown, quiet_ok=True,
                  about="Markdown: structure, links, headings, code blocks")
