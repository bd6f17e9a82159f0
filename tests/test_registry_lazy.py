"""A pattern's package is imported when the pattern is first asked for (issue 17: a command
that runs one pattern loads that one): the settings and Django's start-up load none, a role's
model is read from the patterns that have the role, the offline model still answers a schema
another package teaches, and a worker loads them all once it is ready."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from agents_app.llm import offline
from agents_app.patterns import PATTERNS, registry
from agents_app.patterns.base import Pattern
from agents_app.patterns.role_models import RoleModels, overrides_from

ROOT = Path(__file__).resolve().parents[1]

# Prints, as JSON, which pattern packages a fresh process has imported after ``code``.
PROBE = """
import json, sys, django
django.setup()
from agents_app.patterns import registry
{code}
loaded = [k for k in registry.PACKAGES if k in registry._loaded]
imported = [k for k, dotted in registry.PACKAGES.items() if dotted in sys.modules]
print(json.dumps({{"loaded": loaded, "imported": imported, "result": result}}))
"""


def fresh(code: str, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_MODEL_")}
    full.update({"DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "true", **env})
    out = subprocess.run([sys.executable, "-c", PROBE.format(code=code)], cwd=ROOT, env=full,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_django_start_up_and_the_settings_load_no_pattern():
    seen = fresh("from django.conf import settings; result = len(registry.PACKAGES); "
                 "list(registry.PATTERNS)")
    # (The reviews app's models import code review's constants, in its package.)
    assert seen == {"loaded": [], "imported": ["code_review"], "result": 10}


def test_asking_for_one_pattern_loads_that_one_and_what_it_builds_on():
    seen = fresh("from agents_app.engine.commit import TERMINAL_HOOKS; "
                 "p = registry.PATTERNS['apply_fixes']; "
                 "result = [p.name, sorted(TERMINAL_HOOKS)]")
    # apply_fixes stops at plan_execute_review's merge gate: that pattern is loaded first,
    # and both end-of-run hooks are registered (the Django side is set up per package).
    assert seen["loaded"] == ["plan_execute_review", "apply_fixes"]
    assert seen["result"] == ["apply_fixes", ["apply_fixes", "plan_execute_review"]]
    assert "debate" not in seen["imported"] and "vote" not in seen["imported"]


def test_one_roles_model_loads_only_what_has_the_role():
    seen = fresh("from django.conf import settings; "
                 "registry.PATTERNS['code_review']; "
                 "result = [settings.QUORUM_ROLE_MODELS['style'], "
                 "settings.QUORUM_ROLE_MODELS['planner']]",
                 QUORUM_CHEAP_MODEL="offline/default", QUORUM_MODEL_PLANNER="gpt-4o-mini")
    # "style" is code review's (cheap); "planner" is set in the environment: neither needs
    # another package.
    assert seen["loaded"] == ["code_review"]
    assert seen["imported"] == ["code_review"]
    assert seen["result"] == ["offline/default", "gpt-4o-mini"]


def test_a_role_no_loaded_pattern_has_loads_them_all_to_find_it():
    seen = fresh("from django.conf import settings; "
                 "result = settings.QUORUM_ROLE_MODELS['judge']")
    assert seen["result"] == "offline/default" and len(seen["loaded"]) == 10


def test_the_offline_model_answers_a_schema_a_package_not_yet_loaded_teaches():
    seen = fresh("from agents_app.llm import offline; "
                 "result = offline.reply('judge', 'Conclusion', "
                 "[{'role': 'user', 'content': '## Task\\nTea or coffee?'}])")
    assert "debate" in seen["loaded"]
    assert json.loads(seen["result"]) == json.loads(offline.reply(
        "judge", "Conclusion", [{"role": "user", "content": "## Task\nTea or coffee?"}]))
    assert offline.reply("judge", "Conclusion", [{"role": "user", "content": "x"}]) \
        != offline.direct([{"role": "user", "content": "x"}])


def test_a_ready_worker_has_every_pattern_loaded():
    seen = fresh("import gc; from agents_app import tasks; tasks._settle(sender=None); "
                 "gc.unfreeze(); result = None")
    assert seen["loaded"] == list(registry.PACKAGES)


def test_role_models_match_every_patterns_roles_and_kinds(settings):
    roles = settings.QUORUM_ROLE_MODELS
    assert isinstance(roles, RoleModels)
    kinds = registry.role_defaults()
    assert set(roles) == set(kinds) and len(roles) == len(kinds)
    for role, kind in kinds.items():
        assert roles[role] == roles.overrides.get(role, roles.by_kind[kind])
    assert set(roles.values()) <= roles.possible()
    with pytest.raises(KeyError):
        roles["nobody"]


def test_overrides_come_from_the_environment_and_win():
    environ = {"QUORUM_MODEL_PLANNER": " gpt-4o ", "QUORUM_MODEL_": "x",
               "QUORUM_MODEL_JUDGE": "  ", "OTHER": "y"}
    assert overrides_from(environ) == {"planner": "gpt-4o"}
    roles = RoleModels({"default": "offline/default", "cheap": "c", "other-family": "o"},
                       {"planner": "gpt-4o"})
    assert roles["planner"] == "gpt-4o" and roles["executor"] == "offline/default"
    assert roles.possible() == {"offline/default", "c", "o", "gpt-4o"}


class _Clash(Pattern):
    name = "clash"
    roles = ("planner",)
    role_defaults = {"planner": "cheap"}


def test_a_role_with_two_kinds_is_refused_when_the_second_loads(monkeypatch):
    PATTERNS["plan_execute"]  # has "planner" as a default-model role
    module = types.ModuleType("tests._clash_pattern")
    module.__file__ = __file__
    module.PATTERN = _Clash()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry.PACKAGES, "clash", module.__name__)
    with pytest.raises(ImportError, match="role 'planner' gets a 'cheap' model in 'clash' but "
                                          "a 'default' one in 'plan_execute'"):
        PATTERNS["clash"]
    assert "clash" not in registry._loaded


def test_a_package_registering_another_key_is_refused(monkeypatch):
    monkeypatch.setitem(registry.PACKAGES, "misnamed", "agents_app.patterns.debate")
    with pytest.raises(ImportError, match="registers 'debate', listed as 'misnamed'"):
        PATTERNS["misnamed"]


def test_listing_keys_and_membership_import_nothing_new():
    assert "debate" in PATTERNS and "nothing" not in PATTERNS
    assert list(PATTERNS) == list(registry.PACKAGES) and len(PATTERNS) == 10
    with pytest.raises(KeyError):
        PATTERNS["nothing"]
    assert offline.teach_all == registry.load_all
