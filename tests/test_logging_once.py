"""Each log line once: under `make dev` a worker printed every Quorum line twice (the
"quorum" logger's own handler, then Celery's handler on the root logger). Checked in fresh
processes set up the way the web server and a Celery worker set up logging."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETUP = ("import logging, django; django.setup(); "
         "{extra}"
         "logging.getLogger('quorum.check').info('line-%s', 'once')")
WORKER = ("from config.celery import app; "
          "app.log.setup(loglevel='INFO', redirect_stdouts=False); ")


@pytest.mark.slow
@pytest.mark.parametrize("process", ["web", "worker"])
def test_a_quorum_log_line_is_printed_once(process, tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "true",
           "QUORUM_VAR_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    code = SETUP.format(extra=WORKER if process == "worker" else "")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    printed = out.stdout + out.stderr
    assert printed.count("line-once") == 1, printed
