"""The registry is the one list of patterns: everything that offers patterns iterates it, and
each pattern lives in its own package."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from agents_app.forms import StartRunForm
from agents_app.option_fields import option_fields
from agents_app.patterns import PATTERNS, task_patterns
from agents_app.patterns.options import extra

ROOT = Path(__file__).resolve().parent.parent
SHARED = ("agents_app", "reviews_app", "config", "templates", "static", "common")
# A package's Django side: everything else in it is pattern logic, plain Python.
DJANGO_SIDE = {"panel", "views", "forms", "urls", "persist", "command", "service"}


def _files():
    for top in SHARED:
        for path in (ROOT / top).rglob("*"):
            if path.suffix in (".py", ".html", ".js", ".css", ".txt") and "migrations" not in path.parts:
                yield path


def _mentions(text: str, key: str) -> bool:
    return re.search(rf"""["'/.]{re.escape(key)}(?:["'/]|\.(?!\w*_)|\b(?=\s))|patterns\.{re.escape(key)}\b""",
                     text) is not None


@pytest.mark.parametrize("key", [k for k in PATTERNS])
def test_a_pattern_key_appears_only_in_its_package_and_the_registry(key):
    pattern = PATTERNS[key]
    home = pattern.directory
    registry = ROOT / "agents_app" / "patterns" / "registry.py"
    # Code review's package is its app: the reviews app is built around it.
    if pattern.package.startswith("reviews_app."):
        home = ROOT / "reviews_app"
    # A pattern built on another one (``builds_on``) imports it: its package may name it.
    heirs = [q.directory for q in PATTERNS.values()
             if key in getattr(q, "builds_on", ()) and q.directory is not None]
    outside = [str(p.relative_to(ROOT)) for p in _files()
               if p not in (registry, pattern.source) and (home is None or home not in p.parents)
               and not any(h in p.parents for h in heirs)
               and _mentions(p.read_text("utf-8"), key)]
    assert outside == [], f"{key} is named outside its package: {outside}"


def test_pattern_logic_imports_no_django():
    """Every module of every pattern package but its Django side imports, in a fresh
    interpreter without Django settings, without loading Django at all."""
    modules = []
    for pattern in PATTERNS.values():
        if pattern.directory is None or not pattern.package.startswith("agents_app.patterns."):
            continue
        modules += [f"{pattern.package}.{p.stem}" if p.stem != "__init__" else pattern.package
                    for p in sorted(pattern.directory.glob("*.py")) if p.stem not in DJANGO_SIDE]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
            "print(len(bad)); print(bad[:5])\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
                         check=True).stdout.split("\n")
    assert len(modules) > 10 and out[0] == "0", out


def test_start_form_and_command_line_offer_every_task_pattern_and_option(capsys):
    form = StartRunForm()
    keys = [p.name for p in task_patterns()]
    assert [c for c, _ in form.fields["pattern"].choices] == keys
    fields = option_fields()
    for pattern in task_patterns():
        for name, info in pattern.options.model_fields.items():
            if extra(info).get("hidden"):
                continue
            assert any(e.option == name and pattern.name in e.patterns for e in fields.values()), \
                (pattern.name, name)
    with pytest.raises(SystemExit):
        call_command("run_pattern", "--help")
    help_text = capsys.readouterr().out
    for key in keys:
        assert key in help_text
    for entry in fields.values():
        if not all("[web only]" in h for h in entry.helps):
            assert entry.flag in help_text, entry.flag


def test_the_readme_table_is_the_registry():
    out = StringIO()
    call_command("patterns", "--markdown", stdout=out)
    readme = (ROOT / "README.md").read_text("utf-8")
    block = readme.split("<!-- patterns:start -->\n", 1)[1].split("\n<!-- patterns:end -->", 1)[0]
    assert block == out.getvalue().strip()


def test_every_pattern_says_what_it_does_and_the_listing_says_when_it_has_no_roles():
    assert [k for k, p in PATTERNS.items() if not p.summary.strip()] == []
    out = StringIO()
    call_command("patterns", stdout=out)
    listing = out.getvalue()
    assert "  roles: \n" not in listing
    assert "apply_fixes: Apply accepted fixes (git)" in listing
    assert "  roles: none (it calls no model)" in listing
