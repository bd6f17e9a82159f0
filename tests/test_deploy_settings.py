"""Production settings, read from the environment alone, pass Django's deployment checks."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
