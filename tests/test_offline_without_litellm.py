"""The built-in offline model is called without LiteLLM (seconds of import, ~170 MB): a
review or a run with only the offline model configured never loads it, and its replies,
usage and cost are the ones its LiteLLM provider gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import litellm
import pytest

from agents_app.llm import offline, runtime
from agents_app.llm.gateway import Gateway, GatewayConfig
from agents_app.patterns.base import ModelError
from agents_app.patterns.plan_execute import PlanDraft

ROOT = Path(__file__).resolve().parents[1]
TASK = "## Task\nCollect the logs, then find the error, and finally write a report.\n"


def test_the_direct_call_gives_what_the_litellm_provider_gives(monkeypatch):
    g = Gateway(GatewayConfig(routes={"planner": "offline/default"}, allow_network=False))
    monkeypatch.setattr(litellm, "completion", lambda **kw: (_ for _ in ()).throw(
        AssertionError("LiteLLM called for the offline model")))
    messages = [{"role": "user", "content": TASK}]
    reply = g.complete("planner", messages, schema=PlanDraft)
    assert reply.data.steps == ["Collect the logs", "Find the error", "Write a report"]
    monkeypatch.undo()
    via = runtime.litellm().completion(model="offline/default", messages=messages,
                                       metadata={"quorum_role": "planner",
                                                 "quorum_schema": "PlanDraft"})
    assert via.choices[0].message.content == reply.text
    text, prompt, completion = offline.complete("planner", "PlanDraft", messages)
    assert (via.usage.prompt_tokens, via.usage.completion_tokens) == (prompt, completion)


def test_a_broken_offline_handler_is_the_calls_error(monkeypatch):
    monkeypatch.setitem(offline.HANDLERS, "PlanDraft", lambda m: 1 / 0)
    g = Gateway(GatewayConfig(routes={"planner": "offline/default"}, allow_network=False))
    with pytest.raises(ModelError, match="ZeroDivisionError") as err:
        g.complete("planner", [{"role": "user", "content": TASK}], schema=PlanDraft)
    assert err.value.retryable is False


def test_an_offline_review_never_imports_litellm(tmp_path):
    diff = tmp_path / "change.diff"
    diff.write_text("diff --git a/a.py b/a.py\nnew file mode 100644\n--- /dev/null\n+++ b/a.py\n"
                    "@@ -0,0 +1,2 @@\n+import subprocess\n+subprocess.call(input(), shell=True)\n")
    code = ("import sys, runpy; sys.argv = ['manage.py', 'review', sys.argv[1]]\n"
            "try:\n    runpy.run_path('manage.py', run_name='__main__')\n"
            "except SystemExit as e:\n    print('exit', e.code, 'litellm' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", DEBUG="true",
               QUORUM_VAR_DIR=str(tmp_path), QUORUM_ALLOW_MODEL_REQUESTS="false")
    env.pop("QUORUM_DEFAULT_MODEL", None)
    env.pop("DATABASE_URL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                   check=True, timeout=300)
    out = subprocess.run([sys.executable, "-c", code, str(diff)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "exit 1 False", out.stderr[-2000:]
