"""Production settings, read from the environment alone, pass Django's deployment checks —
the README's documented block among them — and a forwarded scheme is believed only when
QUORUM_BEHIND_PROXY says a proxy sets it."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # each test starts fresh Django processes under production settings


def check_deploy(**env):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("DJANGO_", "SECURE_", "SESSION_", "CSRF_")) and k != "DEBUG"}
    base.update({"SECRET_KEY": "x" * 60 + "-not-a-real-key-but-long-and-varied-0123456789",
                 "ALLOWED_HOSTS": "quorum.example.com", "DEBUG": "false",
                 "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env})
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level",
                           "WARNING"], cwd=ROOT, env=base, capture_output=True, text=True,
                          timeout=120)


def test_production_settings_pass_check_deploy(tmp_path):
    proc = check_deploy(SECURE_SSL_REDIRECT="true", SECURE_HSTS_SECONDS="31536000",
                        QUORUM_VAR_DIR=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout


def test_without_https_settings_the_checks_complain(tmp_path):
    proc = check_deploy(QUORUM_VAR_DIR=str(tmp_path))
    assert proc.returncode != 0
    assert "SECURE_HSTS_SECONDS" in proc.stdout + proc.stderr


def readme_production_env() -> dict[str, str]:
    """The environment block of the README's "Production" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Production", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```env\n(.*?)```", section, re.DOTALL)
    assert block, "README's Production section has no ```env block"
    return dict(line.split("=", 1) for line in block.group(1).splitlines() if "=" in line)


def test_the_readme_production_settings_pass_check_deploy(tmp_path):
    env = readme_production_env()
    assert {"SECRET_KEY", "ALLOWED_HOSTS", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS"} <= set(env)
    env["SECRET_KEY"] = secrets.token_urlsafe(50)  # the README's is a placeholder to replace
    proc = check_deploy(QUORUM_VAR_DIR=str(tmp_path), **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout


PROXY_SCRIPT = r"""
import django
django.setup()
from django.conf import settings
from django.test import Client
from django.test.utils import override_settings

plain = {**settings.STORAGES,
         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
with override_settings(STORAGES=plain):
    forwarded = Client(HTTP_HOST="quorum.example.com").get(
        "/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
print("RESULT", settings.SECURE_PROXY_SSL_HEADER, forwarded.status_code)
"""


@pytest.mark.parametrize("behind_proxy, header, status", [
    ("", "None", 301),  # a client's X-Forwarded-Proto is not believed: redirected to https
    ("true", "('HTTP_X_FORWARDED_PROTO', 'https')", 200),
])
def test_the_forwarded_scheme_is_believed_only_behind_a_proxy(tmp_path, behind_proxy, header,
                                                              status):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DJANGO_", "SECURE_", "SESSION_", "CSRF_", "QUORUM_BEHIND"))
           and k != "DEBUG"}
    env.update(readme_production_env())
    env.update({"SECRET_KEY": secrets.token_urlsafe(50), "QUORUM_VAR_DIR": str(tmp_path),
                "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "false",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    if behind_proxy:
        env["QUORUM_BEHIND_PROXY"] = behind_proxy
    proc = subprocess.run([sys.executable, "-c", PROXY_SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("RESULT ", 1)[1].strip() == f"{header} {status}"
