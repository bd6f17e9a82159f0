"""Production settings in a subprocess (DEBUG false, configured from the environment alone, as
in test_deploy_settings): secure, HTTP-only session cookie and secure CSRF cookie on a real
sign-in, HSTS, and the Content-Security-Policy and other security headers on every response,
a 404 included."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_deploy_settings import ROOT

pytestmark = pytest.mark.slow  # fresh Django processes under production settings

SCRIPT = r"""
import json
import django
django.setup()
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.test.utils import override_settings

call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
User.objects.create_user("alice", password="a-long-password-123")
out = {name: getattr(settings, name) for name in (
    "DEBUG", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SESSION_COOKIE_HTTPONLY",
    "SESSION_COOKIE_SAMESITE", "CSRF_COOKIE_SAMESITE", "SECURE_HSTS_SECONDS")}

def cookie(response, name):
    c = response.cookies[name]
    return {"secure": bool(c["secure"]), "httponly": bool(c["httponly"]),
            "samesite": c["samesite"]}

# The static manifest is built by collectstatic at deployment; plain storage stands in here.
plain = {**settings.STORAGES,
         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
with override_settings(STORAGES=plain):
    client = Client(HTTP_HOST="quorum.example.com")
    page = client.get("/accounts/login/", secure=True)
    out["login"] = {"status": page.status_code, "headers": dict(page.headers),
                    "csrf_cookie": cookie(page, "csrftoken")}
    signed = client.post("/accounts/login/", {"username": "alice",
                         "password": "a-long-password-123"}, secure=True)
    out["signin"] = {"status": signed.status_code, "headers": dict(signed.headers),
                     "session_cookie": cookie(signed, "sessionid")}
    dash = client.get("/", secure=True)
    out["dashboard"] = {"status": dash.status_code, "headers": dict(dash.headers)}
    missing = client.get("/no-such-page/", secure=True)
    out["missing"] = {"status": missing.status_code, "headers": dict(missing.headers)}
    plain_http = Client(HTTP_HOST="quorum.example.com").get("/accounts/login/")
    out["http"] = {"status": plain_http.status_code, "location": plain_http.get("Location")}
print("RESULT " + json.dumps(out))
"""


def production(tmp_path, **env) -> dict:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("DJANGO_", "SECURE_", "SESSION_", "CSRF_"))
            and k not in ("DEBUG", "DATABASE_URL")}
    base.update({"SECRET_KEY": "x" * 60 + "-not-a-real-key-but-long-and-varied-0123456789",
                 "ALLOWED_HOSTS": "quorum.example.com", "DEBUG": "false",
                 "DJANGO_SETTINGS_MODULE": "config.settings", "QUORUM_VAR_DIR": str(tmp_path),
                 "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env})
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=base,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_production_cookies_and_headers(tmp_path):
    out = production(tmp_path, SECURE_SSL_REDIRECT="true", SECURE_HSTS_SECONDS="31536000")
    assert out["DEBUG"] is False
    assert out["SESSION_COOKIE_SECURE"] is True and out["CSRF_COOKIE_SECURE"] is True
    assert out["SESSION_COOKIE_HTTPONLY"] is True
    assert out["SESSION_COOKIE_SAMESITE"] == out["CSRF_COOKIE_SAMESITE"] == "Lax"

    # The cookies as a browser receives them.
    assert out["login"]["csrf_cookie"] == {"secure": True, "httponly": False, "samesite": "Lax"}
    assert out["signin"]["status"] == 302
    assert out["signin"]["session_cookie"] == {"secure": True, "httponly": True,
                                               "samesite": "Lax"}
    assert out["dashboard"]["status"] == 200  # the session works

    for name in ("login", "signin", "dashboard", "missing"):
        headers = {k.lower(): v for k, v in out[name]["headers"].items()}
        csp = headers.get("content-security-policy", "")
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp, name
        assert "object-src 'none'" in csp and "base-uri 'none'" in csp, name
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, name
        assert headers["strict-transport-security"] == "max-age=31536000; includeSubDomains; " \
                                                       "preload", name
        assert headers["x-frame-options"] == "DENY", name
        assert headers["x-content-type-options"] == "nosniff", name
        assert headers["referrer-policy"] == "same-origin", name
        assert headers["cross-origin-opener-policy"] == "same-origin", name
    assert out["missing"]["status"] == 404
    # Pages that render a script carry a fresh nonce in the header.
    assert "'nonce-" in out["login"]["headers"]["Content-Security-Policy"]
    # Plain HTTP is sent to HTTPS.
    assert out["http"]["status"] == 301
    assert out["http"]["location"] == "https://quorum.example.com/accounts/login/"


def test_cookies_stay_secure_by_default_without_https_settings(tmp_path):
    """Only DEBUG, SECRET_KEY and ALLOWED_HOSTS set: the cookies are still Secure."""
    out = production(tmp_path)
    assert out["SESSION_COOKIE_SECURE"] is True and out["CSRF_COOKIE_SECURE"] is True
    assert out["signin"]["session_cookie"]["secure"] is True
    assert out["signin"]["session_cookie"]["httponly"] is True
    assert "content-security-policy" in {k.lower() for k in out["login"]["headers"]}
